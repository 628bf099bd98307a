"""Memory endpoints (W2, M2-M6). Thin: parse, call one selector or service, serialize."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import BaseParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory import services
from memory.api import serializers as s
from memory.api.permissions import IsExpert, IsExpertOrReadOnly
from memory.experiences_md import ExperiencesFileError
from memory.models import Experience
from memory.selectors import experience_list, experiences_visible_to
from memory.skills import UnknownSkill, get_skill, load_skills
from traces.api.errors import RequestTooLarge
from traces.api.parsers import BoundedJSONParser
from traces.api.serializers import ControlResponseSerializer, ErrorSerializer
from traces.services import runs as trace_services
from traces.storable import without_nul

ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 403: ErrorSerializer, 404: ErrorSerializer}
CODE = OpenApiParameter("code", str, OpenApiParameter.PATH, description="Experience code, e.g. ex_001")


class BoundedMarkdownParser(BaseParser):
    """An experiences.md body (text/markdown or text/plain), bounded like JSON bodies."""

    media_type = "text/*"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        from django.conf import settings

        body = stream.read(settings.AGENT_MAX_REQUEST_BYTES + 1) if stream is not None else b""
        if len(body) > settings.AGENT_MAX_REQUEST_BYTES:
            raise RequestTooLarge(
                f"request body too large; the limit is {settings.AGENT_MAX_REQUEST_BYTES} bytes"
            )
        try:
            return {"text": without_nul(body.decode("utf-8"))}
        except UnicodeDecodeError:
            raise ValidationError({"text": "the file must be UTF-8"}) from None


class ExperienceAPIView(APIView):
    parser_classes = [BoundedJSONParser]
    permission_classes = [IsExpertOrReadOnly]

    def experience(self, request: Request, code: str) -> Experience:
        experience = experiences_visible_to(request.user).filter(code=code).first()
        if experience is None:
            raise NotFound(f"experience {code!r} does not exist")
        return experience


class ExperienceListView(ExperienceAPIView, generics.GenericAPIView):
    serializer_class = s.ExperienceSerializer

    def get_queryset(self) -> QuerySet[Experience]:
        query = s.ExperienceListQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        return experience_list(user=self.request.user, filters=query.validated_data)

    @extend_schema(
        parameters=[s.ExperienceListQuerySerializer],
        responses={200: s.ExperienceSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        """Experiences: experts see all (filter by status for the review queue), others approved ones."""
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=s.ExperienceSerializer, responses={201: s.ExperienceSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        """Write an experience by hand (experts). Draft unless a status is given."""
        body = s.ExperienceSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        experience = services.experience_create(user=request.user, **body.validated_data)
        return Response(s.ExperienceSerializer(experience).data, status=status.HTTP_201_CREATED)


class ExperienceDetailView(ExperienceAPIView):
    @extend_schema(parameters=[CODE], responses={200: s.ExperienceSerializer, **ERRORS})
    def get(self, request: Request, code: str) -> Response:
        """One experience."""
        return Response(s.ExperienceSerializer(self.experience(request, code)).data)

    @extend_schema(
        parameters=[CODE], request=s.ExperienceSerializer, responses={200: s.ExperienceSerializer, **ERRORS}
    )
    def patch(self, request: Request, code: str) -> Response:
        """Edit an experience (experts): text, tags, category, status, counts."""
        experience = self.experience(request, code)
        body = s.ExperienceSerializer(experience, data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        experience = services.experience_update(
            experience=experience, user=request.user, **body.validated_data
        )
        return Response(s.ExperienceSerializer(experience).data)

    @extend_schema(parameters=[CODE], responses={204: None, **ERRORS})
    def delete(self, request: Request, code: str) -> Response:
        """Delete an experience (experts); retiring keeps it on record instead."""
        self.experience(request, code).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class ExperienceActionView(ExperienceAPIView):
    """POST /api/experiences/{code}/{approve|retire|helpful|harmful} (experts)."""

    permission_classes = [IsExpert]
    action = ""

    @extend_schema(parameters=[CODE], request=None, responses={200: s.ExperienceSerializer, **ERRORS})
    def post(self, request: Request, code: str) -> Response:
        experience = self.experience(request, code)
        if self.action == "approve":
            experience = services.experience_approve(experience=experience, user=request.user)
        elif self.action == "retire":
            experience = services.experience_retire(experience=experience, user=request.user)
        else:
            experience = services.experience_mark(experience=experience, helpful=self.action == "helpful")
        return Response(s.ExperienceSerializer(experience).data)


class ExperienceExportView(ExperienceAPIView):
    @extend_schema(
        parameters=[s.ExperienceListQuerySerializer],
        responses={(200, "text/markdown"): OpenApiResponse(description="experiences.md"), **ERRORS},
    )
    def get(self, request: Request) -> HttpResponse:
        """Download experiences.md (experts: every experience, or filtered; others: approved)."""
        query = s.ExperienceListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        text = services.experiences_export(
            queryset=experience_list(user=request.user, filters=query.validated_data)
        )
        response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="experiences.md"'
        return response


class ExperienceImportView(ExperienceAPIView):
    parser_classes = [BoundedJSONParser, BoundedMarkdownParser]
    permission_classes = [IsExpert]

    @extend_schema(
        request={"application/json": s.ExperienceImportSerializer, "text/markdown": str},
        responses={200: s.ExperienceImportResultSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        """Upload experiences.md (experts): creates or replaces by id, all or nothing.

        A malformed block answers 400 with its line number and imports nothing.
        """
        body = s.ExperienceImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            result = services.experiences_import(text=body.validated_data["text"])
        except ExperiencesFileError as exc:
            return Response(
                {"error": str(exc), "code": "malformed_experiences", "line": exc.line},
                status=status.HTTP_400_BAD_REQUEST,
            )
        return Response(result)


class TraceReflectView(APIView):
    parser_classes = [BoundedJSONParser]
    permission_classes = [IsAuthenticated]

    @extend_schema(
        parameters=[OpenApiParameter("trace_id", str, OpenApiParameter.PATH)],
        request=s.ReflectSerializer,
        responses={202: ControlResponseSerializer, 409: ErrorSerializer, **ERRORS},
    )
    def post(self, request: Request, trace_id: str) -> Response:
        """Reflect on a trace: a side branch off its head extracts draft experiences (a worker runs it)."""
        body = s.ReflectSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        trace = trace_services.trace_reflect(
            user=request.user, trace_id=trace_id, focus=body.validated_data["focus"]
        )
        return Response({"trace_id": trace.trace_id, "status": "started"}, status=status.HTTP_202_ACCEPTED)


class SkillListView(APIView):
    @extend_schema(responses={200: s.SkillSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        """Every skill (built-in, user, project) by name."""
        skills = sorted(load_skills().values(), key=lambda skill: skill.name)
        return Response(s.SkillSerializer(skills, many=True).data)


class SkillDetailView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("name", str, OpenApiParameter.PATH)],
        responses={200: s.SkillDetailSerializer, **ERRORS},
    )
    def get(self, request: Request, name: str) -> Response:
        """One skill with its body."""
        try:
            skill = get_skill(name)
        except UnknownSkill as exc:
            raise NotFound(str(exc)) from None
        return Response(s.SkillDetailSerializer(skill).data)

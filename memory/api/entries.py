"""Memory entries over the API (M8): `/api/memory` and `/api/memory/{id}`, plus
memory.md export and import. Users reach their own entries, staff everyone's;
someone else's entry is a 404. Writes pass the write gate (400 `memory_refused`)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.api.views import ERRORS, BoundedMarkdownParser
from memory.entries.gate import Draft, MemoryRefused
from memory.entries.markdown import MemoryFileError
from memory.entries.selectors import Scope, memory_entries_visible_to
from memory.entries.services import (
    MemoryConflict,
    memory_entries_export,
    memory_entries_import,
    memory_entry_delete,
    memory_entry_update,
    memory_entry_write,
)
from memory.models import MemoryEntry, MemoryType
from traces.api.errors import error_response
from traces.api.fields import StrictCharField
from traces.api.parsers import BoundedJSONParser
from traces.api.requests import QuerySerializer
from traces.api.serializers import ErrorSerializer

ENTRY_ID = OpenApiParameter("entry_id", int, OpenApiParameter.PATH, description="the entry's id")


class MemoryEntrySerializer(serializers.ModelSerializer):
    type = serializers.ChoiceField(MemoryType.choices)
    name = StrictCharField(max_length=200)
    description = StrictCharField(max_length=500, required=False, allow_blank=True)
    keywords = serializers.ListField(child=StrictCharField(max_length=100), required=False, max_length=50)
    content = StrictCharField()
    project = StrictCharField(
        max_length=100, required=False, allow_blank=True, help_text='a project name; "" = every run'
    )
    owner = serializers.CharField(source="owner.username", read_only=True, allow_null=True, default=None)

    class Meta:
        model = MemoryEntry
        fields = [
            "id",
            "type",
            "name",
            "description",
            "keywords",
            "content",
            "project",
            "saved_at",
            "owner",
            "trace_id",
        ]
        read_only_fields = ["id", "saved_at", "owner", "trace_id"]


class MemoryListQuerySerializer(QuerySerializer):
    type = serializers.ChoiceField(MemoryType.choices, required=False)
    project = serializers.CharField(required=False, allow_blank=True, help_text='"" = entries of no project')


class MemoryImportSerializer(serializers.Serializer):
    text = StrictCharField(trim_whitespace=False, allow_blank=True, help_text="a memory.md file")


class MemoryImportResultSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    replaced = serializers.IntegerField()


def _draft(data: dict[str, Any], entry: MemoryEntry | None = None) -> Draft:
    def value(name: str, default: Any) -> Any:
        return data.get(name, getattr(entry, name) if entry is not None else default)

    return Draft(
        type=value("type", ""),
        name=value("name", ""),
        description=value("description", ""),
        keywords=list(value("keywords", [])),
        content=value("content", ""),
    )


def _refused(exc: MemoryRefused) -> Response:
    return error_response(f"memory not saved: {exc}", "memory_refused", status.HTTP_400_BAD_REQUEST)


class MemoryAPIView(APIView):
    parser_classes = [BoundedJSONParser]
    permission_classes = [IsAuthenticated]

    def entry(self, request: Request, entry_id: int) -> MemoryEntry:
        in_range = 0 < entry_id < 2**63  # a bigger id is no row, not a database error
        entry = memory_entries_visible_to(request.user).filter(pk=entry_id).first() if in_range else None
        if entry is None:
            raise NotFound(f"memory entry {entry_id} does not exist")
        return entry


class MemoryListView(MemoryAPIView, generics.GenericAPIView):
    serializer_class = MemoryEntrySerializer

    def get_queryset(self) -> QuerySet[MemoryEntry]:
        query = MemoryListQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        entries = memory_entries_visible_to(self.request.user)
        return entries.filter(**query.validated_data)

    @extend_schema(
        parameters=[MemoryListQuerySerializer], responses={200: MemoryEntrySerializer(many=True), **ERRORS}
    )
    def get(self, request: Request) -> Response:
        """Your memory entries, newest first (staff: everyone's)."""
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        request=MemoryEntrySerializer,
        responses={201: MemoryEntrySerializer, 200: MemoryEntrySerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        """Write an entry of yours: 201 new, 200 when it replaced your entry of the same
        project, type and name (any case). 400 `memory_refused` names what the gate refused."""
        body = MemoryEntrySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        scope = Scope(owner_id=request.user.pk, project=body.validated_data.get("project", ""))
        try:
            entry, created = memory_entry_write(scope=scope, draft=_draft(body.validated_data))
        except MemoryRefused as exc:
            return _refused(exc)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(MemoryEntrySerializer(entry).data, status=code)


class MemoryDetailView(MemoryAPIView):
    @extend_schema(parameters=[ENTRY_ID], responses={200: MemoryEntrySerializer, **ERRORS})
    def get(self, request: Request, entry_id: int) -> Response:
        """One entry with its body."""
        return Response(MemoryEntrySerializer(self.entry(request, entry_id)).data)

    @extend_schema(
        parameters=[ENTRY_ID],
        request=MemoryEntrySerializer,
        responses={200: MemoryEntrySerializer, 409: ErrorSerializer, **ERRORS},
    )
    def patch(self, request: Request, entry_id: int) -> Response:
        """Edit an entry; 409 `conflict` when another entry has the new type and name."""
        entry = self.entry(request, entry_id)
        body = MemoryEntrySerializer(entry, data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        try:
            entry = memory_entry_update(
                entry=entry,
                draft=_draft(body.validated_data, entry),
                project=body.validated_data.get("project"),
            )
        except MemoryRefused as exc:
            return _refused(exc)
        except MemoryConflict as exc:
            return error_response(str(exc), "conflict", status.HTTP_409_CONFLICT)
        return Response(MemoryEntrySerializer(entry).data)

    @extend_schema(parameters=[ENTRY_ID], responses={204: None, **ERRORS})
    def delete(self, request: Request, entry_id: int) -> Response:
        """Delete an entry."""
        memory_entry_delete(entry=self.entry(request, entry_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemoryExportView(MemoryAPIView):
    @extend_schema(responses={(200, "text/markdown"): OpenApiResponse(description="memory.md"), **ERRORS})
    def get(self, request: Request) -> HttpResponse:
        """Download your entries as memory.md (staff: everyone's)."""
        text = memory_entries_export(entries=memory_entries_visible_to(request.user))
        response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="memory.md"'
        return response


class MemoryImportView(MemoryAPIView):
    parser_classes = [BoundedJSONParser, BoundedMarkdownParser]

    @extend_schema(
        request={"application/json": MemoryImportSerializer, "text/markdown": str},
        responses={200: MemoryImportResultSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        """Upload memory.md as your entries, all or nothing: each replaces yours of the same
        project, type and name. 400 `malformed_memory` (with the line) or `memory_refused`."""
        body = MemoryImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            result = memory_entries_import(owner_id=request.user.pk, text=body.validated_data["text"])
        except MemoryFileError as exc:
            return error_response(str(exc), "malformed_memory", status.HTTP_400_BAD_REQUEST)
        except MemoryRefused as exc:
            return _refused(exc)
        return Response(result)

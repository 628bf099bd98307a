"""Correction endpoints (X6, issue 23 item 4): correct a message (a draft experience is
proposed), verify the approved experience on a fork, mark the result. Staff only."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from review.corrections import (
    correction_comparison,
    correction_create,
    correction_get,
    correction_judge,
    correction_verify,
    corrections_for,
)
from review.models import Correction, Verdict
from traces.api.fields import StrictCharField
from traces.api.permissions import IsExpert
from traces.api.views import ERRORS, TRACE_ID, TraceAPIView

SEQUENCE = OpenApiParameter("sequence", int, OpenApiParameter.PATH)
CORRECTION_ID = OpenApiParameter("correction_id", int, OpenApiParameter.PATH)


class CorrectionSerializer(serializers.ModelSerializer):
    author = serializers.CharField(source="author.get_username", allow_null=True, default=None)
    verdict_by = serializers.CharField(source="verdict_by.get_username", allow_null=True, default=None)
    experience = serializers.SerializerMethodField()
    comparison = serializers.SerializerMethodField()

    class Meta:
        model = Correction
        fields = (
            "id",
            "trace_id",
            "message_sequence",
            "author",
            "text",
            "experience",
            "original_head_sequence",
            "verify_after_sequence",
            "verified_at",
            "verdict",
            "verdict_by",
            "verdict_at",
            "created_at",
            "comparison",
        )

    def get_experience(self, correction: Correction) -> dict[str, Any] | None:
        e = correction.experience
        if e is None:
            return None
        return {"code": e.code, "status": e.status, "condition": e.condition, "rule": e.rule, "tags": e.tags}

    def get_comparison(self, correction: Correction) -> dict[str, Any] | None:
        found = correction_comparison(correction) if self.context.get("compare") else None
        if found is None:
            return None
        return {
            "a": {"head": correction.original_head_sequence, **found.a.outcome(), **found.a.figures()},
            "b": {"head": correction.trace.head_sequence, **found.b.outcome(), **found.b.figures()},
            "ancestor_sequence": found.ancestor.sequence if found.ancestor else None,
        }


class CorrectionCreateSerializer(serializers.Serializer):
    text = StrictCharField(max_length=5000, help_text="what the agent should have done here")


class VerdictSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=[Verdict.FIXED, Verdict.NOT_FIXED])


class ExpertView(TraceAPIView):
    permission_classes = [permissions.IsAuthenticated, IsExpert]


class MessageCorrectionsView(ExpertView):
    @extend_schema(
        parameters=[TRACE_ID, SEQUENCE],
        request=CorrectionCreateSerializer,
        responses={201: CorrectionSerializer, **ERRORS},
    )
    def post(self, request: Request, trace_id: str, sequence: int) -> Response:
        """Correct an assistant message of the main path; a draft experience is proposed from
        it (evidence: that message) for you to edit and approve."""
        body = CorrectionCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        made = correction_create(
            user=request.user, trace_id=trace_id, sequence=sequence, **body.validated_data
        )
        return Response(CorrectionSerializer(made).data, status=status.HTTP_201_CREATED)


class TraceCorrectionsView(ExpertView):
    @extend_schema(parameters=[TRACE_ID], responses={200: CorrectionSerializer(many=True), **ERRORS})
    def get(self, request: Request, trace_id: str) -> Response:
        trace = self.visible_trace(request, trace_id)
        found = corrections_for(request.user).filter(trace=trace)
        return Response(CorrectionSerializer(found, many=True).data)


class CorrectionDetailView(ExpertView):
    @extend_schema(parameters=[CORRECTION_ID], responses={200: CorrectionSerializer, **ERRORS})
    def get(self, request: Request, correction_id: int) -> Response:
        """A correction with, once verified, the original branch beside the verification branch."""
        found = correction_get(request.user, correction_id)
        return Response(CorrectionSerializer(found, context={"compare": True}).data)


class CorrectionVerifyView(ExpertView):
    @extend_schema(parameters=[CORRECTION_ID], request=None, responses={202: CorrectionSerializer, **ERRORS})
    def post(self, request: Request, correction_id: int) -> Response:
        """Fork the trace before the corrected message and re-run it with the approved experience."""
        verified = correction_verify(
            user=request.user, correction=correction_get(request.user, correction_id)
        )
        return Response(CorrectionSerializer(verified).data, status=status.HTTP_202_ACCEPTED)


class CorrectionVerdictView(ExpertView):
    @extend_schema(
        parameters=[CORRECTION_ID], request=VerdictSerializer, responses={200: CorrectionSerializer, **ERRORS}
    )
    def post(self, request: Request, correction_id: int) -> Response:
        """Mark the verification: fixed or not_fixed."""
        body = VerdictSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        judged = correction_judge(
            user=request.user,
            correction=correction_get(request.user, correction_id),
            verdict=body.validated_data["verdict"],
        )
        return Response(CorrectionSerializer(judged).data)

"""Approval endpoints (G5): list a trace's approvals, decide one."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from traces.api.fields import StrictCharField
from traces.api.requests import ConstrainedSerializer
from traces.api.serializers import ErrorSerializer
from traces.api.views import TRACE_ID, TraceAPIView
from traces.guards.confirm import approval_payload
from traces.services.approvals import approval_decide, approvals_for

ERRORS = {code: ErrorSerializer for code in (400, 401, 404, 409, 413)}
DECIDE_ERRORS = {**ERRORS, 403: ErrorSerializer}


class ApprovalSerializer(serializers.Serializer):
    approval_id = serializers.IntegerField()
    trace_id = serializers.CharField(help_text="the trace whose call it is: this one or a sub-agent's")
    tool_call_id = serializers.CharField()
    message_sequence = serializers.IntegerField()
    tool = serializers.CharField()
    arguments = serializers.JSONField()
    edited_arguments = serializers.JSONField(allow_null=True)
    risk = serializers.CharField()
    question = serializers.CharField(
        allow_blank=True, help_text="what the tool asks of the expert, if anything"
    )
    status = serializers.CharField()
    scope = serializers.CharField(help_text="call, or run: approved for the rest of the run")
    decided_by = serializers.CharField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    note = serializers.CharField(allow_blank=True)


class DecisionSerializer(ConstrainedSerializer):
    """Approve (arguments: the edited ones, or null for as asked) or deny (no arguments)."""

    # traces/services/approvals.py:approval_decide takes edited arguments with an approval only.
    # (A pattern, not an enum: drf-spectacular would turn an enum into a component.)
    request_constraints: ClassVar[dict[str, Any]] = {
        "allOf": [
            {
                "not": {
                    "required": ["decision", "arguments"],
                    "properties": {
                        "decision": {"type": "string", "pattern": "^deny$"},
                        "arguments": {"type": "object"},
                    },
                }
            },
            {
                "not": {
                    "required": ["decision", "scope"],
                    "properties": {
                        "decision": {"type": "string", "pattern": "^deny$"},
                        "scope": {"type": "string", "pattern": "^run$"},
                    },
                }
            },
        ]
    }

    decision = serializers.ChoiceField(choices=["approve", "deny"])
    arguments = serializers.DictField(
        required=False, allow_null=True, help_text="edited arguments (approve only)"
    )
    note = StrictCharField(required=False, allow_blank=True, default="")
    scope = serializers.ChoiceField(
        choices=["call", "run"],
        required=False,
        default="call",
        help_text="run (approve only): also approve every later call of this tool in the current run",
    )


class ApprovalListView(TraceAPIView):
    @extend_schema(parameters=[TRACE_ID], responses={200: ApprovalSerializer(many=True), **ERRORS})
    def get(self, request: Request, trace_id: str) -> Response:
        """The trace's approvals, pending and decided, oldest first."""
        approvals = approvals_for(user=request.user, trace_id=trace_id)
        return Response([approval_payload(a) for a in approvals])


class ApprovalDecideView(TraceAPIView):
    @extend_schema(
        parameters=[TRACE_ID],
        request=DecisionSerializer,
        responses={200: ApprovalSerializer, **DECIDE_ERRORS},
    )
    def post(self, request: Request, trace_id: str, approval_id: int) -> Response:
        """Approve (optionally with edited arguments) or deny a waiting tool call; the run resumes in a worker.

        Only experts (staff) may decide, unless the deployment sets AGENT_APPROVERS=owner (403 otherwise).
        """
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        approval = approval_decide(
            user=request.user,
            trace_id=trace_id,
            approval_id=approval_id,
            decision=body.validated_data["decision"],
            arguments=body.validated_data.get("arguments"),
            note=body.validated_data.get("note", ""),
            scope=body.validated_data.get("scope", "call"),
        )
        return Response(approval_payload(approval), status=status.HTTP_200_OK)

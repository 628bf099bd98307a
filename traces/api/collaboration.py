"""Humans and other agents talking to traces: answer an ask_human request (S3), the A2A webhook (S4)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.authentication import TokenAuthentication
from rest_framework.request import Request
from rest_framework.response import Response

from traces.api.fields import StrictCharField
from traces.api.serializers import ErrorSerializer
from traces.api.views import TRACE_ID, TraceAPIView
from traces.collaboration.humans import human_answer
from traces.collaboration.inbox import inbox_receive

ERRORS = {code: ErrorSerializer for code in (400, 401, 404, 409, 413)}


class AnswerSerializer(serializers.Serializer):
    answer = StrictCharField(trim_whitespace=False)


class AnswerResponseSerializer(serializers.Serializer):
    trace_id = serializers.CharField()
    status = serializers.CharField()
    parent_trace_id = serializers.CharField(allow_null=True)
    answered_by = serializers.CharField()


class HumanAnswerView(TraceAPIView):
    @extend_schema(
        parameters=[TRACE_ID], request=AnswerSerializer, responses={200: AnswerResponseSerializer, **ERRORS}
    )
    def post(self, request: Request, trace_id: str) -> Response:
        """Answer a waiting ask_human request (a human-type trace); the asking trace resumes in a worker."""
        body = AnswerSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        child = human_answer(user=request.user, trace_id=trace_id, answer=body.validated_data["answer"])
        return Response(
            {
                "trace_id": child.trace_id,
                "status": child.status,
                "parent_trace_id": child.parent_trace_id,
                "answered_by": request.user.get_username(),
            }
        )


@extend_schema_field(
    {
        "anyOf": [
            {"type": "string", "minLength": 1},
            {"type": "number"},
            {"type": "boolean"},
            {"type": "object", "minProperties": 1},
            {"type": "array", "items": {}, "minItems": 1},
        ]
    }
)
class A2AContentField(serializers.JSONField):
    """Any JSON value but null, "", [] or {} (traces/collaboration/inbox.py:inbox_receive refuses those)."""


class A2AMessageSerializer(serializers.Serializer):
    to_trace_id = StrictCharField(max_length=255)
    from_agent_id = StrictCharField(max_length=255)
    conversation_id = StrictCharField(max_length=255, required=False, allow_blank=True, default="")
    content = A2AContentField(help_text="text, or any JSON but null")


class A2AReceivedSerializer(serializers.Serializer):
    status = serializers.CharField()
    message_id = serializers.IntegerField()
    to_trace_id = serializers.CharField()


class A2AMessageWebhookView(TraceAPIView):
    """Machine-to-machine only: DRF token authentication, no session (so no CSRF surface)."""

    authentication_classes = [TokenAuthentication]

    @extend_schema(request=A2AMessageSerializer, responses={202: A2AReceivedSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        """Deliver a message from another agent to a trace's inbox (read with the check_messages tool)."""
        body = A2AMessageSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        message = inbox_receive(
            user=request.user,
            to_trace_id=data["to_trace_id"],
            from_agent_id=data["from_agent_id"],
            conversation_id=data.get("conversation_id", ""),
            content=data["content"],
        )
        return Response(
            {"status": "received", "message_id": message.pk, "to_trace_id": message.to_trace_id},
            status=status.HTTP_202_ACCEPTED,
        )

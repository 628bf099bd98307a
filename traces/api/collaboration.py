"""Humans and other agents talking to traces: answer an ask_human request (S3), the A2A webhook (S4)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from traces.api.authentication import TokenAuthentication
from traces.api.fields import StrictCharField
from traces.api.serializers import ErrorSerializer
from traces.api.views import TRACE_ID, TraceAPIView
from traces.collaboration import remote
from traces.collaboration.humans import human_answer
from traces.collaboration.inbox import inbox_receive
from traces.models import Trace
from traces.runner import RunError, TraceNotFound

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


class RemoteUnavailable(RunError):
    status = 503


class RemoteQuerySerializer(serializers.Serializer):
    id = StrictCharField(max_length=600, help_text="the remote sub-trace's id, agent://host:port/task_id")


class RemoteMessageSerializer(serializers.Serializer):
    role = serializers.CharField(help_text="user or agent")
    content = serializers.CharField()


class RemoteTraceSerializer(serializers.Serializer):
    remote_id = serializers.CharField()
    agent = serializers.CharField()
    status = serializers.CharField()
    status_text = serializers.CharField()
    message_count = serializers.IntegerField()
    messages = RemoteMessageSerializer(many=True)


def remote_sub_trace(trace: Trace, remote_id: str) -> remote.RemoteTrace:
    """A remote child of `trace` read through its agent: TraceNotFound when it is not one,
    RemoteUnavailable (503) when its agent is not configured or does not answer."""
    try:
        return remote.read_remote_trace(trace, remote_id)
    except LookupError as exc:
        raise TraceNotFound(str(exc)) from None
    except remote.RemoteAgentError as exc:
        raise RemoteUnavailable(str(exc)) from None


class RemoteSubTraceView(TraceAPIView):
    @extend_schema(
        parameters=[TRACE_ID, RemoteQuerySerializer],
        responses={200: RemoteTraceSerializer, **ERRORS, 503: ErrorSerializer},
    )
    def get(self, request: Request, trace_id: str) -> Response:
        """A remote sub-trace of this trace (agent://…, started by its agent tool), read
        through to the remote agent with the configured key: status and messages."""
        query = RemoteQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = remote_sub_trace(self.visible_trace(request, trace_id), query.validated_data["id"])
        return Response(RemoteTraceSerializer(found).data)

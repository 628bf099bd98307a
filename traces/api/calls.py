"""POST /api/calls: one model call without tools, recorded as a trace of mode `call` (seed 004)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from traces.api import serializers as s
from traces.api.fields import StrictCharField
from traces.api.requests import MessagesField
from traces.api.views import ERRORS, TraceAPIView
from traces.services.calls import trace_call


class CallSerializer(serializers.Serializer):
    messages = MessagesField(required=False, help_text="OpenAI-format messages, at least one from the user")
    task = StrictCharField(required=False, allow_blank=False, help_text="Shorthand for one user message")
    prompt_name = StrictCharField(
        required=False, allow_null=True, max_length=200, help_text="which prompt this call is (for filtering)"
    )
    model = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=200)
    name = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=200)
    llm_params = serializers.DictField(
        required=False,
        help_text="model parameters: temperature and the run settings' llm_params (top_p, max_tokens, …)",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("messages" in attrs) == ("task" in attrs):
            raise serializers.ValidationError("send either messages or task (one of them)")
        if "task" in attrs:
            attrs["messages"] = [{"role": "user", "content": attrs.pop("task")}]
        return attrs


class CallTraceSerializer(s.TraceSerializer):
    class Meta(s.TraceSerializer.Meta):
        fields = [*s.TraceSerializer.Meta.fields, "prompt_name"]
        read_only_fields = fields


class CallView(TraceAPIView):
    @extend_schema(request=CallSerializer, responses={201: CallTraceSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        """Call the model once, without tools, and answer with the trace that records it.

        Answers when the model does (within AGENT_LLM_TIMEOUT and its retries): `status`
        is `completed` with the reply in `result_summary`, or `failed` with the model's
        error in `error_message`. The trace reads like any other (messages, events).
        """
        body = CallSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        trace = trace_call(
            user=request.user,
            messages=data["messages"],
            prompt_name=data.get("prompt_name"),
            model=data.get("model") or None,
            name=data.get("name"),
            llm_params=data.get("llm_params"),
        )
        return Response(CallTraceSerializer(trace).data, status=status.HTTP_201_CREATED)

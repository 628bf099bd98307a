"""What a model call was sent ("what the model saw", issue 22)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from traces.api.views import ERRORS, TRACE_ID, TraceAPIView
from traces.observability.requests import model_request

SEQUENCE = OpenApiParameter(
    "sequence", int, OpenApiParameter.PATH, description="An assistant message's sequence"
)


class ModelRequestSerializer(serializers.Serializer):
    sequence = serializers.IntegerField()
    message_id = serializers.CharField()
    model = serializers.CharField()
    messages = serializers.ListField(child=serializers.DictField())
    tools = serializers.ListField(child=serializers.DictField(), allow_null=True)
    parameters = serializers.DictField()


class MessageRequestView(TraceAPIView):
    @extend_schema(parameters=[TRACE_ID, SEQUENCE], responses={200: ModelRequestSerializer, **ERRORS})
    def get(self, request: Request, trace_id: str, sequence: int) -> Response:
        """The exact request of the model call that produced assistant message `sequence`.

        The messages as sent (after compaction, microcompact, context, experience and
        memory injection, tool_call id rewriting, images inline), the tools offered and
        the parameters. 404 `request_not_found` for a message without one.
        """
        trace = self.visible_trace(request, trace_id)
        return Response(model_request(trace_id=trace.trace_id, sequence=sequence).as_dict())

"""GET /api/tools: the tools a preset offers runs, built-in and from MCP servers, with their source."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from traces.api.errors import error_response
from traces.api.serializers import ErrorSerializer
from traces.runner.extensions import extensions


class ToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    # the API's word for it; DRF sets Field.source on each instance, so this class attribute does not clash
    source = serializers.CharField(  # type: ignore[assignment]
        help_text='"builtin", or "mcp:<server>" for a tool of an MCP server'
    )
    risk = serializers.CharField(
        help_text='"safe" or "risky" (risky calls wait for an expert under ask-risky)'
    )
    description = serializers.CharField()
    parameters = serializers.JSONField(help_text="the JSON schema of its arguments, as the model sees it")


class ToolListView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "preset", str, required=False, description="an agent preset (default: the default one)"
            )
        ],
        responses={200: ToolSerializer(many=True), 400: ErrorSerializer, 401: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        """The tools a run of the preset is offered when it names none itself, by name."""
        try:
            preset = extensions.require_preset(request.query_params.get("preset") or None)
        except LookupError as exc:
            return error_response(str(exc.args[0] if exc.args else exc), "unknown_preset", 400)
        offered = extensions.require_tools().select(allowed=preset.allowed_tools, denied=preset.denied_tools)
        listed = sorted((_describe(tool) for tool in offered), key=lambda t: t["name"])
        return Response(ToolSerializer(listed, many=True).data)


def _describe(tool: Any) -> dict[str, Any]:
    server = getattr(tool, "server", "")
    return {
        "name": tool.name,
        "source": f"mcp:{server}" if server else "builtin",
        "risk": tool.risk,
        "description": tool.description,
        "parameters": tool.parameters,
    }

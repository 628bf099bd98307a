"""Where time, tokens and context went (issue 22): what a model call was sent."""

from __future__ import annotations

import json
import re
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from portal.views.common import visible_trace
from traces.observability.requests import RequestNotFound, SeenRequest, model_request
from traces.observability.waterfall import trace_waterfall

DATA_URL = re.compile(r"^(data:[\w/+.-]+;base64,)(.{64,})$", re.S)


@login_required
@require_GET
def message_request(request: HttpRequest, trace_id: str, sequence: int) -> HttpResponse:
    """What the model saw: the exact request of the call that wrote assistant message `sequence`."""
    trace = visible_trace(request, trace_id)
    try:
        seen: SeenRequest | None = model_request(trace_id=trace.trace_id, sequence=sequence)
    except RequestNotFound:
        seen = None
    context: dict[str, Any] = {"trace": trace, "sequence": sequence, "seen": seen}
    if seen is not None:
        context["messages"] = [_shown(i, m) for i, m in enumerate(seen.messages)]
        context["tools"] = [_tool_name(t) for t in seen.tools or []]
        context["tools_json"] = json.dumps(seen.tools, indent=2, ensure_ascii=False)
        context["parameters"] = json.dumps(seen.parameters, sort_keys=True)
    return render(request, "portal/model_request.html", context, status=200 if seen else 404)


@login_required
@require_GET
def waterfall(request: HttpRequest, trace_id: str) -> HttpResponse:
    """The trace's timing waterfall: model calls, tool calls, sub-traces, compactions and waits on one axis."""
    trace = visible_trace(request, trace_id)
    return render(request, "portal/waterfall.html", {"trace": trace, "w": trace_waterfall(trace)})


def _shown(index: int, message: dict[str, Any]) -> dict[str, Any]:
    """One message of the request for the page: its JSON, inline images cut to a note (escaped by the template)."""
    text = json.dumps(_short_images(message), indent=2, ensure_ascii=False)
    return {"index": index, "role": message.get("role", "?"), "chars": len(text), "json": text}


def _short_images(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _short_images(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short_images(v) for v in value]
    if isinstance(value, str) and (match := DATA_URL.match(value)):
        return f"{match.group(1)}… ({len(match.group(2)):,} characters)"
    return value


def _tool_name(tool: dict[str, Any]) -> str:
    function = tool.get("function") if isinstance(tool, dict) else None
    return str(function.get("name", "?")) if isinstance(function, dict) else "?"

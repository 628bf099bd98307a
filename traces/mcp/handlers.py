"""What each MCP tool does, as sync functions of (user, arguments) -> JSON.

Thin like the REST views they mirror (traces/api/views.py, approvals.py,
collaboration.py): the same request serializers check the arguments, the same
services write and the same selectors read, with `traces_visible_to(user)` for
visibility, so an MCP client can do exactly what the user's API token can.

Errors: anything the REST API would answer with an error status (a RunError's
400/403/404/409, a DRF validation error, a database outage's 503) becomes
`McpCallError`, whose text is the API's JSON error shape plus the HTTP status the
API would have used: `{"error": <reason>, "code": <code>, "status": 409}`.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import InterfaceError, OperationalError
from rest_framework import exceptions

from agentsite.outage import REASON as OUTAGE_REASON
from traces.api import requests as r
from traces.api import serializers as s
from traces.api.approvals import DecisionSerializer
from traces.api.collaboration import AnswerSerializer
from traces.api.errors import api_exception_handler
from traces.collaboration.humans import HUMAN, human_answer
from traces.filters import TraceFilter
from traces.guards.confirm import approval_payload
from traces.models import ApprovalStatus, Trace, TraceStatus
from traces.runner import RunError
from traces.selectors import trace_main_path, trace_visible_or_404, traces_visible_to
from traces.services import approvals as approval_services
from traces.services import runs as run_services

PAGE = 50  # messages of the main path per get_trace page, traces per list_traces page
MAX_PAGE = 500


class McpCallError(Exception):
    """A refused call: its text is the API's error body with the status it would have."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(json.dumps(body))
        self.body = body


def api_error(exc: Exception) -> McpCallError | None:
    """The REST API's answer to `exc` (same reason, code and status), or None for a bug."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        return McpCallError({"error": OUTAGE_REASON, "code": "unavailable", "status": 503})
    if not isinstance(exc, (RunError, exceptions.APIException)):
        return None
    response = api_exception_handler(exc, {})
    if response is None:
        return None
    return McpCallError({**response.data, "status": response.status_code})


def _valid(serializer: Any) -> dict[str, Any]:
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _started(trace: Trace) -> dict[str, Any]:
    return {"trace_id": trace.trace_id, "status": "started"}


def start_run(user: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """POST /api/traces."""
    body = r.TraceStartSerializer(data=arguments)
    _valid(body)
    trace = run_services.trace_start(user=user, **body.start_arguments())
    return _started(trace)


def continue_run(user: Any, trace_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """POST /api/traces/{id}/run: continue, rewind (after_sequence + messages) or regenerate."""
    body = r.TraceRunSerializer(data=arguments)
    _valid(body)
    trace = run_services.trace_continue(user=user, trace_id=trace_id, **body.continue_arguments())
    return _started(trace)


def stop_run(user: Any, trace_id: str) -> dict[str, Any]:
    """POST /api/traces/{id}/stop."""
    trace = run_services.trace_stop(user=user, trace_id=trace_id)
    state = "stopped" if trace.status == TraceStatus.STOPPED else "stopping"
    return {"trace_id": trace.trace_id, "status": state}


def get_trace(user: Any, trace_id: str, *, after: int = 0, limit: int = PAGE) -> dict[str, Any]:
    """GET /api/traces/{id} (status, result, goal tree, sub-traces, totals), one page of
    the main path (GET /api/traces/{id}/messages?after=&limit=) and what the trace waits
    for: its pending approvals and its open questions to a human."""
    page = _valid(r.MessagesQuerySerializer(data={"after": after, "limit": min(limit, MAX_PAGE)}))
    trace = trace_visible_or_404(user=user, trace_id=trace_id, select_related=("owner",))
    messages = trace_main_path(
        trace_id=trace.trace_id, head_sequence=trace.head_sequence, after_sequence=page["after"]
    )
    shown = messages[: page["limit"]]
    pending = approval_services.approvals_for(user=user, trace_id=trace.trace_id).filter(
        status=ApprovalStatus.PENDING
    )
    questions = traces_visible_to(user).filter(
        parent_trace_id=trace.trace_id, agent_type=HUMAN, status=TraceStatus.WAITING
    )
    return {
        "trace": s.TraceDetailSerializer(trace).data,
        "main_path": s.MessageSerializer(shown, many=True).data,
        "next_after": shown[-1].sequence if len(messages) > len(shown) else None,
        "pending_approvals": [approval_payload(a) for a in pending],
        "open_questions": [
            {"trace_id": q.trace_id, "question": q.task, "created_at": q.created_at.isoformat()}
            for q in questions.order_by("created_at")
        ],
    }


def list_traces(user: Any, filters: dict[str, Any], *, limit: int = PAGE, offset: int = 0) -> dict[str, Any]:
    """GET /api/traces?status=&q=&...&limit=&offset=: the traces `user` may see, newest first."""
    query = _valid(r.TraceListQuerySerializer(data={k: v for k, v in filters.items() if v is not None}))
    limit, offset = max(1, min(limit, MAX_PAGE)), max(0, offset)
    visible = traces_visible_to(user).select_related("owner").order_by("-created_at", "-trace_id")
    traces = TraceFilter(query, queryset=visible).qs
    count = traces.count()
    page = list(traces[offset : offset + limit])
    return {
        "count": count,
        "traces": s.TraceSerializer(page, many=True).data,
        "next_offset": offset + len(page) if offset + len(page) < count else None,
    }


def answer_question(user: Any, trace_id: str, answer: Any) -> dict[str, Any]:
    """POST /api/traces/{question}/answer: the asking trace resumes in a worker."""
    data = _valid(AnswerSerializer(data={"answer": answer}))
    child = human_answer(user=user, trace_id=trace_id, answer=data["answer"])
    return {
        "trace_id": child.trace_id,
        "status": child.status,
        "parent_trace_id": child.parent_trace_id,
        "answered_by": user.get_username(),
    }


def decide_approval(user: Any, trace_id: str, approval_id: int, arguments: dict[str, Any]) -> dict[str, Any]:
    """POST /api/traces/{id}/approvals/{approval_id}: experts (staff) only, as the API."""
    data = _valid(DecisionSerializer(data=arguments))
    approval = approval_services.approval_decide(
        user=user,
        trace_id=trace_id,
        approval_id=approval_id,
        decision=data["decision"],
        arguments=data.get("arguments"),
        note=data.get("note", ""),
        scope=data.get("scope", "call"),
    )
    return approval_payload(approval)

"""What a trace waits for (P1): an approval, an answer, a sub-agent, or its step limit.

Read for a whole page of traces at once, in at most two queries whatever the
page's size (the pending approvals of the waiting traces and of their waiting
children, and those children), so the trace list and its live refresh say it
without a query per row. Sub-agents never start sub-agents nor ask a human
(traces/collaboration/subtraces.py:NO_RECURSION), so one level of children is
all a waiting trace can wait on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.db.models import Q

from traces.collaboration.humans import HUMAN
from traces.models import Approval, ApprovalStatus, Trace, TraceStatus
from traces.runner.config import STEP_LIMIT_PREFIX

STEP_LIMITED = "paused: step limit reached (continue to go on)"
QUESTION_CHARS = 60


def step_limited(trace: Trace) -> bool:
    """The run paused at its step limit: stopped, and a continue goes on (not a failure)."""
    return trace.status == TraceStatus.STOPPED and (trace.error_message or "").startswith(STEP_LIMIT_PREFIX)


def traces_waiting_for(traces: Iterable[Trace]) -> dict[str, str]:
    """`trace_id -> "waiting: approval of bash"`-style text for the waiting and the
    step-limited traces among `traces`; the others are left out."""
    traces = list(traces)
    said = {t.trace_id: STEP_LIMITED for t in traces if step_limited(t)}
    waiting = [t for t in traces if t.status == TraceStatus.WAITING]
    if not waiting:
        return said
    ids = [t.trace_id for t in waiting]
    children: dict[str, list[Trace]] = defaultdict(list)
    for child in Trace.objects.filter(parent_trace_id__in=ids, status=TraceStatus.WAITING).only(
        "trace_id", "parent_trace_id", "agent_type", "name", "task", "context"
    ):
        children[child.parent_trace_id or ""].append(child)
    tools = _pending_tools(ids)
    for trace in waiting:
        said[trace.trace_id] = "waiting: " + _reasons(trace, children[trace.trace_id], tools)
    return said


def _pending_tools(ids: list[str]) -> dict[str, list[str]]:
    """The tool names of the pending approvals of `ids` and of their waiting children, by trace."""
    pending = (
        Approval.objects.filter(
            Q(trace_id__in=ids) | Q(trace__parent_trace_id__in=ids, trace__status=TraceStatus.WAITING),
            status=ApprovalStatus.PENDING,
        )
        .order_by("requested_at", "pk")
        .values_list("trace_id", "tool_name")
    )
    tools: dict[str, list[str]] = defaultdict(list)
    for trace_id, tool_name in pending:
        if tool_name not in tools[trace_id]:
            tools[trace_id].append(tool_name)
    return tools


def _reasons(trace: Trace, children: list[Trace], tools: dict[str, list[str]]) -> str:
    if trace.agent_type == HUMAN:
        to = (trace.context or {}).get("to") or "a human"
        return f"an answer from {to}"
    reasons = []
    if tools.get(trace.trace_id):
        reasons.append(_approval(tools[trace.trace_id]))
    for child in children:
        if child.agent_type == HUMAN:
            reasons.append(f"answer to “{_gist(child.task or '', QUESTION_CHARS)}”")
            continue
        name = _gist(child.name or child.task or child.trace_id, 40)
        own = tools.get(child.trace_id)
        reasons.append(f"sub-agent “{name}” ({_approval(own)})" if own else f"sub-agent “{name}”")
    return "; ".join(reasons) or "an expert"


def _approval(tool_names: list[str]) -> str:
    return "approval of " + ", ".join(tool_names)


def _gist(text: str, limit: int) -> str:
    text = " ".join(text.replace("**", "").replace("`", "").split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"  # at a word's end

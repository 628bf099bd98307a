"""The `query_subagent_status` tool (seed 002 「运行时配置」): how your sub-agents are doing, rate-limited."""

from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings

from tools.registry import tool
from traces.models import Message, Trace, TraceEvent
from traces.runner.tool_api import ToolContext, ToolError, ToolResult


@tool(inline=True)
def query_subagent_status(ctx: ToolContext, sub_trace_id: str = "") -> ToolResult:
    """See how your sub-agents (agent/evaluate sub-traces) are doing: status, round, figures, latest words.

    Asks are limited (a few per turn, some seconds apart): prefer waiting for a
    sub-agent's result over polling it.

    Args:
        sub_trace_id: One sub-trace to ask about; empty means all of yours.
    """
    _spend_budget(ctx)
    children = Trace.objects.filter(parent_trace_id=ctx.trace.trace_id).exclude(agent_type="human")
    if sub_trace_id:
        children = children.filter(pk=sub_trace_id)
        if not children.exists():
            raise ToolError(f"no sub-trace {sub_trace_id!r} of this trace")
    rows = [_status(child) for child in children.order_by("created_at")[:20]]
    if not rows:
        return ToolResult(title="No sub-agents yet")
    running = sum(1 for row in rows if row["status"] in ("running", "queued"))
    return ToolResult(
        title=f"{len(rows)} sub-agent{'s' if len(rows) != 1 else ''}, {running} running",
        output=json.dumps(rows, ensure_ascii=False, indent=2),
        metadata={"sub_trace_ids": [row["sub_trace_id"] for row in rows]},
    )


def _spend_budget(ctx: ToolContext) -> None:
    """At most AGENT_STATUS_QUERY_BUDGET_PER_TURN asks per run of the parent (a user turn),
    AGENT_STATUS_QUERY_COOLDOWN_SECONDS apart; kept in the parent's context (saved with its step)."""
    trace = ctx.trace
    turn = ctx.store.token if ctx.store is not None else 0
    used = dict((trace.context or {}).get("status_queries") or {})
    if used.get("turn") != turn:
        used = {"turn": turn, "count": 0, "at": 0.0}
    now = time.time()
    budget = settings.AGENT_STATUS_QUERY_BUDGET_PER_TURN
    if used["count"] >= budget:
        raise ToolError(f"status asked {budget} times this turn already: wait for the sub-agent's result")
    wait = used["at"] + settings.AGENT_STATUS_QUERY_COOLDOWN_SECONDS - now
    if wait > 0:
        raise ToolError(
            f"asked {settings.AGENT_STATUS_QUERY_COOLDOWN_SECONDS:g} s ago at most: ask again in {wait:.0f} s"
        )
    trace.context = {
        **(trace.context or {}),
        "status_queries": {"turn": turn, "count": used["count"] + 1, "at": now},
    }


def _status(child: Trace) -> dict[str, Any]:
    start = TraceEvent.objects.filter(trace=child, type="round_start").order_by("-event_id").first()
    said = Message.objects.filter(trace=child, role="assistant").order_by("-sequence").first()
    latest = said.content if said is not None and isinstance(said.content, str) else None
    return {
        "sub_trace_id": child.trace_id,
        "mode": (child.context or {}).get("agent_call_mode"),
        "status": child.status,
        "round": (start.payload or {}).get("round") if start is not None else None,
        "messages": child.total_messages,
        "tokens": child.total_tokens,
        "cost": child.total_cost,
        "latest": (latest or "")[:300] or None,
        "result": (child.result_summary or "")[:300] or None,
        "error": child.error_message or None,
    }

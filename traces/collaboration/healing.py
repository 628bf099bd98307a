"""An agent or evaluate call cut off by a crash or stop, healed (R6) with its sub-traces' ids."""

from __future__ import annotations

import json
from typing import Any

from traces.models import Trace
from traces.runner.tool_call import ToolCall


def healed_result(trace: Trace, call: dict[str, Any]) -> str | None:
    """The structured interruption note of an agent/evaluate call, or None for other tools."""
    name = ToolCall.of(call).name
    if name not in ("agent", "evaluate"):
        return None
    noted = ((trace.context or {}).get("sub_trace_calls") or {}).get(call.get("id") or "") or {}
    ids = list(noted.get("sub_trace_ids") or [])
    children = {t.trace_id: t for t in Trace.objects.filter(pk__in=ids)}
    entries = []
    for sub_id in ids:
        child = children.get(sub_id)
        entries.append(
            {
                "sub_trace_id": sub_id,
                "sub_trace_status": child.status if child else "unknown",
                "stats": {
                    "messages": child.total_messages,
                    "tokens": child.total_tokens,
                    "cost": child.total_cost,
                }
                if child
                else {},
                "continue_from": f"{name}(..., continue_from={sub_id!r})"
                if name == "evaluate"
                else f"agent(task='<what to do next>', continue_from={sub_id!r})",
            }
        )
    body: dict[str, Any] = {
        "status": "interrupted",
        "tool": name,
        "mode": noted.get("mode"),
        "note": (
            "This call was interrupted (the run stopped or its worker died) before it returned. "
            + (
                "Its sub-traces are kept: resume one with continue_from (it keeps its history), "
                "or call again from scratch."
                if ids
                else "No sub-trace was started yet; call it again if still needed."
            )
        ),
    }
    if len(entries) == 1:
        body.update(entries[0])
    elif entries:
        body["sub_traces"] = entries
    return json.dumps(body, ensure_ascii=False, indent=2)

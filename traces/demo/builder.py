"""DemoTrace: one demo trace's rows written in order, as a run would leave them.

Messages get a proper tree (parents, segments), goals their figures, the trace
its totals and events, without a model call. Demo traces carry uid "demo".
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from traces.models import Goal, Message, Trace, TraceEvent, TraceStatus

DEMO_UID = "demo"
MODEL = "openai/gpt-4o-mini"
PRICE_IN, PRICE_OUT = 0.15e-6, 0.6e-6
SYSTEM = "You are a careful agent. Plan with the goal tool, use tools, and answer in Markdown."


class DemoTrace:
    """Builds one trace's rows in order: messages with a proper tree, goals, events, totals."""

    def __init__(self, owner: Any, start: datetime, **fields: Any) -> None:
        self.now = start
        self.trace = Trace.objects.create(
            trace_id=fields.pop("trace_id", None) or str(uuid.uuid4()),
            owner=owner,
            uid=DEMO_UID,
            model=MODEL,
            created_at=start,
            updated_at=start,
            **fields,
        )
        self.messages: dict[int, Message] = {}
        self.goals: dict[str, Goal] = {}
        self.event("run_started", {"mode": "new", "model": MODEL, "agent_type": self.trace.agent_type})

    def tick(self, seconds: float = 2.0) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def event(self, type_: str, payload: dict[str, Any]) -> None:
        self.trace.last_event_id += 1
        TraceEvent.objects.create(
            trace=self.trace,
            event_id=self.trace.last_event_id,
            type=type_,
            payload=payload,
            created_at=self.now,
        )

    def goal(self, goal_id: str, description: str, *, parent: str | None = None, **fields: Any) -> Goal:
        goal = Goal.objects.create(
            trace=self.trace,
            goal_id=goal_id,
            description=description,
            parent_id=parent,
            position=float(len(self.goals) + 1),
            created_at=self.tick(0.5),
            **fields,
        )
        self.goals[goal_id] = goal
        self.event("goal_added", {"goal_id": goal_id, "description": description, "parent_id": parent})
        return goal

    def add(
        self,
        role: str,
        content: Any = None,
        *,
        parent: int | None = -1,
        goal: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        tool_call_id: str | None = None,
        name: str | None = None,
        kind: str = "",
        description: str = "",
        move_head: bool = True,
        tokens: tuple[int, int] = (0, 0),
        seconds: float = 1.5,
    ) -> int:
        trace = self.trace
        sequence = trace.last_sequence + 1
        if parent == -1:
            parent = trace.head_sequence or None
        start = sequence
        if parent is not None and parent == sequence - 1:
            start = self.messages[parent].segment_start or parent
        prompt, completion = tokens
        cost = round(prompt * PRICE_IN + completion * PRICE_OUT, 8) if role == "assistant" else None
        duration = int(seconds * 1000) if role == "assistant" else None
        message = Message.objects.create(
            message_id=Message.make_id(trace.trace_id, sequence),
            trace=trace,
            role=role,
            sequence=sequence,
            parent_sequence=parent,
            segment_start=start,
            goal_id=goal,
            content=content,
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            name=name,
            kind=kind,
            description=description,
            prompt_tokens=prompt or None,
            completion_tokens=completion or None,
            cost=cost,
            duration_ms=duration,
            finish_reason=("tool_calls" if tool_calls else "stop") if role == "assistant" else None,
            created_at=self.tick(seconds),
        )
        self.messages[sequence] = message
        trace.last_sequence = sequence
        if move_head:
            trace.head_sequence = sequence
        trace.total_messages += 1
        trace.total_prompt_tokens += prompt
        trace.total_completion_tokens += completion
        trace.total_tokens += prompt + completion
        trace.total_cost = round(trace.total_cost + (cost or 0), 8)
        trace.total_duration_ms += duration or 0
        if goal and goal in self.goals:
            self._stats(self.goals[goal], prompt, completion, cost or 0, duration or 0)
        self.event("message", {"sequence": sequence, "role": role, "parent_sequence": parent, "kind": kind})
        return sequence

    def _stats(self, goal: Goal, prompt: int, completion: int, cost: float, duration: int) -> None:
        delta = {
            "message_count": 1,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "total_cost": cost,
            "duration_ms": duration,
        }
        goal.self_stats = stats_add(goal.self_stats, delta)
        node: Goal | None = goal
        while node is not None:
            node.cumulative_stats = stats_add(node.cumulative_stats, delta)
            node = self.goals.get(node.parent_id or "")

    def call(
        self, name: str, arguments: dict[str, Any], *, goal: str | None, text: str = "", **kw: Any
    ) -> str:
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        self.add("assistant", text or None, goal=goal, tool_calls=[tool_call(call_id, name, arguments)], **kw)
        self.event("tool_call", {"tool_call_id": call_id, "name": name, "arguments": json.dumps(arguments)})
        return call_id

    def result(self, call_id: str, name: str, output: str, *, goal: str | None, kind: str = "") -> int:
        self.event("tool_result", {"tool_call_id": call_id, "name": name})
        return self.add("tool", output, goal=goal, tool_call_id=call_id, name=name, kind=kind, seconds=0.3)

    def finish(self, status: str, *, result: str | None = None, error: str | None = None) -> Trace:
        trace = self.trace
        for goal in self.goals.values():
            goal.save()
        trace.status = status
        trace.result_summary = result
        trace.error_message = error
        trace.updated_at = self.now
        if status in (TraceStatus.COMPLETED, TraceStatus.FAILED, TraceStatus.STOPPED):
            trace.completed_at = self.now
            self.event(
                "final"
                if status == TraceStatus.COMPLETED
                else "error"
                if status == TraceStatus.FAILED
                else "stopped",
                {"status": status, "result": result, "error": error, "head_sequence": trace.head_sequence},
            )
        trace.save()
        return trace


def stats_add(stats: dict[str, Any] | None, delta: dict[str, Any]) -> dict[str, Any]:
    """Goal figures plus `delta`, key by key."""
    merged = dict(stats or {})
    for key, value in delta.items():
        merged[key] = round(merged.get(key, 0) + value, 10)
    return merged


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One OpenAI-format tool call."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}

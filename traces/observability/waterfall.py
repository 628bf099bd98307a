"""A trace's timing waterfall from what is stored (issue 22): no collector needed.

Model calls and tool calls are messages (a message is stored when its call ends:
`created_at` is the end, `duration_ms` the length); sub-traces are child traces
(created → completed); compactions are `compaction` events (instants); waits are
the gaps from a `waiting` event to the next `run_started`. Four queries.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from traces.models import Message, MessageKind, Trace, TraceEvent

LIMIT = 2000  # rows drawn; the totals count everything


@dataclass
class Bar:
    kind: str  # model | tool | subtrace | compaction | wait
    label: str
    start: datetime
    end: datetime
    sequence: int | None = None
    trace_id: str | None = None  # a sub-trace's
    tokens: int = 0
    cost: float | None = None
    error: bool = False
    detail: str = ""
    left: float = 0.0  # percent of the axis
    width: float = 0.0

    @property
    def duration_ms(self) -> int:
        return int((self.end - self.start).total_seconds() * 1000)

    @property
    def instant(self) -> bool:
        """A point in time, drawn as a marker: a compaction (its event is stored when it is done)."""
        return self.kind == "compaction"


@dataclass
class Total:
    name: str
    count: int = 0
    duration_ms: int = 0
    tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0
    errors: int = 0


@dataclass
class Waterfall:
    bars: list[Bar]
    start: datetime | None
    span_ms: int
    by_model: list[Total] = field(default_factory=list)
    by_tool: list[Total] = field(default_factory=list)
    by_subtrace: list[Total] = field(default_factory=list)
    truncated: int = 0


def trace_waterfall(trace: Trace) -> Waterfall:
    """Every model call, tool call, sub-trace, compaction and wait of `trace` on one time axis."""
    bars = _calls(trace) + _subtraces(trace) + _events(trace)
    if not bars:
        return Waterfall([], None, 0)
    bars.sort(key=lambda b: (b.start, b.end))
    start = min(b.start for b in bars)
    span_ms = max(1, int((max(b.end for b in bars) - start).total_seconds() * 1000))
    for bar in bars:
        bar.left = round((bar.start - start).total_seconds() * 1000 / span_ms * 100, 3)
        bar.width = round(max(bar.duration_ms / span_ms * 100, 0.15), 3)
    return Waterfall(
        bars=bars[:LIMIT],
        start=start,
        span_ms=span_ms,
        by_model=_totals(b for b in bars if b.kind == "model"),
        by_tool=_totals(b for b in bars if b.kind == "tool"),
        by_subtrace=_totals(b for b in bars if b.kind == "subtrace"),
        truncated=max(0, len(bars) - LIMIT),
    )


def _calls(trace: Trace) -> list[Bar]:
    rows = (
        Message.objects.filter(trace=trace, role__in=("assistant", "tool"))
        .exclude(created_at__isnull=True)
        .order_by("sequence")
        .values_list(
            "sequence", "role", "kind", "name", "created_at", "duration_ms", "prompt_tokens",
            "completion_tokens", "cost", "description",
        )
    )  # fmt: skip
    bars = []
    for sequence, role, kind, name, created, duration, prompt, completion, cost, description in rows:
        if role == "assistant" and kind not in (MessageKind.PLAIN, MessageKind.REFLECT):
            continue  # summaries and carried messages are not model calls of the run
        end = created
        start = end - timedelta(milliseconds=duration or 0)
        if role == "assistant":
            tokens = (prompt or 0) + (completion or 0)
            detail = f"{prompt or 0} → {completion or 0} tokens"
            bars.append(
                Bar("model", trace.model or "model", start, end, sequence, None, tokens, cost, False, detail)
            )
        else:
            error = kind == MessageKind.TOOL_ERROR
            bars.append(
                Bar("tool", name or "tool", start, end, sequence, error=error, detail=description or "")
            )
    return bars


def _subtraces(trace: Trace) -> list[Bar]:
    rows = Trace.objects.filter(parent_trace_id=trace.trace_id).values_list(
        "trace_id", "name", "agent_type", "created_at", "completed_at", "updated_at", "total_tokens",
        "total_cost", "status",
    )  # fmt: skip
    bars = []
    for trace_id, name, agent, created, completed, updated, tokens, cost, status in rows:
        bars.append(
            Bar(
                "subtrace",
                name or agent or trace_id,
                created,
                completed or updated or created,
                trace_id=trace_id,
                tokens=tokens or 0,
                cost=cost,
                error=status == "failed",
                detail=status,
            )
        )
    return bars


def _events(trace: Trace) -> list[Bar]:
    rows = (
        TraceEvent.objects.filter(trace=trace, type__in=("compaction", "waiting", "run_started"))
        .order_by("event_id")
        .values_list("type", "payload", "created_at")
    )
    bars: list[Bar] = []
    waiting_since: datetime | None = None
    for kind, payload, created in rows:
        if kind == "compaction":
            level = payload.get("level", "?")
            before, after = payload.get("tokens_before"), payload.get("tokens_after")
            detail = f"{before} → {after} tokens" if before is not None else ""
            bars.append(Bar("compaction", f"compaction {level}", created, created, detail=detail))
        elif kind == "waiting":
            waiting_since = created
        elif kind == "run_started" and waiting_since is not None:
            bars.append(Bar("wait", "waiting", waiting_since, created, detail="for an expert or a human"))
            waiting_since = None
    return bars


def _totals(bars: Any) -> list[Total]:
    totals: dict[str, Total] = defaultdict(lambda: Total(""))
    for bar in bars:
        total = totals[bar.label]
        total.name = bar.label
        total.count += 1
        total.duration_ms += bar.duration_ms
        total.tokens += bar.tokens
        total.errors += bar.error
        if bar.cost is None:
            total.unpriced += bar.kind != "tool"
        else:
            total.cost += bar.cost
    return sorted(totals.values(), key=lambda t: -t.duration_ms)

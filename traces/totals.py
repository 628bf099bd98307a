"""A trace's figures, alone and with its sub-traces, and how its cost reads.

A model call with no known price stores `Message.cost = None` and is counted in
`Trace.unpriced_calls` (traces/runner/store.py:RunStore.add_message); the cost
totals sum the priced calls only. So a total is exact when no call was unpriced,
a lower bound when some were, and unknown when none was priced
(`traces/models.py:cost_state`). Every place that shows a cost says which:
`cost_text` ("$0.0123", "≥ $0.0123", "unknown") with `cost_note` explaining.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from django.db import connection

from traces.models import CostState, Trace, cost_state


@dataclass(frozen=True)
class Totals:
    """Summed figures of one or more traces."""

    messages: int
    tokens: int
    prompt_tokens: int
    completion_tokens: int
    cost: float  # of the priced model calls only
    unpriced_calls: int  # model calls left out of `cost`: no price known
    duration_ms: int  # summed model and tool time, not wall-clock

    @property
    def cost_state(self) -> CostState:
        return cost_state(self.cost, self.unpriced_calls)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cost_state": self.cost_state.value}

    def __add__(self, other: Totals) -> Totals:
        return Totals(
            messages=self.messages + other.messages,
            tokens=self.tokens + other.tokens,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost=round(self.cost + other.cost, 10),
            unpriced_calls=self.unpriced_calls + other.unpriced_calls,
            duration_ms=self.duration_ms + other.duration_ms,
        )

    @classmethod
    def of(cls, trace: Trace) -> Totals:
        return cls(
            messages=trace.total_messages,
            tokens=trace.total_tokens,
            prompt_tokens=trace.total_prompt_tokens,
            completion_tokens=trace.total_completion_tokens,
            cost=trace.total_cost,
            unpriced_calls=trace.unpriced_calls,
            duration_ms=trace.total_duration_ms,
        )


@dataclass(frozen=True)
class TraceTotals:
    """`trace_totals`: the trace's own figures and those with every sub-trace below it."""

    own: Totals
    with_sub_traces: Totals  # own + all descendants (children, their children, ...)
    sub_traces: int  # how many descendants, at any depth

    def as_dict(self) -> dict[str, Any]:
        return {
            "own": self.own.as_dict(),
            "with_sub_traces": self.with_sub_traces.as_dict(),
            "sub_traces": self.sub_traces,
        }


# Every descendant of a trace through parent_trace_id (indexed), summed in the same
# statement. UNION, not UNION ALL: a (corrupt) cycle ends instead of looping.
_DESCENDANT_SUMS = """
WITH RECURSIVE below(trace_id) AS (
    SELECT trace_id FROM traces_trace WHERE parent_trace_id = %s
    UNION
    SELECT t.trace_id FROM traces_trace t JOIN below ON t.parent_trace_id = below.trace_id
)
SELECT COUNT(*), COALESCE(SUM(t.total_messages), 0), COALESCE(SUM(t.total_tokens), 0),
       COALESCE(SUM(t.total_prompt_tokens), 0), COALESCE(SUM(t.total_completion_tokens), 0),
       COALESCE(SUM(t.total_cost), 0), COALESCE(SUM(t.unpriced_calls), 0),
       COALESCE(SUM(t.total_duration_ms), 0)
FROM traces_trace t JOIN below ON t.trace_id = below.trace_id
"""


def trace_totals(trace: Trace) -> TraceTotals:
    """`trace`'s own totals (from the row in hand) and with all its sub-traces: one query,
    however many sub-traces and levels there are."""
    own = Totals.of(trace)
    with connection.cursor() as cursor:
        cursor.execute(_DESCENDANT_SUMS, [trace.trace_id])
        count, messages, tokens, prompt, completion, cost, unpriced, duration = cursor.fetchone()
    below = Totals(
        messages=int(messages),
        tokens=int(tokens),
        prompt_tokens=int(prompt),
        completion_tokens=int(completion),
        cost=float(cost),
        unpriced_calls=int(unpriced),
        duration_ms=int(duration),
    )
    return TraceTotals(own=own, with_sub_traces=own + below, sub_traces=int(count))


# --- how a cost reads --------------------------------------------------------------


def dollars(value: float) -> str:
    if value == 0:
        return "$0"
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"


def cost_text(cost: float, unpriced_calls: int) -> str:
    """ "$0.0123" (known), "≥ $0.0123" (some calls unpriced) or "unknown"."""
    state = cost_state(cost, unpriced_calls)
    if state == CostState.UNKNOWN:
        return "unknown"
    return dollars(cost) if state == CostState.KNOWN else f"≥ {dollars(cost)}"


def cost_note(cost: float, unpriced_calls: int) -> str:
    """Why a cost is not exact ("" when it is)."""
    if not unpriced_calls:
        return ""
    calls = f"{unpriced_calls} model call{'s' if unpriced_calls != 1 else ''}"
    why = "had no known price (litellm's tables, AGENT_MODEL_PRICES)"
    if cost_state(cost, unpriced_calls) == CostState.UNKNOWN:
        return f"{calls} {why}"
    return f"{calls} {why}: the cost is at least this"

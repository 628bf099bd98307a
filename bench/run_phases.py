"""Where a burst's runs spent their time, read from their event logs after the burst.

Every event's `created_at` is stamped in the worker just before its commit, so a run's
log is its timeline: created (the start view) -> `run_started` (claimed and set up) ->
per round `round_start` -> the assistant `message` (the model call, its reply parsed
and stored) -> the next `round_start` (the tool call, the commits, waiting for the turn)
... -> completed. `phases` splits each run there; `describe` prints p50 / p90 / max of
each part over the burst, with the model's own time (`--delay`) taken out of the rounds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from bench.event_latency import percentile

PARTS = ("start", "model", "between", "end")
NAMES = {
    "start": "created -> run_started",
    "model": "round_start -> reply stored, less the model's delay",
    "between": "reply stored -> next round_start",
    "end": "last reply -> completed",
}


def _rows(stack: Any, ids: list[str]) -> list[tuple[str, str, str, Any]]:
    """(trace_id, type, role, created_at) of the round and message events of `ids`, in order."""
    types = ("run_started", "round_start", "message")
    if stack.pg is not None:
        import psycopg

        with psycopg.connect(stack.pg.url) as db:
            return db.execute(
                "SELECT trace_id, type, coalesce(payload->>'role', ''), created_at FROM traces_traceevent"
                " WHERE trace_id = ANY(%s) AND type = ANY(%s) ORDER BY trace_id, event_id",
                [ids, list(types)],
            ).fetchall()
    with sqlite3.connect(stack.env["SQLITE_PATH"]) as db:
        rows = db.execute(
            "SELECT trace_id, type, coalesce(json_extract(payload, '$.role'), ''), created_at"
            f" FROM traces_traceevent WHERE trace_id IN ({_marks(ids)}) AND type IN ({_marks(types)})"
            " ORDER BY trace_id, event_id",
            [*ids, *types],
        ).fetchall()
    # Django keeps SQLite's datetimes as naive UTC text: read them as UTC, not local time.
    return [
        (trace, kind, role, datetime.fromisoformat(at).replace(tzinfo=UTC)) for trace, kind, role, at in rows
    ]


def _marks(values: Sequence[str]) -> str:
    return ",".join("?" * len(values))


def phases(stack: Any, times: dict[str, tuple[float, float]], delay: float) -> dict[str, list[float]]:
    """Seconds of each part (`PARTS`) for every run of `times` (trace id -> created, completed)."""
    logs: dict[str, list[tuple[str, str, float]]] = {}
    for trace, kind, role, at in _rows(stack, list(times)):
        logs.setdefault(str(trace), []).append((kind, role, at.timestamp()))
    parts: dict[str, list[float]] = {part: [] for part in PARTS}
    for trace, (created, completed) in times.items():
        log = logs.get(trace, [])
        started = next((at for kind, _, at in log if kind == "run_started"), None)
        if started is None:
            continue
        parts["start"].append(started - created)
        round_at = replied = None
        for kind, role, at in log:
            if kind == "round_start":
                if replied is not None:
                    parts["between"].append(at - replied)
                round_at, replied = at, None
            elif kind == "message" and role == "assistant" and round_at is not None:
                parts["model"].append(at - round_at - delay)
                replied, round_at = at, None
        if replied is not None:
            parts["end"].append(completed - replied)
    return parts


def describe(parts: dict[str, list[float]]) -> str:
    """One line per part: p50 / p90 / max in ms and how many."""
    lines = []
    for part in PARTS:
        values = parts.get(part) or []
        if values:
            lines.append(
                f"{NAMES[part]} p50 {percentile(values, 0.5) * 1000:.0f} / p90 {percentile(values, 0.9) * 1000:.0f}"
                f" / max {max(values) * 1000:.0f} ms ({len(values)})"
            )
    return "; ".join(lines)

"""Writes on traces that callers outside the runner make (stop, ...)."""

from __future__ import annotations

from traces.models import Trace, TraceStatus


def trace_request_stop(*, trace_id: str) -> bool:
    """Flag a running trace to stop; its run exits at the next checkpoint (R5).

    Returns False when the trace is not running (nothing to stop).
    """
    return bool(Trace.objects.filter(pk=trace_id, status=TraceStatus.RUNNING).update(stop_requested=True))

"""Who watches a trace live, for `AGENT_STREAM=watched` (issue 18).

A model of the `traces` app (re-exported by `traces/models.py`); written and read
by `traces/events/presence.py`.
"""

from __future__ import annotations

from django.db import models


class TraceWatch(models.Model):
    """A trace some WebSocket watcher streams, until `until` unless marked again.

    One row per trace ever watched, refreshed while watched; not part of the trace's
    record (export leaves it out), and deleted with the trace.
    """

    trace = models.OneToOneField(
        "traces.Trace", on_delete=models.CASCADE, primary_key=True, related_name="watch"
    )
    until = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.trace_id} watched until {self.until:%H:%M:%S}"

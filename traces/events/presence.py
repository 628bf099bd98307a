"""Whether someone watches a trace live, so a run streams only then (`AGENT_STREAM=watched`).

A streamed model call costs litellm a parsed, validated object per chunk: in a
256-run burst on 2 cores (bench/density.py, 25 Nov 2026) streaming every call cost
74 ms of the cluster's CPU a run (166 against 92 ms). Tokens are for someone
watching: the reply itself is persisted as its message either way. With
`AGENT_STREAM=watched` a run streams a model call only if, when the call starts, a
watch socket (`WS /api/traces/{id}/watch`, traces/events/consumers.py) follows the
trace, itself or as a sub-trace of the trace it watches; other calls are plain.

Watchers are in the web server, runs in the workers, possibly on other machines:
the mark is a row (`TraceWatch`) each socket's read thread keeps fresh in the read
it makes anyway (`cursors.py:heads_and_events`): when a trace is first streamed, and
then every MARK_EVERY seconds. A mark holds for WATCH_SECONDS, so a socket that went
away without a word (a killed server) stops streaming within that time; one that
closed cleanly leaves its mark to run out as well (other sockets may watch the
same trace). A watcher that arrives during a plain call sees the reply when it
lands, and tokens from the next call on.

A worker process reads the marks once per READ_EVERY seconds, all of them in one
query, not once per model call (`_Marks`): 256 runs' calls ask one query's answer,
and a mark made in another process counts within READ_EVERY. Marks this process
makes count at once. With more than MANY marks held, calls read their own row.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from traces.events.models import TraceWatch

logger = logging.getLogger(__name__)

WATCH_SECONDS = 60.0
MARK_EVERY = 20.0
READ_EVERY = 0.5
MANY = 1000


class _Marks:
    """The marks as this process last read them (every READ_EVERY seconds at most)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.until: dict[str, datetime] = {}
        self.read_at = float("-inf")
        self.many = False  # more than MANY marks: each call reads its own row

    def holds(self, trace_id: str) -> bool:
        now = timezone.now()
        with self.lock:
            fresh = time.monotonic() - self.read_at < READ_EVERY
            until, many = self.until.get(trace_id), self.many
        if not fresh:
            until, many = self._read(trace_id, now)
        if until is None and many:
            return TraceWatch.objects.filter(trace_id=trace_id, until__gt=now).exists()
        return until is not None and until > now

    def _read(self, trace_id: str, now: datetime) -> tuple[datetime | None, bool]:
        rows = list(TraceWatch.objects.filter(until__gt=now).values_list("trace_id", "until")[: MANY + 1])
        with self.lock:
            self.until, self.many, self.read_at = dict(rows[:MANY]), len(rows) > MANY, time.monotonic()
            return self.until.get(trace_id), self.many

    def made(self, trace_ids: Iterable[str], until: datetime) -> None:
        with self.lock:
            for trace_id in trace_ids:
                self.until[trace_id] = until


_marks = _Marks()


def streams_when_watched() -> bool:
    """Whether `AGENT_STREAM` is `watched`: runs ask for marks, sockets keep them."""
    return settings.AGENT_STREAM == "watched"


def mark_watched(trace_ids: Iterable[str]) -> bool:
    """Mark `trace_ids` watched for WATCH_SECONDS; False if the write failed.

    Best effort: a mark that fails (SQLite busy, a trace deleted meanwhile) costs
    tokens, not the watch, which goes on and marks again at its next turn.
    """
    until = timezone.now() + timedelta(seconds=WATCH_SECONDS)
    rows = [TraceWatch(trace_id=trace_id, until=until) for trace_id in sorted(set(trace_ids))]
    if not rows:
        return True
    try:
        TraceWatch.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=["trace"], update_fields=["until"]
        )
    except DatabaseError as exc:
        logger.info("could not mark %d trace(s) watched: %s", len(rows), exc)
        return False
    _marks.made((row.trace_id for row in rows), until)
    return True


def watched(trace_id: str) -> bool:
    """Whether a watcher marked `trace_id` and the mark still holds, as this process read
    the marks at most READ_EVERY seconds ago (or made one since)."""
    return _marks.holds(trace_id)

"""Reads of traces: main path, branches, listings."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from traces.models import Goal, Message, Trace, TraceEvent

# The main path is the chain from the head up `parent_sequence` to the root, read
# in ONE query. It walks linear segments, not messages (see Message.segment_start):
# each step of the recursion jumps from a segment's newest message on the path
# (`entry`) to its first (`start`), then to that one's parent, so a 10,000-message
# path with three rewinds costs four steps and four index range scans.
# `parent_sequence < sequence` holds for every stored message (new messages always
# take last_sequence + 1), so sequences grow along a path and guard against cycles.
_MAIN_PATH_SQL = """
WITH RECURSIVE seg(entry, start) AS (
    SELECT m.sequence, COALESCE(m.segment_start, m.sequence)
    FROM traces_message m
    WHERE m.trace_id = %s AND m.sequence = %s
    UNION ALL
    SELECT p.sequence, COALESCE(p.segment_start, p.sequence)
    FROM seg
    JOIN traces_message s ON s.trace_id = %s AND s.sequence = seg.start
    JOIN traces_message p ON p.trace_id = %s AND p.sequence = s.parent_sequence
    WHERE s.parent_sequence < s.sequence
)
SELECT m.* FROM traces_message m
JOIN seg ON m.trace_id = %s AND m.sequence BETWEEN seg.start AND seg.entry
ORDER BY m.sequence
"""


def trace_main_path(*, trace_id: str, head_sequence: int | None = None) -> list[Message]:
    """Messages from the root to `head_sequence` (default: the trace's head), in order."""
    if head_sequence is None:
        head_sequence = Trace.objects.filter(pk=trace_id).values_list("head_sequence", flat=True).first() or 0
    if not head_sequence:
        return []
    params = [trace_id, head_sequence, trace_id, trace_id, trace_id]
    return list(Message.objects.raw(_MAIN_PATH_SQL, params))


def trace_messages(*, trace_id: str) -> QuerySet[Message]:
    """Every message of the trace, branches included, by sequence."""
    return Message.objects.filter(trace_id=trace_id).order_by("sequence")


def trace_goals(*, trace_id: str) -> QuerySet[Goal]:
    return Goal.objects.filter(trace_id=trace_id).order_by("position")


def trace_events(*, trace_id: str, since: int = 0) -> QuerySet[TraceEvent]:
    return TraceEvent.objects.filter(trace_id=trace_id, event_id__gt=since).order_by("event_id")


def trace_get(*, trace_id: str) -> Trace | None:
    return Trace.objects.filter(pk=trace_id).first()


def traces_visible_to(user: Any) -> QuerySet[Trace]:
    """The traces `user` may see and steer: staff see all, others their own (W4)."""
    if not getattr(user, "is_authenticated", False):
        return Trace.objects.none()
    if user.is_staff:
        return Trace.objects.all()
    return Trace.objects.filter(owner_id=user.pk)

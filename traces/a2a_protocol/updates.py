"""A task's stream from the event log: status and artifact updates after a cursor.

SendStreamingMessage and SubscribeToTask both start with the task as it is (read
with its `last_event_id` in one row, so snapshot and cursor agree), then turn each
later event of the trace into A2A updates, in event order, until an end event
(`final`, `stopped`, `waiting`, `error`) settles the task. The event table is the
log (traces/events), so a client that lost its connection subscribes again and
gets the task's current state and every update after it: nothing is lost and no
update is sent twice on one stream. Each update carries its `event_id` in
metadata.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

from a2a.types import a2a_pb2 as pb
from django.conf import settings

from traces.a2a_protocol import tasks
from traces.events.reads import read
from traces.models import ACTIVE_STATUSES, Trace, TraceEvent
from traces.runner.prepare import text_of
from traces.selectors import trace_events

Update = pb.Task | pb.TaskStatusUpdateEvent | pb.TaskArtifactUpdateEvent
END_EVENTS = ("final", "stopped", "waiting", "error")
BATCH = 200


def _status_update(trace: Trace, event: TraceEvent, status: pb.TaskStatus) -> pb.TaskStatusUpdateEvent:
    update = pb.TaskStatusUpdateEvent(
        task_id=trace.trace_id, context_id=tasks.context_id_of(trace), status=status
    )
    update.metadata.update({"event_id": event.event_id, "event": event.type})
    return update


def _working(trace: Trace, event: TraceEvent, text: str | None = None) -> pb.TaskStatusUpdateEvent:
    status = pb.TaskStatus(state=pb.TaskState.TASK_STATE_WORKING)
    status.timestamp.FromDatetime(event.created_at)
    if text:
        status.message.CopyFrom(
            tasks.agent_message(trace, text, message_id=f"{trace.trace_id}:event:{event.event_id}")
        )
    return _status_update(trace, event, status)


def updates_for(trace: Trace, event: TraceEvent) -> list[Update]:
    """The A2A updates one event of `trace` makes (none for most: tokens, tool calls,
    goals and the like stay agentsite's own). `trace` is the row as it is now; an
    end event reads the task's status from it."""
    payload = event.payload or {}
    if event.type == "run_started":
        return [_working(trace, event)]
    if event.type == "message":
        if payload.get("role") == "assistant" and payload.get("tool_calls"):
            text = text_of(payload.get("content"))
            return [_working(trace, event, text)] if text.strip() else []
        return []
    if event.type not in END_EVENTS:
        return []
    ended = _as_ended(trace, event)
    found: list[Update] = []
    if event.type == "final" and ended.result_summary:
        artifact = pb.TaskArtifactUpdateEvent(
            task_id=trace.trace_id,
            context_id=tasks.context_id_of(trace),
            artifact=tasks.answer_artifact(ended),
            last_chunk=True,
        )
        artifact.metadata.update({"event_id": event.event_id})
        found.append(artifact)
    found.append(_status_update(trace, event, tasks.task_status(ended)))
    return found


def _as_ended(trace: Trace, event: TraceEvent) -> Trace:
    """`trace` as its end event left it (the row may have moved on to a later run)."""
    payload = event.payload or {}
    ended = copy.copy(trace)
    ended.status = payload.get("status") or trace.status
    ended.error_message = payload.get("error")
    if payload.get("result") is not None:
        ended.result_summary = payload["result"]
    ended.updated_at = event.created_at
    ended.last_event_id = event.event_id
    return ended


def snapshot(*, user: Any, trace_id: str) -> tuple[Trace, pb.Task] | None:
    """The trace and its task as one consistent read, or None if `user` may not see it."""
    trace = tasks.visible_task(user, trace_id)
    if trace is None:
        return None
    return trace, tasks.task_of(trace)


def _next_batch(trace_id: str, cursor: int) -> tuple[Trace, list[TraceEvent]]:
    trace = Trace.objects.get(pk=trace_id)
    events = list(trace_events(trace_id=trace_id, since=cursor)[:BATCH])
    return trace, events


async def stream(trace_id: str, cursor: int) -> AsyncIterator[Update]:
    """The updates after event `cursor` of a trace, until an end event; polls the
    event table every AGENT_A2A_POLL_SECONDS (the log, not the doorbell, is the source),
    on the watch-read threads (traces/events/reads.py), which keep their connection."""
    while True:
        trace, events = await read(_next_batch, trace_id, cursor)
        for event in events:
            cursor = event.event_id
            for update in updates_for(trace, event):
                yield update
            if event.type in END_EVENTS and not _moved_on(trace, events, event):
                return
        if not events and trace.status not in ACTIVE_STATUSES:
            return  # settled before this stream began (a waiting task): the snapshot said it all
        if len(events) < BATCH:
            await asyncio.sleep(settings.AGENT_A2A_POLL_SECONDS)


def _moved_on(trace: Trace, events: list[TraceEvent], end: TraceEvent) -> bool:
    """Another run began after this end event (in the same batch, or the trace is
    active again): the stream goes on to it."""
    later = [e for e in events if e.event_id > end.event_id]
    return any(e.type == "run_started" for e in later) or trace.status in ACTIVE_STATUSES

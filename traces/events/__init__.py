"""The event log (D4, G1): appends outside a run, and the doorbell after commit.

Event rows are written in the same transaction as the change they describe (the
run store does that); after commit, `publish` tells listeners that new events
exist. Listeners (the WebSocket fan-out, the CLI) re-read the table when they need
more than the payload: the channel is a doorbell, the table is the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from traces.models import Trace, TraceEvent

logger = logging.getLogger(__name__)

Listener = Callable[[str, list[dict[str, Any]]], None]
_listeners: list[Listener] = []


def subscribe(listener: Listener) -> Callable[[], None]:
    """Register a listener (once); returns a function that removes it."""
    if listener not in _listeners:
        _listeners.append(listener)
    return lambda: _listeners.remove(listener) if listener in _listeners else None


def publish(trace_id: str, events: list[dict[str, Any]]) -> None:
    for listener in list(_listeners):
        try:
            listener(trace_id, events)
        except Exception:
            logger.exception("event listener failed for %s", trace_id)


def event_dict(event: TraceEvent) -> dict[str, Any]:
    return {
        "trace_id": event.trace_id,
        "event_id": event.event_id,
        "type": event.type,
        "payload": event.payload,
        "created_at": event.created_at.isoformat(),
    }


def event_append(
    trace_id: str,
    event_type: str,
    payload: dict[str, Any] | Callable[[int], dict[str, Any]],
    *,
    id_taken: bool = False,
) -> TraceEvent:
    """Append one event to a trace's log outside a run's commit (services, humans,
    the sweep, notifications); a run's own events go through its fenced commit.

    Caller holds a transaction. Moves `Trace.last_event_id` on, unless the caller's
    own conditional update already did (`id_taken`), writes the row with that id,
    and publishes it after commit. `payload` may be a function of the event id.
    """
    if not id_taken:
        Trace.objects.filter(pk=trace_id).update(last_event_id=F("last_event_id") + 1)
    event_id = Trace.objects.values_list("last_event_id", flat=True).get(pk=trace_id)
    event = TraceEvent.objects.create(
        trace_id=trace_id,
        event_id=event_id,
        type=event_type,
        payload=payload(event_id) if callable(payload) else payload,
        created_at=timezone.now(),
    )
    published = [event_dict(event)]
    transaction.on_commit(lambda: publish(trace_id, published))
    return event

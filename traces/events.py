"""The event log's doorbell (D4, G1).

Event rows are written in the same transaction as the change they describe (the
run store does that); after commit, `publish` tells listeners that new events
exist. Listeners (the WebSocket fan-out, the CLI) re-read the table when they need
more than the payload: the channel is a doorbell, the table is the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from traces.models import TraceEvent

logger = logging.getLogger(__name__)

Listener = Callable[[str, list[dict[str, Any]]], None]
_listeners: list[Listener] = []


def subscribe(listener: Listener) -> Callable[[], None]:
    """Register a listener; returns a function that removes it."""
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

"""The live event stream of a trace: `WS /api/traces/{id}/watch?since=N` (W3).

The TraceEvent table is the log; the channel layer is only a doorbell. On
connect the consumer joins the trace's group (traces/doorbell.py), then a pump
task sends every persisted event with event_id > cursor, in order, and waits for
a ring (or a poll timeout) before reading again. Because every send comes from
the table and the cursor only moves forward, delivery is gap-free and
duplicate-free across reconnects (`since` = the last event id the client has),
with no expiry, on any channel layer:

- with Redis (REDIS_URL) the worker's commit rings the group and watchers read
  within milliseconds; the poll (AGENT_WATCH_POLL_SECONDS, 5 s) is a safety net;
- in the embedded default (SQLite, in-memory layer, worker in another process) no
  ring crosses processes, and the poll (0.5 s) delivers.

Close codes: 4401 not authenticated, 4404 unknown trace or someone else's (as
the REST API, which answers 404 for both), 4400 bad `since`, 4503 the database
is unreachable (at connect: traces/api/websocket_auth.py:DatabaseOutageGuard;
while streaming: here), 1011 any other failure. Sub-traces are watched on their
own sockets; their ids are in `GET /api/traces/{id}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.db import InterfaceError, OperationalError

from traces.events import event_dict
from traces.events.doorbell import group_for
from traces.selectors import trace_events, traces_visible_to

logger = logging.getLogger(__name__)

CLOSE_BAD_REQUEST = 4400
CLOSE_NOT_AUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_UNAVAILABLE = 4503
BATCH = 500


def trace_visible(user: Any, trace_id: str) -> bool:
    return traces_visible_to(user).filter(pk=trace_id).exists()


def trace_events_after(trace_id: str, since: int, limit: int) -> list[dict[str, Any]]:
    return [event_dict(e) for e in trace_events(trace_id=trace_id, since=since)[:limit]]


atrace_visible = database_sync_to_async(trace_visible)
atrace_events_after = database_sync_to_async(trace_events_after)


def parse_since(query_string: bytes) -> int | None:
    """The `since` cursor (default 0 = from the start); None when malformed."""
    values = parse_qs(query_string.decode("latin1")).get("since")
    if not values:
        return 0
    try:
        since = int(values[0])
    except ValueError:
        return None
    return since if since >= 0 else None


class TraceWatchConsumer(AsyncJsonWebsocketConsumer):
    """Replays a trace's events after `since`, then streams new ones as they commit."""

    trace_id: str
    cursor: int
    group: str | None = None
    pump: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        # Accept first: a close code only reaches the client after the handshake.
        await self.accept()
        self.trace_id = self.scope["url_route"]["kwargs"]["trace_id"]
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_NOT_AUTHENTICATED)
            return
        since = parse_since(self.scope.get("query_string", b""))
        if since is None:
            await self.close(code=CLOSE_BAD_REQUEST)
            return
        if not await atrace_visible(user, self.trace_id):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.cursor = since
        self.bell = asyncio.Event()
        # Join before the first read, so no ring between that read and the join is missed.
        self.group = group_for(self.trace_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.pump = asyncio.create_task(self._pump())

    async def disconnect(self, code: int) -> None:
        if self.pump is not None:
            self.pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.pump
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients only listen; anything they send is ignored."""

    async def trace_doorbell(self, message: dict[str, Any]) -> None:
        if message.get("last_event_id", 0) > self.cursor:
            self.bell.set()

    async def _pump(self) -> None:
        try:
            await self._stream()
        except asyncio.CancelledError:
            raise
        except (OperationalError, InterfaceError) as exc:
            logger.warning("watch of trace %s closed: database unavailable (%s)", self.trace_id, exc)
            await self.close(code=CLOSE_UNAVAILABLE)
        except Exception:
            # The client reconnects with its last event id and loses nothing.
            logger.exception("watch of trace %s failed", self.trace_id)
            await self.close(code=1011)

    async def _stream(self) -> None:
        poll = settings.AGENT_WATCH_POLL_SECONDS
        while True:
            self.bell.clear()
            batch = await atrace_events_after(self.trace_id, self.cursor, BATCH)
            for event in batch:
                await self.send_json(event)
                self.cursor = event["event_id"]
            if len(batch) == BATCH:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.bell.wait(), timeout=poll)

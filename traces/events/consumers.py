"""The live event stream of a trace: `WS /api/traces/{id}/watch` (W3).

Query string: `since=N` (the last event id the client has of this trace, default
0), `children=1` (also stream every sub-trace below it: local sub-traces at any
depth up to 5, at most 200, only those the user may see, including ones that
start later), `cursors={"<sub-trace id>": N, ...}` (URL-encoded JSON: the last
event id the client has of each sub-trace; one not named replays from its
start). Every frame is one event (traces/events/__init__.py:event_dict) and
names its `trace_id`; per trace, events come in order.

The TraceEvent table is the log; the channel layer is only a doorbell. On
connect the consumer joins the trace's group (traces/doorbell.py), then a pump
task, each cycle, reads in one trip to a read thread which traces it streams,
their newest event ids and the persisted events past each one's cursor
(traces/events/cursors.py:heads_and_events; this also finds new sub-traces,
whose groups it then joins), sends those events, in order, and waits for a ring
(or a poll timeout) before reading again. Because every send
comes from the table and each cursor only moves forward, delivery is gap-free
and duplicate-free per trace across reconnects, with no expiry, on any channel
layer:

- with Redis (REDIS_URL) and AGENT_DOORBELL=layer the worker's commit rings the
  group and watchers read within milliseconds; the poll (AGENT_WATCH_POLL_SECONDS,
  5 s) is a safety net (with AGENT_DOORBELL=database, the default, the rings come
  as in the next case, and this process's registry of watchers rings the
  consumer: `rung`);
- in the embedded default (in-memory layer, worker in another process) the ring
  crosses processes by PostgreSQL NOTIFY or a Unix datagram socket
  (traces/events/bells.py), which this consumer listens to while it is open;
  the poll (5 s) is the safety net as well.

When the channel layer fails (Redis down: a group_add, group_discard or the
layer's receive raises or hangs past LAYER_TIMEOUT), the socket stays open: the
pump reads the table every AGENT_WATCH_DEGRADED_POLL_SECONDS (1 s) instead of
waiting for rings, new sockets are accepted the same way, and every cycle tries
to join its groups again; once that works (Redis back: it lost its groups if it
restarted) the socket returns to the doorbell. Cursors keep it gap- and
duplicate-free through both switches. The client learns of each switch by a
status frame, the only frame that is not an event (it has no `event_id`):

    {"type": "watch_status", "trace_id": "<watched trace>", "live": "degraded" | "ok"}

sent when the socket enters the degraded mode (at connect if Redis is already
down) and when it leaves it; static/portal/trace.js shows "live (degraded)".

Close codes: 4401 not authenticated, 4404 unknown trace or someone else's (as
the REST API, which answers 404 for both), 4400 bad `since`, `children` or
`cursors`, 4503 the database is unreachable (at connect:
traces/api/websocket_auth.py:DatabaseOutageGuard; while streaming: here), 1011
any other failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from channels.utils import await_many_dispatch
from django.conf import settings
from django.db import InterfaceError, OperationalError

from traces.events.cursors import Head, WatchCursors, heads_and_events, parse_watch_query
from traces.events.doorbell import group_for, listen, unwatch, watch
from traces.events.presence import MARK_EVERY, streams_when_watched
from traces.events.reads import read

logger = logging.getLogger(__name__)

CLOSE_BAD_REQUEST = 4400
CLOSE_NOT_AUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_UNAVAILABLE = 4503
BATCH = 500
# A channel-layer call that has not answered in this long counts as failed.
LAYER_TIMEOUT = 3.0
# Back from degraded, a socket keeps the short poll this long: the other processes' layer
# connections come back on their first send, which can fail and drop its ring (redis-py
# reconnects then), so a ring made while they recover may never come.
RECOVERY_SECONDS = 30.0
STATUS_TYPE = "watch_status"


# Reads for watchers run on their own threads (traces/events/reads.py), not in the one
# thread that runs every sync view of this process: a burst of start requests would
# otherwise hold live events behind it; those threads keep their database connection.
async def aheads_and_events(
    user: Any,
    root_id: str,
    *,
    known: Mapping[str, int],
    children: bool,
    cursors: Mapping[str, int],
    mark: bool = False,
) -> tuple[dict[str, Head], list[dict[str, Any]]]:
    return await read(
        heads_and_events,
        user,
        root_id,
        known=known,
        children=children,
        cursors=cursors,
        limit=BATCH,
        mark=mark,
    )


class TraceWatchConsumer(AsyncJsonWebsocketConsumer):
    """Replays a trace's events (and its sub-traces') after the client's cursors,
    then streams new ones as they commit."""

    trace_id: str
    user: Any
    watched: WatchCursors
    doorbells: set[str]
    pump: asyncio.Task[None] | None = None
    loop: asyncio.AbstractEventLoop
    unlisten: Callable[[], None] | None = None
    degraded = False  # the channel layer failed: the pump polls the table
    recovering_until = 0.0  # monotonic time until which the pump still polls after a recovery
    status_sent = "ok"
    mark_due = 0.0  # monotonic time of the next watched mark (AGENT_STREAM=watched)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """As AsyncConsumer.__call__, but a failing channel layer does not end the socket:
        its receive is retried (`_channel_receive`) instead of raising out of the consumer."""
        self.scope = scope
        layer = get_channel_layer(self.channel_layer_alias)
        self.base_send = send
        receivers: list[Any] = [receive]
        if layer is not None:
            self.channel_layer = layer
            self.channel_name = await layer.new_channel()
            receivers.append(self._channel_receive)
        with contextlib.suppress(StopConsumer):
            await await_many_dispatch(receivers, self.dispatch)

    async def dispatch(self, message: dict[str, Any]) -> None:
        """As AsyncConsumer.dispatch, without its `aclose_old_connections` before each
        message: that hops to the process's one thread-sensitive thread, which a burst
        of connects keeps busy, and this consumer's database work runs on the read
        threads (traces/events/reads.py), which look after their own connections."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def _channel_receive(self) -> dict[str, Any]:
        """The next channel-layer message; while the layer fails, retried every degraded poll."""
        while True:
            try:
                message: dict[str, Any] = await self.channel_layer.receive(self.channel_name)
                return message
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._layer_failed("receive", exc)
                await asyncio.sleep(settings.AGENT_WATCH_DEGRADED_POLL_SECONDS)

    def _layer_failed(self, what: str, exc: BaseException) -> None:
        if not self.degraded:
            logger.warning(
                "watch of trace %s: channel layer %s failed (%s: %s); reading the event table every %s s",
                getattr(self, "trace_id", "?"),
                what,
                type(exc).__name__,
                exc,
                settings.AGENT_WATCH_DEGRADED_POLL_SECONDS,
            )
        self.degraded = True
        bell = getattr(self, "bell", None)
        if bell is not None:
            bell.set()  # the pump switches to the short poll now

    async def _layer(self, what: str, call: Any) -> bool:
        """Run one channel-layer call; False (and degraded) when it fails or hangs."""
        try:
            await asyncio.wait_for(call, timeout=LAYER_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._layer_failed(what, exc)
            return False
        return True

    async def _send_status(self) -> None:
        status = "degraded" if self.degraded else "ok"
        if status != self.status_sent:
            self.status_sent = status
            await self.send_json({"type": STATUS_TYPE, "trace_id": self.trace_id, "live": status})

    async def _rejoin(self) -> None:
        """Degraded: join every group again; when all joins work, back to the doorbell."""
        self.degraded = False
        for group in sorted(self.doorbells):
            if not await self._layer("group_add", self.channel_layer.group_add(group, self.channel_name)):
                return
        self.recovering_until = time.monotonic() + RECOVERY_SECONDS
        logger.warning("watch of trace %s: channel layer back, following the doorbell", self.trace_id)

    async def connect(self) -> None:
        self.doorbells = set()
        # Accept first: a close code only reaches the client after the handshake.
        await self.accept()
        self.trace_id = self.scope["url_route"]["kwargs"]["trace_id"]
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_NOT_AUTHENTICATED)
            return
        query = parse_watch_query(self.scope.get("query_string", b""))
        if query is None:
            await self.close(code=CLOSE_BAD_REQUEST)
            return
        # Whether the user may see the trace is the pump's first read (`_stream`), one
        # trip to a read thread instead of two before the first event: a run's first
        # events wait on that read while a burst of starts keeps this server busy.
        self.user = user
        self.watched = WatchCursors(self.trace_id, query)
        self.bell = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        # Join (and listen to other processes) before the first read, so no ring
        # between that read and the join is missed.
        self.unlisten = listen()
        await self._join([self.trace_id])
        self.pump = asyncio.create_task(self._pump())

    async def disconnect(self, code: int) -> None:
        if self.pump is not None:
            self.pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.pump
        if not self.degraded:
            for group in self.doorbells:
                if not await self._layer(
                    "group_discard", self.channel_layer.group_discard(group, self.channel_name)
                ):
                    break  # the entries expire with the layer's group_expiry
        for group in self.doorbells:
            unwatch(group, self)
        self.doorbells = set()
        if self.unlisten is not None:
            self.unlisten()
            self.unlisten = None

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients only listen; anything they send is ignored."""

    async def trace_doorbell(self, message: dict[str, Any]) -> None:
        self.rung(message)

    def rung(self, message: dict[str, Any]) -> None:
        """A ring, from the layer (Redis) or the process's registry of watchers."""
        if self.watched.rings(message.get("trace_id", self.trace_id), message.get("last_event_id", 0)):
            self.bell.set()

    async def _join(self, trace_ids: list[str]) -> bool:
        """Join the doorbell groups of `trace_ids`; whether any was new."""
        new = {group_for(trace_id) for trace_id in trace_ids} - self.doorbells
        self.doorbells |= new  # a join that fails now is made again by `_rejoin`
        for group in new:
            watch(group, self)
        for group in sorted(new):
            if self.degraded or not await self._layer(
                "group_add", self.channel_layer.group_add(group, self.channel_name)
            ):
                break
        return bool(new)

    async def _leave(self, trace_ids: list[str]) -> None:
        for group in {group_for(trace_id) for trace_id in trace_ids} & self.doorbells:
            self.doorbells.discard(group)
            unwatch(group, self)
            if not self.degraded:
                await self._layer("group_discard", self.channel_layer.group_discard(group, self.channel_name))

    async def _pump(self) -> None:
        try:
            await self._stream()
        except asyncio.CancelledError:
            raise
        except (OperationalError, InterfaceError) as exc:
            logger.warning("watch of trace %s closed: database unavailable (%s)", self.trace_id, exc)
            await self.close(code=CLOSE_UNAVAILABLE)
        except Exception:
            # The client reconnects with its cursors and loses nothing.
            logger.exception("watch of trace %s failed", self.trace_id)
            await self.close(code=1011)

    async def _stream(self) -> None:
        watched = self.watched
        first = True
        while True:
            self.bell.clear()
            if self.degraded:
                await self._rejoin()
            mark = streams_when_watched() and time.monotonic() >= self.mark_due
            heads, batch = await aheads_and_events(
                self.user,
                self.trace_id,
                known=watched.depths(),
                children=watched.children,
                cursors=dict(watched.cursors),
                mark=mark,
            )
            if first and self.trace_id not in heads:
                await self.close(code=CLOSE_NOT_FOUND)  # someone else's, or no such trace
                return
            first = False
            await self._send_status()  # after the first read: nothing before the trace is known visible
            if mark:
                self.mark_due = time.monotonic() + MARK_EVERY
            joined, left = watched.update(heads)
            await self._leave(left)
            if await self._join(joined):
                # A new trace's events committed after the read and before the join rang
                # no one here: read again.
                self.bell.set()
            for event in batch:
                await self.send_json(event)
                watched.advance(event)
            if watched.children and watched.announces_children(batch):
                self.bell.set()
            if len(batch) == BATCH:
                continue
            poll = (
                settings.AGENT_WATCH_DEGRADED_POLL_SECONDS
                if self.degraded or time.monotonic() < self.recovering_until
                else settings.AGENT_WATCH_POLL_SECONDS
            )
            if streams_when_watched():  # marked again before the mark runs out
                poll = min(poll, max(0.0, self.mark_due - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.bell.wait(), timeout=poll)

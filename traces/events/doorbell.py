"""The WebSocket doorbell: after events commit, tell watchers to read the log (W3).

`ring` is an event listener (traces.events.subscribe, registered in
traces/apps.py). It rings every TraceWatchConsumer of the trace (the trace's
group) with `{"type": "trace.doorbell", "last_event_id": N}`; each then reads
the events after its cursor from the table. The message carries no event:
a lost or late ring delays delivery (watchers also poll) but can never lose,
reorder or duplicate one.

Two delivery paths:

- the in-memory layer (embedded default, tests) only reaches consumers of this
  process, so rings do not use it: this process's watch sockets are rung through
  a registry of its watchers (`watch`: `call_soon_threadsafe` onto each socket's
  loop, which calls `TraceWatchConsumer.rung`), and watchers in other processes
  (daphne, while a worker commits) through traces/events/bells.py: PostgreSQL
  NOTIFY or a Unix datagram socket, which a watching process `listen`s for and
  `_deliver`s to its registry. A ring so costs no channel-layer message, and no
  consumer dispatch (which would hop to the process's one thread-sensitive
  thread first);
- any cross-process layer (channels_redis, when REDIS_URL is set) is written to
  from a sync worker by one long-lived event loop in a daemon thread, with its
  own layer instance: channels_redis binds its connection pools to the loop that
  made them, so a fresh loop per send (async_to_sync in a plain thread) fails
  with "Event loop is closed" (SPEC 13). The send is fire-and-forget, off the
  run's thread.

With AGENT_DOORBELL "database" (the default) beside a cross-process layer, rings
take the first path instead (NOTIFY on PostgreSQL): in a 64-run burst
channels_redis's `group_send` from a worker took p99 367 ms (README, Density);
the second path is AGENT_DOORBELL "layer".
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import InMemoryChannelLayer, channel_layers, get_channel_layer

from traces.events import bells
from traces.process_local import PerProcess

logger = logging.getLogger(__name__)

DOORBELL_TYPE = "trace.doorbell"
_SAFE_GROUP = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")


def group_for(trace_id: str) -> str:
    """The channel-layer group of a trace (group names allow only [A-Za-z0-9_.-], < 100)."""
    if _SAFE_GROUP.match(trace_id):
        return f"trace.{trace_id}"
    return "trace.h" + hashlib.sha1(trace_id.encode()).hexdigest()


def doorbell_message(trace_id: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    last = max((e["event_id"] for e in events), default=0)
    return {"type": DOORBELL_TYPE, "trace_id": trace_id, "last_event_id": last}


def ring(trace_id: str, events: list[dict[str, Any]]) -> None:
    """Listener: ring the trace's group after its events committed."""
    layer = get_channel_layer()
    if layer is None:
        return
    group, message = group_for(trace_id), doorbell_message(trace_id, events)
    if isinstance(layer, InMemoryChannelLayer) or bells.transport() is not None:
        # The in-memory layer, or AGENT_DOORBELL "database": this process's watchers
        # through the registry, the others' through the bells.
        _ring_watchers(group, message)
        bells.ring_other_processes(trace_id, message["last_event_id"])
    else:
        _sender().send(group, message)


class Watcher(Protocol):
    """A watch socket as the registry knows it: rung on its own event loop."""

    loop: asyncio.AbstractEventLoop

    def rung(self, message: dict[str, Any]) -> None: ...


# group -> this process's watchers of it; read by rings from any thread, changed on
# the watchers' loops (a copy is taken before iterating).
_watchers: dict[str, set[Watcher]] = {}


def watch(group: str, watcher: Watcher) -> None:
    """Ring `watcher` for `group`'s rings that reach this process without the layer."""
    _watchers.setdefault(group, set()).add(watcher)


def unwatch(group: str, watcher: Watcher) -> None:
    watchers = _watchers.get(group)
    if watchers is not None:
        watchers.discard(watcher)
        if not watchers:
            _watchers.pop(group, None)


def _ring_watchers(group: str, message: dict[str, Any]) -> None:
    for watcher in list(_watchers.get(group, ())):
        try:
            watcher.loop.call_soon_threadsafe(watcher.rung, message)
        except RuntimeError:  # its loop closed: the socket is gone
            unwatch(group, watcher)


def listen() -> Callable[[], None]:
    """Hear rings from other processes on the running loop, when the layer cannot
    carry them or does not (AGENT_DOORBELL=database); call the returned function
    when the watch socket closes."""
    return bells.listen(_deliver)


def _deliver(trace_id: str | None, last_event_id: int) -> None:
    """A ring from another process (on this process's loop): ring this process's
    watchers of the trace, or of every trace when trace_id is None."""
    message: dict[str, Any] = {"type": DOORBELL_TYPE, "last_event_id": last_event_id}
    if trace_id is not None:
        message["trace_id"] = trace_id
    for group in list(_watchers) if trace_id is None else [group_for(trace_id)]:
        _ring_watchers(group, message)


class _Sender:
    """One event loop in a daemon thread that owns a channel layer for this process.

    A Redis outage costs rings, never the run: each send gives up after
    SEND_TIMEOUT, at most MAX_IN_FLIGHT sends wait at once (further rings are
    dropped while they do: the watchers poll the table meanwhile), failures are
    logged once per LOG_EVERY seconds, and redis-py reconnects on the first send
    after Redis is back. A ring whose send failed is owed: the newest per group
    (a ring says "read up to N", so it covers the older ones) is sent again every
    RETRY_SECONDS until one gets through, so a send that timed out under load, or
    the last ring of a run made during an outage, still reaches the watchers that
    wait on the doorbell alone. At most MAX_OWED groups are owed.
    """

    SEND_TIMEOUT = 2.0
    MAX_IN_FLIGHT = 1000
    LOG_EVERY = 30.0
    RETRY_SECONDS = 1.0
    MAX_OWED = 10_000

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        self.in_flight = 0
        self.dropped = 0
        self.failing_since: float | None = None
        self.owed: dict[str, dict[str, Any]] = {}  # group -> newest failed ring (the loop's own)
        self._retrying: asyncio.Task[None] | None = None
        self._logged_at = 0.0
        self._lock = threading.Lock()
        thread = threading.Thread(target=self.loop.run_forever, name="doorbell", daemon=True)
        thread.start()

    def send(self, group: str, message: dict[str, Any]) -> None:
        with self._lock:
            if self.in_flight >= self.MAX_IN_FLIGHT:
                self.dropped += 1
                return
            self.in_flight += 1
        asyncio.run_coroutine_threadsafe(self._send(group, message), self.loop)

    async def _send(self, group: str, message: dict[str, Any]) -> None:
        try:
            await self._deliver(group, message)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _deliver(self, group: str, message: dict[str, Any]) -> bool:
        try:
            await asyncio.wait_for(self.layer.group_send(group, message), timeout=self.SEND_TIMEOUT)
        except Exception as exc:
            self._failed(exc)
            self._owe(group, message)
            return False
        if self.failing_since is not None:
            logger.warning(
                "doorbell delivered again after %.1f s of failures (%d rings dropped, %d owed)",
                time.monotonic() - self.failing_since,
                self.dropped,
                len(self.owed),
            )
            self.failing_since, self.dropped = None, 0
        return True

    def _owe(self, group: str, message: dict[str, Any]) -> None:
        owed = self.owed.get(group)
        if owed is None and len(self.owed) >= self.MAX_OWED:
            self.dropped += 1
            return
        if owed is None or message.get("last_event_id", 0) >= owed.get("last_event_id", 0):
            self.owed[group] = message
        if self._retrying is None or self._retrying.done():
            self._retrying = self.loop.create_task(self._retry())

    async def _retry(self) -> None:
        """Send the owed rings again, once a RETRY_SECONDS, until none is owed; a round stops
        at its first failure (Redis still down: one attempt, not one per group)."""
        while self.owed:
            await asyncio.sleep(self.RETRY_SECONDS)
            for group in list(self.owed):
                message = self.owed.pop(group, None)
                if message is not None and not await self._deliver(group, message):
                    break  # owed again by `_deliver`

    def _failed(self, exc: BaseException) -> None:
        now = time.monotonic()
        if self.failing_since is None:
            self.failing_since = now
        if now - self._logged_at >= self.LOG_EVERY:
            self._logged_at = now
            logger.warning(
                "doorbell not delivered (owed, sent again; watchers also poll): %s: %s",
                type(exc).__name__,
                exc,
            )


_senders = PerProcess(_Sender)


def _sender() -> _Sender:
    """This process's sender; a forked worker makes its own (threads do not survive fork)."""
    return _senders.get()

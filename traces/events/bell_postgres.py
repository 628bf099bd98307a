"""The cross-process doorbell on PostgreSQL without Redis: LISTEN/NOTIFY.

One channel, `agent_doorbell`; the payload names the trace. Both ends hold a
dedicated autocommit connection of their own (application_name "agentsite
doorbell ..."), never one of Django's, so a ring is never part of a run's
transaction and never waits on it:

- `NotifySender`: a daemon thread sends what `send` left it, after the events
  committed. `send` only records the newest payload per trace under a lock, so a
  burst of rings coalesces into one NOTIFY statement and a database outage
  costs the run nothing (rings made meanwhile are dropped: the poll delivers).
  A dropped connection is reopened and the batch sent once more.
- `NotifyReceiver`: a task on the event loop of the process serving watch
  sockets (daphne) LISTENs and hands each payload on; when its connection drops
  it reconnects (backing off up to 5 s) and calls `on_connected`, so watchers
  re-read what the gap's lost rings announced.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from django.db import connections

logger = logging.getLogger(__name__)

CHANNEL = "agent_doorbell"
MAX_BACKOFF = 5.0


def connection_params(role: str) -> dict[str, Any]:
    """Django's connection parameters for the default database, for a connection of our own."""
    params = connections["default"].get_connection_params()
    params.pop("cursor_factory", None)  # Django's sync cursor class; psycopg's defaults suit both
    params["application_name"] = f"agentsite doorbell {role}"
    params["autocommit"] = True
    return params


class NotifySender:
    """This process's NOTIFY thread."""

    def __init__(self) -> None:
        self.params = connection_params("notify")
        self.pending: dict[str, str] = {}
        self.lock = threading.Lock()
        self.wakeup = threading.Event()
        self.conn: psycopg.Connection[Any] | None = None
        threading.Thread(target=self._run, name="doorbell-notify", daemon=True).start()

    def send(self, key: str, payload: str) -> None:
        """Queue `payload`; a later one for the same `key` (trace) replaces it."""
        with self.lock:
            self.pending[key] = payload
        self.wakeup.set()

    def _run(self) -> None:
        while True:
            self.wakeup.wait()
            with self.lock:
                self.wakeup.clear()
                batch, self.pending = list(self.pending.values()), {}
            if batch:
                self._notify(batch)

    def _notify(self, payloads: list[str]) -> None:
        for attempt in (1, 2):
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = psycopg.connect(**self.params)
                self.conn.execute("SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p", [CHANNEL, payloads])
                return
            except psycopg.Error as exc:
                self._close()
                if attempt == 2:
                    logger.warning("doorbell NOTIFY not sent (watchers fall back to polling): %s", exc)

    def _close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg.Error:
                pass
        self.conn = None


class NotifyReceiver:
    """LISTENs on the event loop it is started on until closed."""

    def __init__(self, on_message: Callable[[str], None], on_connected: Callable[[], None]) -> None:
        self.on_message = on_message
        self.on_connected = on_connected
        self.task: asyncio.Task[None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> bool:
        self.task = loop.create_task(self._listen_forever())
        return True

    async def _listen_forever(self) -> None:
        params = connection_params("listen")
        backoff = 0.1
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(**params)
                try:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    backoff = 0.1
                    self.on_connected()
                    async for notify in conn.notifies():
                        self.on_message(notify.payload)
                finally:
                    await conn.close()
            except psycopg.Error as exc:
                logger.warning("doorbell LISTEN lost (reconnecting in %.1f s): %s", backoff, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None

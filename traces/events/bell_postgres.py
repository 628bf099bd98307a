"""The cross-process doorbell on PostgreSQL without Redis: LISTEN/NOTIFY.

One channel, `agent_doorbell`; the payload names the trace. Both ends hold a
dedicated autocommit connection of their own (application_name "agentsite
doorbell ..."), never one of Django's, so a ring is never part of a run's
transaction and never waits on it:

- `NotifySender`: the committing thread sends its NOTIFY itself when the process's
  connection is free, and does not wait for the answer (libpq's pipeline mode: each
  ring is a statement and a sync, its own transaction; answers are read, without
  blocking, at the next send). Otherwise (another thread sending, the connection
  not open yet) `send` records the newest payload per trace under a lock
  and a daemon thread sends what it was left, coalesced into one statement. In a
  64-run burst the hop to that thread was what a ring waited for: p50 2.7, p99 90,
  max 401 ms before the thread ran (the run threads hold the interpreter), and as
  long again to read the answer (2026-11-27). A database outage costs the run
  nothing (rings made meanwhile are dropped: the poll delivers); the thread reopens
  a dropped connection and sends its batch once more.
- `NotifyReceiver`: a task on the event loop of the process serving watch
  sockets (daphne) LISTENs and hands each payload on; when its connection drops
  it reconnects (backing off up to 5 s) and calls `on_connected`, so watchers
  re-read what the gap's lost rings announced.
"""

from __future__ import annotations

import asyncio
import logging
import select
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from django.db import connections
from psycopg import pq

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
    """This process's NOTIFY connection, in libpq's pipeline mode: sent on by the ringing
    thread when free, else by the process's NOTIFY thread."""

    MAX_IN_FLIGHT = 256  # statements sent whose answers were not read yet

    def __init__(self) -> None:
        self.params = connection_params("notify")
        self.pending: dict[str, str] = {}
        self.lock = threading.Lock()  # `pending`
        self.using = threading.Lock()  # the connection
        self.wakeup = threading.Event()
        self.conn: psycopg.Connection[Any] | None = None
        self.in_flight = 0
        threading.Thread(target=self._run, name="doorbell-notify", daemon=True).start()

    def send(self, key: str, payload: str) -> None:
        """NOTIFY `payload` now if the connection is free, else queue it for the thread
        (a later payload for the same `key`, a trace, replaces a queued one)."""
        if self._send_now(payload):
            return
        with self.lock:
            self.pending[key] = payload
        self.wakeup.set()

    def _send_now(self, payload: str) -> bool:
        """Send from this thread without waiting for the answer; False (nothing sent)
        when another thread uses the connection, it is not open, or too many answers
        are unread."""
        if not self.using.acquire(blocking=False):
            return False
        try:
            if self.conn is None or self.conn.closed:
                return False
            self._read_answers(wait=False)
            if self.in_flight >= self.MAX_IN_FLIGHT:
                return False
            self._send([payload])
            return True
        except psycopg.Error:
            self._close()  # the thread reconnects
            return False
        finally:
            self.using.release()

    def _run(self) -> None:
        while True:
            self.wakeup.wait()
            with self.lock:
                self.wakeup.clear()
                batch, self.pending = list(self.pending.values()), {}
            if batch:
                with self.using:
                    self._notify(batch)

    def _notify(self, payloads: list[str]) -> None:
        for attempt in (1, 2):
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = psycopg.connect(**self.params)
                    self.conn.pgconn.enter_pipeline_mode()
                self._send(payloads)
                self._read_answers(wait=True)
                return
            except psycopg.Error as exc:
                self._close()
                if attempt == 2:
                    logger.warning("doorbell NOTIFY not sent (watchers fall back to polling): %s", exc)

    def _send(self, payloads: list[str]) -> None:
        """One statement and a sync (its own transaction: the NOTIFYs leave at once)."""
        assert self.conn is not None
        pgconn = self.conn.pgconn
        pgconn.send_query_params(
            _statement(len(payloads)), [CHANNEL.encode(), *(p.encode() for p in payloads)]
        )
        pgconn.pipeline_sync()
        self.in_flight += 1

    def _read_answers(self, *, wait: bool) -> None:
        """Read the answers that arrived (all of them with `wait`). psycopg.Error when
        the connection broke; a statement that failed is logged (its rings are lost)."""
        assert self.conn is not None
        pgconn = self.conn.pgconn
        while self.in_flight:
            pgconn.consume_input()
            if pgconn.is_busy():
                if not wait:
                    return
                select.select([pgconn.socket], [], [], 5.0)
                continue
            result = pgconn.get_result()
            if result is None:  # between one statement's results and the next
                continue
            if result.status == pq.ExecStatus.PIPELINE_SYNC:
                self.in_flight -= 1
            elif result.status != pq.ExecStatus.TUPLES_OK:
                message = (result.error_message or b"").decode(errors="replace")
                logger.warning("doorbell NOTIFY failed: %s", message)

    def _close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg.Error:
                pass
        self.conn = None
        self.in_flight = 0


def _statement(count: int) -> bytes:
    """SELECT pg_notify($1, $2), pg_notify($1, $3), ...: `count` payloads on one channel."""
    return ("SELECT " + ", ".join(f"pg_notify($1, ${n + 2})" for n in range(count))).encode()


class NotifyReceiver:
    """LISTENs on the event loop it is started on until closed.

    The connection is psycopg's, opened and told to LISTEN through its async API;
    then the loop reads its socket itself (`add_reader`): on each wake-up libpq takes
    what arrived (`consume_input`) and every notification it holds is handed on, with
    no task, lock or timer per wake-up. psycopg's `AsyncConnection.notifies()` costs
    the loop 117 us of CPU a ring against 43 (bench/listen_cost.py) and wakes it every
    0.1 s while idle; in a burst the loop is what a live event waits for.
    """

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
                    await self._read_until_lost(conn.pgconn)
                finally:
                    await conn.close()
            except psycopg.Error as exc:
                logger.warning("doorbell LISTEN lost (reconnecting in %.1f s): %s", backoff, exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _read_until_lost(self, pgconn: pq.abc.PGconn) -> None:
        """Hand on every notification as it arrives; raises psycopg.Error once the
        connection is lost.

        The reader is removed exactly once, while its descriptor is still this
        connection's. When libpq sees the connection lost it has already closed the
        socket, so `readable` removes the reader in that same callback: by the time
        this task resumes, the loop may have accepted a connection on the same
        descriptor number, and removing "our" reader then would unregister daphne's
        reader of that HTTP request, which then hung unread (issue 18's e2e flake).
        """
        loop = asyncio.get_running_loop()
        lost: asyncio.Future[None] = loop.create_future()
        fileno = pgconn.socket
        registered = False

        def stop_reading() -> None:
            nonlocal registered
            if registered:
                registered = False
                loop.remove_reader(fileno)

        def readable() -> None:
            try:
                pgconn.consume_input()
                while (notify := pgconn.notifies()) is not None:
                    self.on_message(notify.extra.decode(errors="replace"))
            except psycopg.Error as exc:
                stop_reading()  # libpq closed the socket: its number is free for reuse
                if not lost.done():
                    lost.set_exception(exc)

        loop.add_reader(fileno, readable)
        registered = True
        try:
            readable()  # what arrived with the LISTEN's answer
            await lost
        finally:
            stop_reading()  # cancelled: the socket is still ours until `close`

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None

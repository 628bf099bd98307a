"""Threads that keep their database connections between calls (issue 18).

Under ASGI Django ties a connection to the context of the request that opened it
(asgiref's `Local`), and the web server closes it when the request ends
(`DATABASE_CONN_MAX_AGE` 0, agentsite/settings/__init__.py): a connection kept in
a request's context outlived the request until the collector found it, and on
PostgreSQL every request paid for a new server process. Work handed to one of
these threads runs in the thread's own context instead, so the connection it
opens is there for its next call: one connect per thread, not per call, and never
more connections than threads.

A thread idle for `idle()` seconds (0: after every call) closes its connections,
so a quiet server holds none. Used by the web server's requests (agentsite/web.py)
and the watchers' reads (traces/events/reads.py), each a subclass saying what a
call does around the work (`_call`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from django.db import connections

T = TypeVar("T")
_Job = tuple[Callable[[], Any], Future[Any]]


def connections_open() -> bool:
    return any(c.connection is not None for c in connections.all(initialized_only=True))


def close_connections() -> None:
    for conn in connections.all(initialized_only=True):
        conn.close()


class KeptThreads:
    """Up to `size` daemon threads serving one queue of calls, each started when a call
    finds every thread busy: a quiet server runs (and connects) few."""

    def __init__(self, size: int, name: str, idle: Callable[[], float]) -> None:
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.size, self.name, self.idle = size, name, idle
        self.started = 0
        self.waiting = 0  # threads waiting for a call

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self.lock:
            if self.jobs.qsize() >= self.waiting and self.started < self.size:
                self.started += 1
                self.waiting += 1
                threading.Thread(target=self._serve, name=f"{self.name}-{self.started}", daemon=True).start()
            self.jobs.put((fn, future))
        return future

    def _serve(self) -> None:
        while True:
            idle = self.idle()
            try:
                fn, future = self.jobs.get(timeout=idle if idle > 0 and connections_open() else None)
            except queue.Empty:
                close_connections()  # idle: a quiet server holds no connection
                continue
            if not future.set_running_or_notify_cancel():
                continue  # given up while it waited
            with self.lock:
                self.waiting -= 1
            result: Any = None
            error: BaseException | None = None
            try:
                result = self._call(fn)
            except BaseException as exc:  # handed to the awaiting caller
                error = exc
            finally:
                if self.idle() <= 0:
                    close_connections()
                with self.lock:  # free before its caller hears: its next call needs no new thread
                    self.waiting += 1
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

    def _call(self, fn: Callable[[], T]) -> T:
        return fn()

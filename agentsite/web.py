"""Django's requests in the web server: one hop to a thread that keeps its connection (issue 18).

Django's ASGI handler runs a request's sync work on a new thread of its own
(asgiref's `ThreadSensitiveContext`) and, with this project's sync views and
middleware under its async chain, hops between the event loop and that thread
around every middleware: an authenticated API request made 16 hops, and opened a
database connection that was closed again at its end (agentsite/kept_threads.py).
A start request (`POST /api/traces`) cost daphne ~23 ms of CPU on PostgreSQL, and
256 of them took 16-19 s beside a busy worker cluster (bench/density.py).

`RequestHandler` loads the middleware chain in sync mode, as under WSGI, and hands
each request whole to one of AGENT_WEB_THREADS threads (8, `KeptThreads`): one hop
there and one back. After each request a thread does what Django does for a WSGI
thread's kept connection (`_tidy`): drop one left in a transaction, or one that had
errors and fails a check; the next request's first query health-checks the rest
(CONN_HEALTH_CHECKS). After a database restart the first request reconnects; during
an outage a request fails at once (503, agentsite/outage.py), as with a connect per
request, where a pool would hold it for its timeout.

Unchanged, on the event loop as Django does it: reading the body, the
request_started / request_finished signals, sending the response (streamed bodies
too), noticing a client that went away. More concurrent requests than threads wait
in the queue; one whose client goes away while it waits is dropped there, one
already on its thread runs to its end, as under Django's own handler. A view's `async_to_sync` lands on the
server's loop, as under `sync_to_async` (traces/events/doorbell.py rings the
process's own watchers so).
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from typing import TypeVar

import django
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.db import connections
from django.http import HttpRequest, HttpResponseBase
from django.urls import get_script_prefix, set_script_prefix

from agentsite.kept_threads import KeptThreads
from traces.process_local import PerProcess

T = TypeVar("T")


def _tidy() -> None:
    """Django's check of a kept connection between requests, without its age limit:
    the connection stays until its thread is idle (DATABASE_CONN_MAX_AGE is the
    other threads' limit: 0, close after each request)."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None:
            conn.close_at = None
            conn.close_if_unusable_or_obsolete()


class RequestThreads(KeptThreads):
    def __init__(self, size: int) -> None:
        super().__init__(size, "web-requests", lambda: settings.AGENT_WEB_IDLE_SECONDS)

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        finally:
            _tidy()  # after each request: nothing touches the connection until the next


_threads = PerProcess(lambda: RequestThreads(settings.AGENT_WEB_THREADS))


class RequestHandler(ASGIHandler):
    """Django's ASGI handler with the sync chain run whole on a request thread
    (`threads`: the process's AGENT_WEB_THREADS unless given)."""

    def __init__(self, threads: KeptThreads | None = None) -> None:
        super().__init__()
        self.threads = threads

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        respond = functools.partial(self._respond, request, asyncio.get_running_loop(), get_script_prefix())
        return await asyncio.wrap_future((self.threads or _threads.get()).submit(respond))

    def _respond(
        self, request: HttpRequest, loop: asyncio.AbstractEventLoop, script_prefix: str
    ) -> HttpResponseBase:
        # What SyncToAsync sets in its threads: async_to_sync here runs on `loop`.
        SyncToAsync.threadlocal.main_event_loop = loop
        SyncToAsync.threadlocal.main_event_loop_pid = os.getpid()
        set_script_prefix(script_prefix)  # set on the loop's context by handle()
        return self.get_response(request)


def get_asgi_application() -> RequestHandler:
    """`django.core.asgi.get_asgi_application`, with `RequestHandler`."""
    django.setup(set_prefix=False)
    return RequestHandler()

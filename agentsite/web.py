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

Django's handler also opened a `ThreadSensitiveContext` per request, so its
request_started / request_finished receivers ran on a new thread, started and
later joined from the event loop: each `Thread.start` held the loop until the new
thread got the interpreter lock (py-spy: 8 % of the loop's time in a 64-run burst,
live events waiting behind it). Here those receivers run on a request thread too
(`RequestHandler.handle`, Django 5.2's own otherwise). Unchanged, on the event
loop as Django does it: reading the body, sending the response (streamed bodies
too), noticing a client that went away. More concurrent requests than threads wait
in the queue; one whose client goes away while it waits is dropped there, one
already on its thread runs to its end, as under Django's own handler. A view's `async_to_sync` lands on the
server's loop, as under `sync_to_async` (traces/events/doorbell.py rings the
process's own watchers so).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import django
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.asgi import get_script_prefix as scope_script_prefix
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

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """As Django's, without its `ThreadSensitiveContext`: under one, the sync
        request_started / request_finished receivers ran on a new thread per request,
        which the event loop started and, at the end, joined from another new thread
        (two `Thread.start`s holding the loop per request, each waiting for the new
        thread to get the interpreter lock: milliseconds apiece while a burst of
        starts keeps the request threads busy, and every live event waits behind
        them). Here the receivers run on a request thread (`_on_thread`)."""
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        await self.handle(scope, receive, send)

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Django's `ASGIHandler.handle` (5.2), its `sync_to_async` hops on a request thread."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(scope_script_prefix(scope))
        await self._on_thread(signals.request_started.send, sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            assert error_response is not None
            body_file.close()
            await self.send_response(error_response, send)
            await self._on_thread(error_response.close)
            return

        async def process_request() -> HttpResponseBase:
            response = await self.run_get_response(request)
            with contextlib.suppress(asyncio.CancelledError):  # the client went away during the send
                await self.send_response(response, send)
            return response

        # Catch a disconnect while the response is made, as Django does: the listener
        # is checked (and cancelled) first.
        disconnect = asyncio.create_task(self.listen_for_disconnect(receive))
        respond = asyncio.create_task(process_request())
        await asyncio.wait([disconnect, respond], return_when=asyncio.FIRST_COMPLETED)
        for task in (disconnect, respond):
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        try:
            response = respond.result()
        except asyncio.CancelledError:
            await self._on_thread(signals.request_finished.send, sender=self.__class__)
        else:
            await self._on_thread(response.close)
        body_file.close()

    def _on_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        """`fn(*args, **kwargs)` on one of the request threads, awaitable on the loop."""
        return asyncio.wrap_future(
            (self.threads or _threads.get()).submit(functools.partial(fn, *args, **kwargs))
        )

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        return await self._on_thread(self._respond, request, asyncio.get_running_loop(), get_script_prefix())

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

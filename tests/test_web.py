"""The web server's request threads (agentsite/web.py): a request runs whole on one,
which keeps its database connection between requests, tidies it as Django does
between WSGI requests, and lets a view's async_to_sync reach the server's loop."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse
from django.urls import get_script_prefix, path

from agentsite.kept_threads import connections_open
from agentsite.web import RequestHandler, RequestThreads
from tests.db_sessions import end_session, session

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def _loop_id() -> int:
    return id(asyncio.get_running_loop())


def where(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        {
            "thread": threading.current_thread().name,
            "session": session(),
            "loop": async_to_sync(_loop_id)(),
            "prefix": get_script_prefix(),
        }
    )


def left_in_a_transaction(request: HttpRequest) -> JsonResponse:
    session()
    transaction.set_autocommit(False)
    return JsonResponse({})


urlpatterns = [path("where", where), path("left-open", left_in_a_transaction)]


@pytest.fixture
def urls(settings: Any) -> None:
    settings.ROOT_URLCONF = __name__
    settings.ALLOWED_HOSTS = ["testserver"]


async def get(handler: RequestHandler, route: str, root: str = "") -> tuple[int, dict[str, Any]]:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": f"{root}/{route}",
        "raw_path": f"{root}/{route}".encode(),
        "query_string": b"",
        "root_path": root,
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    communicator = ApplicationCommunicator(handler, scope)
    await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await communicator.receive_output(10)
    body = await communicator.receive_output(10)
    await communicator.wait(10)
    return start["status"], json.loads(body["body"] or b"{}")


async def test_a_request_runs_on_a_request_thread_that_keeps_its_connection(urls, settings):
    settings.AGENT_WEB_IDLE_SECONDS = 30
    handler = RequestHandler(RequestThreads(1))

    status, first = await get(handler, "where")
    assert status == 200
    assert first["thread"] == "web-requests-1"
    status, second = await get(handler, "where")
    assert (status, second["session"]) == (200, first["session"])  # no connect per request


async def test_a_views_async_to_sync_runs_on_the_servers_loop(urls):
    status, body = await get(RequestHandler(RequestThreads(1)), "where")

    assert status == 200
    assert body["loop"] == id(asyncio.get_running_loop())


async def test_the_script_prefix_is_the_requests(urls):
    handler = RequestHandler(RequestThreads(1))

    assert (await get(handler, "where", root="/agents"))[1]["prefix"] == "/agents/"
    assert (await get(handler, "where"))[1]["prefix"] == "/"


async def test_with_no_idle_time_a_thread_closes_its_connection_after_each_request(urls, settings):
    settings.AGENT_WEB_IDLE_SECONDS = 0
    threads = RequestThreads(1)

    assert (await get(RequestHandler(threads), "where"))[0] == 200

    assert await asyncio.wrap_future(threads.submit(connections_open)) is False


async def test_a_thread_idle_for_its_idle_time_closes_its_connection(urls, settings):
    settings.AGENT_WEB_IDLE_SECONDS = 0.3
    threads = RequestThreads(1)
    await get(RequestHandler(threads), "where")
    assert await asyncio.wrap_future(threads.submit(connections_open)) is True

    await asyncio.sleep(0.8)

    assert await asyncio.wrap_future(threads.submit(connections_open)) is False


async def test_a_connection_left_in_a_transaction_is_not_kept(urls, settings):
    settings.AGENT_WEB_IDLE_SECONDS = 30
    handler = RequestHandler(RequestThreads(1))
    before = (await get(handler, "where"))[1]["session"]

    assert (await get(handler, "left-open"))[0] == 200
    status, after = await get(handler, "where")

    assert status == 200
    if connection.vendor == "postgresql":  # SQLite may give a new connection the old one's id
        assert after["session"] != before


@pytest.mark.skipif(connection.vendor != "postgresql", reason="ends a PostgreSQL session")
async def test_a_kept_session_ended_by_the_server_is_replaced_without_an_error(urls, settings):
    settings.AGENT_WEB_IDLE_SECONDS = 30
    handler = RequestHandler(RequestThreads(1))
    pid = (await get(handler, "where"))[1]["session"]

    await asyncio.to_thread(end_session, pid)
    status, body = await get(handler, "where")

    assert status == 200  # the health check on first use found it gone and reconnected
    assert body["session"] != pid


async def test_a_thread_starts_only_when_every_other_is_busy_up_to_the_limit(urls, settings):
    threads = RequestThreads(2)
    for _ in range(3):  # one call after another: one thread
        assert await asyncio.wrap_future(threads.submit(lambda: 1)) == 1
    assert threads.started == 1

    release = threading.Event()
    started = [threads.submit(release.wait) for _ in range(3)]
    try:
        assert threads.started == 2
    finally:
        release.set()
    assert all(await asyncio.gather(*(asyncio.wrap_future(f) for f in started)))


async def test_a_call_given_up_while_it_waits_for_a_thread_never_runs(urls):
    threads = RequestThreads(1)
    release, ran = threading.Event(), threading.Event()
    busy = threads.submit(release.wait)
    queued = threads.submit(ran.set)
    waiting = asyncio.ensure_future(asyncio.wrap_future(queued))
    await asyncio.sleep(0.05)

    waiting.cancel()  # as Django's handler cancels a request whose client went away
    for _ in range(200):  # the cancel reaches the queued call on the loop's next turns
        if queued.cancelled():
            break
        await asyncio.sleep(0.01)
    release.set()
    await asyncio.wrap_future(busy)
    assert await asyncio.wrap_future(threads.submit(lambda: "after")) == "after"

    assert not ran.is_set()


async def test_the_request_signals_run_on_the_request_thread_not_one_started_per_request(urls):
    from django.core import signals

    heard: list[tuple[str, str]] = []

    def started(**kwargs: Any) -> None:
        heard.append(("started", threading.current_thread().name))

    def finished(**kwargs: Any) -> None:
        heard.append(("finished", threading.current_thread().name))

    handler = RequestHandler(RequestThreads(1))
    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    try:
        for _ in range(4):
            status, _body = await get(handler, "where")
            assert status == 200
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(finished)
    assert [kind for kind, _ in heard] == ["started", "finished"] * 4
    # Django's own handler ran them on a new ThreadPoolExecutor thread per request.
    assert {thread for _, thread in heard} == {"web-requests-1"}

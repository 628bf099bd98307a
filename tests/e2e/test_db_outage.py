"""A PostgreSQL outage under a real daphne process (Q3): the API answers 503 JSON with
Retry-After, the portal a short 503 page, the WebSocket closes with 4503, and the
same process serves 200 again once the database is back, without a restart.

The test starts its own PostgreSQL (not the suite's), so like the other e2e tests
it runs once, in the SQLite pass of scripts/test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from agentsite.outage import RETRY_AFTER_SECONDS
from tests.e2e.stack import Stack, throwaway_pg
from traces.events.consumers import CLOSE_UNAVAILABLE

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL")),
        reason="starts its own PostgreSQL; runs once, in the SQLite pass",
    ),
]


@pytest.fixture
def stack() -> Iterator[Stack]:
    try:
        throwaway_pg.find_bindir()
    except throwaway_pg.PostgresNotFound as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must test database outages on PostgreSQL: {exc}")
        pytest.skip(f"no PostgreSQL server binaries: {exc}")
    # No worker cluster: the outage is about the ASGI process; no model is called.
    running = Stack(model_url="http://127.0.0.1:9/v1", redis=False, postgres=True, cluster=False)
    try:
        yield running
    finally:
        running.stop()


def portal_login(stack: Stack) -> httpx.Client:
    """A browser-like client logged in to the portal through its real login form."""
    client = httpx.Client(base_url=f"http://127.0.0.1:{stack.port}", timeout=10)
    client.get("/login/").raise_for_status()
    response = client.post(
        "/login/",
        data={"username": "integrator", "password": "pw", "csrfmiddlewaretoken": client.cookies["csrftoken"]},
    )
    assert response.status_code == 302, response.text[:500]
    return client


def watch_close_code(stack: Stack) -> int | None:
    with stack.watch("no-such-trace") as socket_:
        try:
            socket_.recv(timeout=10)
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None
    return None


def test_outage_answers_503_and_the_same_process_recovers(stack: Stack) -> None:
    portal = portal_login(stack)
    assert stack.api("GET", "/traces")[0] == 200
    assert portal.get("/").status_code == 200
    daphne_pid = stack.daphne.pid

    # fast, not immediate: the throwaway server runs with synchronous_commit off, so
    # an immediate stop could drop the login's session row written just before.
    stack.pg.stop_server(mode="fast")

    for _ in range(2):  # the kept connection, then a fresh connect that is refused
        status, body = stack.api("GET", "/traces")
        assert status == 503
        assert body["code"] == "unavailable" and "database" in body["error"]
    api = httpx.get(f"{stack.http}/traces", headers={"Authorization": f"Token {stack.token}"}, timeout=10)
    assert api.headers["Content-Type"] == "application/json"
    assert api.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)

    page = portal.get("/")
    assert page.status_code == 503
    assert page.headers["Content-Type"].startswith("text/html")
    assert page.headers["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert "Unavailable for a moment" in page.text and "Traceback" not in page.text
    assert len(page.text) < 2000

    assert watch_close_code(stack) == CLOSE_UNAVAILABLE

    stack.pg.start_server()

    assert stack.daphne.poll() is None and stack.daphne.pid == daphne_pid
    assert stack.api("GET", "/traces") == (200, {"count": 0, "next": None, "previous": None, "results": []})
    assert portal.get("/").status_code == 200
    assert watch_close_code(stack) == 4404

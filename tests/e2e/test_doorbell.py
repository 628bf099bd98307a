"""The cross-process doorbell without Redis (W3, issue 18): a run committing in a
real `manage.py qcluster` worker wakes a watch socket served by a real daphne,
on a SQLite file (Unix datagram sockets) and on PostgreSQL (LISTEN/NOTIFY); by
NOTIFY beside Redis as well (AGENT_DOORBELL=database, the default), and through
Redis's groups with AGENT_DOORBELL=layer.

Every stack here polls the event log only once an hour, so an event committed
after the watcher's first read reaches the client only if the doorbell rang: the
model call is held until the client has received the run's first event, and the
rest of the run (its final event) commits in the worker after that.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.e2e.stack import Stack, throwaway_pg
from tests.scripted_llm import Reply, ScriptedLLM

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL")),
        reason="e2e tests start their own PostgreSQL; they run once, in the SQLite pass",
    ),
]

NO_POLL = {"AGENT_WATCH_POLL_SECONDS": "3600"}
# Long enough for a loaded machine; far shorter than the poll, so a run that ends
# only through the poll fails the test.
RECV_TIMEOUT = 60


@pytest.fixture(scope="module")
def sqlite_stack(scripted_llm_server: ScriptedLLM) -> Iterator[Stack]:
    stack = Stack(
        model_url=scripted_llm_server.url,
        redis=False,
        postgres=False,
        AGENT_DOORBELL_LINGER_SECONDS="2",
        **NO_POLL,
    )
    yield stack
    stack.stop()


def postgres_stack_of(model: ScriptedLLM, *, redis: bool, **env: str) -> Stack:
    """A stack on PostgreSQL with one worker process (its runs ring through one NOTIFY
    sender), polling once an hour; skips the test without PostgreSQL."""
    try:
        throwaway_pg.find_bindir()
    except throwaway_pg.PostgresNotFound as exc:
        pytest.skip(f"no PostgreSQL server binaries: {exc}")
    return Stack(model_url=model.url, redis=redis, postgres=True, workers=1, **NO_POLL, **env)


@pytest.fixture(scope="module")
def postgres_stack(scripted_llm_server: ScriptedLLM) -> Iterator[Stack]:
    stack = postgres_stack_of(scripted_llm_server, redis=False)
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def redis_notify_stack(scripted_llm_server: ScriptedLLM) -> Iterator[Stack]:
    stack = postgres_stack_of(scripted_llm_server, redis=True)  # the default doorbell
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def redis_layer_stack(scripted_llm_server: ScriptedLLM) -> Iterator[Stack]:
    stack = postgres_stack_of(scripted_llm_server, redis=True, AGENT_DOORBELL="layer")
    yield stack
    stack.stop()


@pytest.fixture
def model(scripted_llm_server: ScriptedLLM) -> Iterator[ScriptedLLM]:
    scripted_llm_server.reset()
    yield scripted_llm_server
    scripted_llm_server.reset()


def doorbell_dir(stack: Stack) -> Path:
    return Path(stack.env["SQLITE_PATH"] + ".doorbells")


def watch_a_held_run(stack: Stack, model: ScriptedLLM, answer: str) -> list[dict[str, Any]]:
    """A run whose model call answers only once the watcher has its first event; all its events."""
    release = threading.Event()

    def held(body: Any) -> Reply:
        release.wait(RECV_TIMEOUT)
        return Reply(text=answer)

    model.script("scripted", [held])
    status, body = stack.api(
        "POST", "/traces", {"messages": [{"role": "user", "content": "hi"}], "name": "bell"}
    )
    assert status == 201, body
    try:
        with stack.watch(body["trace_id"]) as socket_:
            events = [json.loads(socket_.recv(timeout=RECV_TIMEOUT))]
            release.set()
            while events[-1]["type"] not in ("final", "error"):
                events.append(json.loads(socket_.recv(timeout=RECV_TIMEOUT)))
    finally:
        release.set()
    assert [e["event_id"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["type"] == "final", events[-1]
    assert events[-1]["payload"]["result"] == answer
    return events


def test_sqlite_a_worker_commit_rings_a_watcher_in_daphne(sqlite_stack: Stack, model: ScriptedLLM):
    watch_a_held_run(sqlite_stack, model, "Rung over a Unix socket.")
    # daphne bound its socket while it had a watcher, kept it for the linger (2 s), then
    # removed it.
    assert list(doorbell_dir(sqlite_stack).glob("*.sock"))
    sqlite_stack.wait_for(lambda: not list(doorbell_dir(sqlite_stack).glob("*.sock")), what="socket removed")


def test_sqlite_a_dead_process_socket_does_not_stop_the_ring_and_is_removed(
    sqlite_stack: Stack, model: ScriptedLLM
):
    directory = doorbell_dir(sqlite_stack)
    directory.mkdir(mode=0o700, exist_ok=True)
    dead = directory / "999999-dead.sock"
    left_behind = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    left_behind.bind(str(dead))
    left_behind.close()  # the file stays, nobody is bound to it: a process killed with -9
    assert dead.exists()
    watch_a_held_run(sqlite_stack, model, "Rung past a dead socket.")
    assert not dead.exists()


def doorbell_sessions(stack: Stack) -> dict[str, list[int]]:
    with psycopg.connect(stack.pg.url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT application_name, pid FROM pg_stat_activity WHERE application_name LIKE 'agentsite doorbell%'"
        ).fetchall()
    sessions: dict[str, list[int]] = {}
    for name, pid in rows:
        sessions.setdefault(name.removeprefix("agentsite doorbell "), []).append(pid)
    return sessions


def test_postgres_a_worker_commit_rings_a_watcher_in_daphne_by_notify(
    postgres_stack: Stack, model: ScriptedLLM
):
    watch_a_held_run(postgres_stack, model, "Rung by NOTIFY.")
    assert "notify" in doorbell_sessions(postgres_stack)  # the worker's sender


def test_postgres_dropped_doorbell_connections_reconnect_and_ring(postgres_stack: Stack, model: ScriptedLLM):
    warm_up = watch_a_held_run(postgres_stack, model, "Warm up the worker's NOTIFY connection.")
    # An open watcher (of the finished run) keeps daphne listening while both
    # doorbell connections are dropped.
    with postgres_stack.watch(warm_up[0]["trace_id"]):
        before = postgres_stack.wait_for(
            lambda: (s := doorbell_sessions(postgres_stack)).keys() >= {"listen", "notify"} and s,
            what="the LISTEN and NOTIFY sessions",
        )
        with psycopg.connect(postgres_stack.pg.url, autocommit=True) as conn:
            ended = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'agentsite doorbell%%' "
                "AND pg_terminate_backend(pid)"
            ).fetchone()
        assert ended is not None and ended[0] == len(before["listen"]) + len(before["notify"])
        watch_a_held_run(postgres_stack, model, "Rung after the reconnect.")
        after = doorbell_sessions(postgres_stack)
    assert after["listen"] and not set(after["listen"]) & set(before["listen"])
    assert after["notify"] and not set(after["notify"]) & set(before["notify"])


def test_redis_by_default_a_worker_rings_daphne_by_notify(redis_notify_stack: Stack, model: ScriptedLLM):
    watch_a_held_run(redis_notify_stack, model, "Rung by NOTIFY beside Redis.")
    sessions = doorbell_sessions(redis_notify_stack)
    assert "notify" in sessions  # the worker's sender: the ring did not take the channel layer


def test_redis_with_the_layer_doorbell_a_worker_rings_daphne_through_its_groups(
    redis_layer_stack: Stack, model: ScriptedLLM
):
    watch_a_held_run(redis_layer_stack, model, "Rung through Redis.")
    sessions = doorbell_sessions(redis_layer_stack)
    assert "notify" not in sessions and "listen" not in sessions  # the ring took the channel layer

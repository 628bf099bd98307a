"""The service end to end: real daphne + real qcluster processes, PostgreSQL + Redis
(and the embedded SQLite default), a real WebSocket client, kill -9 of a worker
cluster (W1, W3, W5, Q1, Q3).

These tests start their own databases and servers, so they do not depend on the
suite's database: scripts/test runs them in its SQLite pass and skips them in the
PostgreSQL pass (DATABASE_URL set), where they would repeat the very same run.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.stack import REDIS_SERVER, Stack, throwaway_pg
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL")),
        reason="e2e tests start their own PostgreSQL and Redis; they run once, in the SQLite pass",
    ),
]

LEASE = 3


def need_servers() -> None:
    try:
        throwaway_pg.find_bindir()
    except throwaway_pg.PostgresNotFound as exc:
        pytest.skip(f"no PostgreSQL server binaries: {exc}")
    if not (shutil.which("redis-server") or os.access(REDIS_SERVER, os.X_OK)):
        pytest.skip("no redis-server binary (apt-get install -y redis-server)")


@pytest.fixture(scope="module")
def production(scripted_llm_server: ScriptedLLM) -> Iterator[Stack]:
    """PostgreSQL + Redis (channel layer and broker), daphne, one qcluster with 2 workers."""
    need_servers()
    stack = Stack(
        model_url=scripted_llm_server.url, redis=True, postgres=True, AGENT_LEASE_SECONDS=str(LEASE)
    )
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def embedded(scripted_llm_server: ScriptedLLM) -> Iterator[Stack]:
    """The embedded default: a SQLite file, the ORM broker, no Redis."""
    stack = Stack(model_url=scripted_llm_server.url, redis=False, postgres=False)
    yield stack
    stack.stop()


@pytest.fixture
def model(scripted_llm_server: ScriptedLLM) -> Iterator[ScriptedLLM]:
    scripted_llm_server.reset()
    yield scripted_llm_server
    scripted_llm_server.reset()


def start(stack: Stack, task: str) -> str:
    status, body = stack.api("POST", "/traces", {"messages": [{"role": "user", "content": task}]})
    assert status == 201, body
    return body["trace_id"]


def assert_contiguous(events: list[dict[str, Any]]) -> None:
    ids = [e["event_id"] for e in events]
    assert ids == list(range(1, len(ids) + 1)), ids


def assert_healthy_messages(stack: Stack, trace_id: str) -> list[dict[str, Any]]:
    """Sequences contiguous and unique; every tool call answered exactly once."""
    status, body = stack.api("GET", f"/traces/{trace_id}/messages?mode=all")
    assert status == 200, body
    messages = body["results"] if isinstance(body, dict) and "results" in body else body
    sequences = [m["sequence"] for m in messages]
    assert sequences == list(range(1, len(sequences) + 1))
    calls = [c["id"] for m in messages for c in (m.get("tool_calls") or [])]
    answers = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert sorted(calls) == sorted(answers) and len(set(answers)) == len(answers)
    return messages


def tool_round(delay: float = 0.0) -> Reply:
    return Reply(tool_calls=[ToolCall("list_files", {"path": "."})], delay=delay)


def test_watch_a_run_to_final_with_a_reconnect_midway(production: Stack, model: ScriptedLLM):
    model.script("scripted", [tool_round(), tool_round(delay=0.3), tool_round(delay=0.3), "All listed."])
    trace_id = start(production, "list the files three times")
    first: list[dict[str, Any]] = []
    for event in production.events(trace_id, until="tool_result"):
        first.append(event)
    rest = list(production.events(trace_id, since=first[-1]["event_id"]))
    events = first + rest
    assert_contiguous(events)
    assert events[-1]["type"] == "final" and events[-1]["payload"]["result"] == "All listed."
    assert {"run_started", "message", "tool_call", "tool_result", "token"} <= {e["type"] for e in events}
    assert_healthy_messages(production, trace_id)


def test_stop_during_a_slow_model_call_takes_effect_within_two_seconds(production: Stack, model: ScriptedLLM):
    model.script("scripted", [Reply(text="too late", delay=20)])
    trace_id = start(production, "think for a long time")
    model.wait_for_requests(2, timeout=30)  # the name, then the slow call is in flight
    started = time.monotonic()
    status, body = production.api("POST", f"/traces/{trace_id}/stop")
    assert status == 202, body
    production.wait_for(
        lambda: production.api("GET", f"/traces/{trace_id}")[1]["status"] == "stopped",
        timeout=5,
        what="stopped",
    )
    assert time.monotonic() - started < 2.0
    events = list(production.events(trace_id, until="stopped", timeout=5))
    assert_contiguous(events)


def test_a_worker_killed_mid_run_is_swept_and_the_run_finishes_healed(production: Stack, model: ScriptedLLM):
    slow_then_list = Reply(
        tool_calls=[ToolCall("bash", {"command": "sleep 15"}), ToolCall("list_files", {"path": "."})]
    )
    model.script("scripted", [tool_round(), slow_then_list, "Recovered and done."])
    trace_id = start(production, "survive a crash")

    def bash_in_flight() -> bool:
        _, messages = production.api("GET", f"/traces/{trace_id}/messages?mode=all")
        return any(c["function"]["name"] == "bash" for m in messages for c in (m.get("tool_calls") or []))

    production.wait_for(bash_in_flight, what="the bash call to start")
    time.sleep(0.5)
    production.kill_cluster(production.clusters[-1])  # kill -9, mid-tool
    _, trace = production.api("GET", f"/traces/{trace_id}")
    assert trace["status"] == "running"
    time.sleep(LEASE + 0.5)  # the heartbeat goes stale
    production.start_cluster()  # its workers sweep at start

    events = list(production.events(trace_id, timeout=60))
    assert_contiguous(events)
    types = [e["type"] for e in events]
    assert "run_resumed" in types and types[-1] == "final"
    assert events[-1]["payload"]["result"] == "Recovered and done."
    messages = assert_healthy_messages(production, trace_id)
    healed = [m for m in messages if m["kind"] == "healed"]
    assert sorted(m["name"] for m in healed) == ["bash", "list_files"]
    assert [m["content"] for m in messages if m["role"] == "assistant"][-1] == "Recovered and done."


def test_the_embedded_default_streams_across_processes_by_polling(embedded: Stack, model: ScriptedLLM):
    model.script("scripted", [tool_round(), tool_round(delay=0.2), "Done without Redis."])
    trace_id = start(embedded, "list the files twice")
    first = []
    for event in embedded.events(trace_id, until="tool_result"):
        first.append(event)
    events = first + list(embedded.events(trace_id, since=first[-1]["event_id"]))
    assert_contiguous(events)
    assert events[-1]["payload"]["result"] == "Done without Redis."
    assert_healthy_messages(embedded, trace_id)

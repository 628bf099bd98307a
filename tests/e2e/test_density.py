"""Many runs per worker process, end to end (issue 18, W1, W5): real daphne and
qcluster processes with one worker, on the embedded SQLite default and on
PostgreSQL + Redis (the psycopg connection pool).

The scripted model holds requests at a gate, so what one process holds at a
moment is observed, not timed: the trace rows' `run_owner` (host:pid:thread)
says which process and thread holds each run.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.stack import Stack
from tests.e2e.test_service import assert_healthy_messages, need_servers
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        bool(os.environ.get("DATABASE_URL")),
        reason="e2e tests start their own PostgreSQL and Redis; they run once, in the SQLite pass",
    ),
]

LEASE = 3


class Gate:
    """Holds scripted model requests until opened; counts the ones it holds."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.held = 0
        self.opened = False

    def hold(self) -> None:
        with self._cond:
            self.held += 1
            self._cond.notify_all()
            self._cond.wait_for(lambda: self.opened, timeout=180)

    def wait_held(self, count: int, timeout: float = 120) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self.held >= count, timeout=timeout):
                raise AssertionError(f"{self.held} of {count} model requests arrived")

    def open(self) -> None:
        with self._cond:
            self.opened = True
            self._cond.notify_all()


def task_of(body: dict[str, Any]) -> str:
    text = " ".join(str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "user")
    found = re.search(r"task-\d+", text)
    return found.group(0) if found else "?"


def has_tool_result(body: dict[str, Any]) -> bool:
    return any(m.get("role") == "tool" for m in body.get("messages", []))


@pytest.fixture(params=["sqlite", "postgres"])
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        need_servers()
    return str(request.param)


def make_stack(kind: str, model: ScriptedLLM, **env: str) -> Stack:
    postgres = kind == "postgres"
    return Stack(
        model_url=model.url,
        redis=postgres,
        postgres=postgres,
        workers=1,
        AGENT_LEASE_SECONDS=str(LEASE),
        **env,
    )


@pytest.fixture
def model(scripted_llm_server: ScriptedLLM) -> Iterator[ScriptedLLM]:
    scripted_llm_server.reset()
    yield scripted_llm_server
    scripted_llm_server.reset()


def rows(stack: Stack, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Read the stack's database directly (what the API does not show: run_owner)."""
    if stack.pg is not None:
        import psycopg

        with psycopg.connect(stack.pg.url) as conn:
            return list(conn.execute(sql, params).fetchall())
    conn = sqlite3.connect(stack.tmp / "db.sqlite3", timeout=20)
    try:
        return list(conn.execute(sql.replace("%s", "?"), params).fetchall())
    finally:
        conn.close()


def holders(stack: Stack, trace_ids: list[str]) -> dict[str, tuple[str, str]]:
    """(pid, thread) of the run holding each trace's lease now, by trace id."""
    found = rows(stack, "SELECT trace_id, run_owner FROM traces_trace WHERE status = 'running'")
    return {t: tuple(owner.split(":")[-2:]) for t, owner in found if t in trace_ids and owner}  # type: ignore[misc]


def start_runs(stack: Stack, count: int) -> list[str]:
    trace_ids = []
    for n in range(count):
        status, body = stack.api(
            "POST", "/traces", {"messages": [{"role": "user", "content": f"do task-{n}"}]}
        )
        assert status == 201, body
        trace_ids.append(body["trace_id"])
    return trace_ids


def all_ended(stack: Stack, trace_ids: list[str]) -> dict[str, dict[str, Any]] | None:
    traces = {t: stack.api("GET", f"/traces/{t}")[1] for t in trace_ids}
    return traces if all(t["status"] not in ("queued", "running") for t in traces.values()) else None


def worker_log(stack: Stack) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted(stack.tmp.glob("qcluster-*.log")))


def test_a_full_worker_holds_at_most_its_capacity_and_the_rest_wait_queued(kind: str, model: ScriptedLLM):
    capacity, extra = 3, 2
    gate = Gate()

    def answer(body: dict[str, Any]) -> Reply:
        gate.hold()
        return Reply(text=f"done {task_of(body)}")

    model.script("scripted", [answer] * 50)
    stack = make_stack(kind, model, AGENT_RUNS_PER_WORKER=str(capacity))
    try:
        trace_ids = start_runs(stack, capacity + extra)
        gate.wait_held(capacity)
        time.sleep(1.5)  # room for a run past capacity to show up, if the host let one in
        held = holders(stack, trace_ids)
        assert gate.held == capacity
        owners = list(held.values())
        assert len({pid for pid, _ in owners}) == 1 and len(set(owners)) == capacity
        queued = rows(stack, "SELECT trace_id FROM traces_trace WHERE status = 'queued'")
        assert len([t for (t,) in queued if t in trace_ids]) == extra  # reserved, not claimed, not failed
        # A stop reaches a run of the full process while its model call is held,
        # and the slot it frees lets a queued run in.
        stopped = next(iter(held))
        assert stack.api("POST", f"/traces/{stopped}/stop")[0] == 202
        stack.wait_for(
            lambda: stack.api("GET", f"/traces/{stopped}")[1]["status"] == "stopped", what="the stop"
        )
        gate.wait_held(capacity + 1)
        gate.open()
        most = 0
        deadline = time.monotonic() + 120
        while (ended := all_ended(stack, trace_ids)) is None:
            per_process: dict[str, int] = {}
            for pid, _ in holders(stack, trace_ids).values():
                per_process[pid] = per_process.get(pid, 0) + 1
            most = max([most, *per_process.values()])
            assert time.monotonic() < deadline, "runs did not end"
            time.sleep(0.05)
        assert most <= capacity
        expected = {t: "stopped" if t == stopped else "completed" for t in trace_ids}
        assert {t: ended[t]["status"] for t in trace_ids} == expected
        for n, trace_id in enumerate(trace_ids):
            if trace_id != stopped:
                assert ended[trace_id]["result_summary"] == f"done task-{n}"
        assert "database is locked" not in worker_log(stack)
        # a run task's success is its trace: django-q keeps no Success row for it (save=False;
        # its monitor would re-read every kept row per finished task)
        assert rows(stack, "SELECT count(*) FROM django_q_task WHERE success") == [(0,)]
    finally:
        gate.open()
        stack.stop()


def test_kill_9_of_a_worker_holding_20_runs_then_all_20_complete_once(kind: str, model: ScriptedLLM):
    runs = 20
    gate = Gate()

    def step(body: dict[str, Any]) -> Reply:
        if not has_tool_result(body):
            return Reply(tool_calls=[ToolCall("list_files", {"path": "."})])
        gate.hold()  # every run waits on its second model call when the worker dies
        return Reply(text=f"done {task_of(body)}")

    model.script("scripted", [step] * 200)
    stack = make_stack(kind, model)
    try:
        trace_ids = start_runs(stack, runs)
        gate.wait_held(runs)
        owners = list(holders(stack, trace_ids).values())
        assert len({pid for pid, _ in owners}) == 1 and len(set(owners)) == runs
        if stack.pg is not None:  # the pool: 20 runs in one process do not hold 20 connections
            (connections,) = rows(
                stack, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            )
            assert connections[0] < runs
        stack.kill_cluster(stack.clusters[-1])
        gate.open()  # the held requests answer to a dead process
        time.sleep(LEASE + 0.5)  # the leases lapse
        stack.start_cluster()  # its worker sweeps at start and resumes the 20
        ended = stack.wait_for(lambda: all_ended(stack, trace_ids), timeout=180, what="all 20 runs to end")
        for n, trace_id in enumerate(trace_ids):
            assert ended[trace_id]["status"] == "completed", ended[trace_id]
            assert ended[trace_id]["result_summary"] == f"done task-{n}"
            messages = assert_healthy_messages(stack, trace_id)
            assert [m["role"] for m in messages if m["role"] in ("assistant", "tool")] == [
                "assistant",
                "tool",
                "assistant",
            ]
            _, events = stack.api("GET", f"/traces/{trace_id}/events")
            types = [e["type"] for e in (events["results"] if isinstance(events, dict) else events)]
            assert types.count("run_resumed") == 1 and types.count("final") == 1, types
        assert "database is locked" not in worker_log(stack)
    finally:
        gate.open()
        stack.stop()

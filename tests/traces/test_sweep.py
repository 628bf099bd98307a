"""The stale-run sweep (W5): dead workers' runs are resumed once, healed, and
nothing else is touched; live runs keep their lease through slow calls and tools."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db.utils import OperationalError
from django.utils import timezone

from tests.scripted_llm import Reply, ToolCall
from traces import sweeper
from traces.models import Goal, GoalStatus, Message, Trace, TraceEvent, TraceStatus
from traces.runner import AgentRunner, RunConfig
from traces.runner.store import trace_claim
from traces.services.runs import trace_start
from traces.services.sweep import runs_sweep_stale, trace_recover
from traces.tasks import SWEEP_SCHEDULE_NAME, SWEEP_TASK, on_worker_start

LONG_AGO = timedelta(minutes=10)


def dead_run(owner: Any, messages: list[dict[str, Any]], **fields: Any) -> Trace:
    """A trace left `running` by a worker that died LONG_AGO, with `messages` on its main path."""
    now = timezone.now()
    values: dict[str, Any] = {
        "trace_id": str(uuid.uuid4()),
        "task": "count the files",
        "status": TraceStatus.RUNNING,
        "owner": owner,
        "model": "openai/scripted",
        "run_owner": "dead-host:1234:1",
        "run_token": 5,
        "heartbeat_at": now - LONG_AGO,
        "created_at": now - LONG_AGO,
        "updated_at": now - LONG_AGO,
        "last_sequence": len(messages),
        "head_sequence": len(messages),
    }
    values.update(fields)
    trace = Trace.objects.create(**values)
    for sequence, data in enumerate(messages, start=1):
        message = Message.from_llm_dict(
            data, trace_id=trace.trace_id, sequence=sequence, parent_sequence=sequence - 1 or None
        )
        message.save()
    return trace


def call(call_id: str, name: str = "list_files") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": '{"path": "."}'}}


MID_STEP = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "count the files"},
    {"role": "assistant", "content": None, "tool_calls": [call("call_a"), call("call_b")]},
    {"role": "tool", "tool_call_id": "call_a", "name": "list_files", "content": "a.txt"},
]


def assert_healthy_path(trace: Trace) -> list[Message]:
    """Sequences contiguous and unique; every tool call answered exactly once."""
    messages = list(Message.objects.filter(trace=trace).order_by("sequence"))
    assert [m.sequence for m in messages] == list(range(1, len(messages) + 1))
    calls = [c["id"] for m in messages for c in (m.tool_calls or [])]
    answers = [m.tool_call_id for m in messages if m.role == "tool"]
    assert sorted(calls) == sorted(answers)
    assert len(set(answers)) == len(answers)
    return messages


@pytest.fixture
def enqueued(monkeypatch: Any) -> list[tuple[Any, ...]]:
    """Tasks the sweep queues, captured instead of sent to a broker."""
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr("django_q.tasks.async_task", lambda *args, **kwargs: calls.append(args))
    return calls


def test_a_dead_run_is_resumed_healed_and_finished(integrator, llm, inline_worker):
    trace = dead_run(integrator, MID_STEP)
    llm.script("scripted", [Reply(text="There is one file.")])
    with inline_worker():
        report = runs_sweep_stale()
    assert report.resumed == [trace.trace_id]

    trace.refresh_from_db()
    assert trace.status == TraceStatus.COMPLETED
    assert trace.result_summary == "There is one file."
    assert trace.run_token == 7  # the sweep's reservation, then the worker's claim
    messages = assert_healthy_path(trace)
    healed = [m for m in messages if m.kind == "healed"]
    assert [m.tool_call_id for m in healed] == ["call_b"]
    assert [m.role for m in messages[:4]] == ["system", "user", "assistant", "tool"]  # untouched
    sent = llm.requests_for("scripted")[-1].messages
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["call_a", "call_b"]
    types = list(TraceEvent.objects.filter(trace=trace).values_list("type", flat=True))
    assert types[0] == "run_resumed" and types[-1] == "final"


def test_a_live_run_is_left_alone(integrator, enqueued):
    trace = dead_run(integrator, MID_STEP, heartbeat_at=timezone.now())
    assert not runs_sweep_stale()
    trace.refresh_from_db()
    assert (trace.status, trace.run_token, enqueued) == (TraceStatus.RUNNING, 5, [])


def test_two_sweeps_of_the_same_dead_run_resume_it_once(
    integrator, enqueued, django_capture_on_commit_callbacks
):
    trace = dead_run(integrator, MID_STEP)
    stale_before = timezone.now() - timedelta(seconds=30)
    with django_capture_on_commit_callbacks(execute=True):
        first = trace_recover(trace_id=trace.trace_id, token=5, stale_before=stale_before)
        second = trace_recover(trace_id=trace.trace_id, token=5, stale_before=stale_before)
    assert (first, second) == ("resumed", "skipped")
    assert len(enqueued) == 1
    _task, trace_id, messages, config = enqueued[0]
    assert (trace_id, messages, config["reserved_token"]) == (trace.trace_id, [], 6)
    trace.refresh_from_db()
    assert (trace.status, trace.run_token, trace.heartbeat_at) == (TraceStatus.QUEUED, 6, None)


def test_a_run_that_died_after_its_final_answer_is_completed(integrator, enqueued):
    answer = [*MID_STEP[:2], {"role": "assistant", "content": "Two files."}]
    trace = dead_run(integrator, answer)
    assert runs_sweep_stale().completed == [trace.trace_id]
    trace.refresh_from_db()
    assert (trace.status, trace.result_summary, trace.run_owner) == (TraceStatus.COMPLETED, "Two files.", "")
    final = TraceEvent.objects.get(trace=trace, type="final")
    assert final.payload["result"] == "Two files." and final.event_id == trace.last_event_id
    assert enqueued == []


def test_a_run_the_sweep_ends_leaves_its_open_goals_marked_before_the_end_event(integrator, enqueued):
    answer = [*MID_STEP[:2], {"role": "assistant", "content": "Two files."}]
    trace = dead_run(integrator, answer, current_goal_id="1")
    Goal.objects.create(trace=trace, goal_id="1", description="Count", status=GoalStatus.IN_PROGRESS)
    Goal.objects.create(trace=trace, goal_id="2", description="Check", status=GoalStatus.COMPLETED)

    assert runs_sweep_stale().completed == [trace.trace_id]

    goals = dict(Goal.objects.filter(trace=trace).values_list("goal_id", "left_open"))
    assert goals == {"1": "completed", "2": ""}
    trace.refresh_from_db()
    events = list(TraceEvent.objects.filter(trace=trace).order_by("event_id"))
    assert [(e.type, e.payload.get("left_open")) for e in events] == [
        ("goal_updated", "completed"),
        ("final", None),
    ]
    assert events[-1].event_id == trace.last_event_id and events[-1].payload["cost_state"] == "known"


def test_a_dead_run_asked_to_stop_ends_stopped(integrator, enqueued):
    trace = dead_run(integrator, MID_STEP, stop_requested=True)
    assert runs_sweep_stale().stopped == [trace.trace_id]
    trace.refresh_from_db()
    assert trace.status == TraceStatus.STOPPED
    assert TraceEvent.objects.filter(trace=trace, type="stopped").exists()
    assert enqueued == []


def test_a_run_that_died_before_its_first_step_fails_with_the_reason(integrator, enqueued):
    trace = dead_run(integrator, [])
    assert runs_sweep_stale().failed == [trace.trace_id]
    trace.refresh_from_db()
    assert trace.status == TraceStatus.FAILED
    assert "before the run's first step was saved" in trace.error_message


def test_a_reservation_no_worker_claimed_fails_only_after_the_grace(integrator, enqueued, settings):
    settings.AGENT_QUEUE_GRACE_SECONDS = 3600
    queued = {"status": TraceStatus.QUEUED, "heartbeat_at": None}
    waiting = dead_run(integrator, [], **queued, updated_at=timezone.now() - timedelta(minutes=5))
    lost = dead_run(integrator, [], **queued, updated_at=timezone.now() - timedelta(hours=2))
    report = runs_sweep_stale()
    assert report.failed == [lost.trace_id]
    waiting.refresh_from_db()
    lost.refresh_from_db()
    assert waiting.status == TraceStatus.QUEUED
    assert lost.status == TraceStatus.FAILED and "not picked up by any worker" in lost.error_message


def sweep_while(thread: threading.Thread) -> list[Any]:
    """Sweep every 0.2 s until `thread` ends; returns the non-empty reports.

    The SQLite test database is in memory with a shared cache, where a read that
    meets another connection's write transaction fails at once with "database
    table is locked" (no busy timeout, unlike the WAL file a service uses); that
    sweep is skipped and the next one runs, as the next scheduled sweep would.
    """
    reports = []
    while thread.is_alive():
        try:
            report = runs_sweep_stale()
        except OperationalError as exc:
            if "table is locked" not in str(exc):
                raise
            report = None
        if report:
            reports.append(report)
        time.sleep(0.2)
    return reports


def test_a_model_call_longer_than_the_lease_keeps_its_lease(llm, workspace_root, transactional_db, settings):
    settings.AGENT_LEASE_SECONDS = 1
    llm.script("scripted", [Reply(text="slow but alive", delay=2.5)])
    results: list[Any] = []
    config = RunConfig(stream=False)
    thread = threading.Thread(
        target=lambda: results.append(AgentRunner().run_result([{"role": "user", "content": "wait"}], config))
    )
    thread.start()
    llm.wait_for_requests(2, timeout=10)
    assert sweep_while(thread) == []
    assert results[0].status == TraceStatus.COMPLETED
    assert Trace.objects.get().run_token == 1


def test_a_tool_longer_than_the_lease_keeps_its_lease(llm, workspace_root, transactional_db, settings):
    settings.AGENT_LEASE_SECONDS = 1
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("bash", {"command": "sleep 2.5; echo ok"})]), Reply(text="done")],
    )
    results: list[Any] = []
    config = RunConfig(stream=False)
    thread = threading.Thread(
        target=lambda: results.append(
            AgentRunner().run_result([{"role": "user", "content": "sleep"}], config)
        )
    )
    thread.start()
    llm.wait_for_requests(2, timeout=10)
    assert sweep_while(thread) == []
    assert results[0].status == TraceStatus.COMPLETED
    tool = Message.objects.get(role="tool")
    assert "ok" in str(tool.content) and tool.kind != "healed"


def test_each_worker_start_ensures_one_schedule_and_sweeps(
    integrator, enqueued, django_capture_on_commit_callbacks
):
    from django_q.models import Schedule

    trace = dead_run(integrator, MID_STEP)
    with django_capture_on_commit_callbacks(execute=True):
        on_worker_start(proc_name="Process-1:1")
        on_worker_start(proc_name="Process-1:2")
    try:  # and from then on every AGENT_SWEEP_SECONDS, from one thread (traces/sweeper.py)
        assert [t.name for t in threading.enumerate()].count("sweeper") == 1
    finally:
        sweeper.stop()
    schedule = Schedule.objects.get(name=SWEEP_SCHEDULE_NAME)
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == (SWEEP_TASK, Schedule.MINUTES, 1)
    assert [args[1] for args in enqueued] == [trace.trace_id]


def test_a_run_that_died_between_its_claim_and_first_commit_runs_again_from_its_request(
    integrator, llm, inline_worker
):
    """The claim leaves the stored request; only the run's first commit, which holds its
    inputs, clears it. A worker killed in between loses no message."""
    started = trace_start(
        user=integrator, messages=[{"role": "user", "content": "count the files"}], name="n"
    )
    token = Trace.objects.get(pk=started.trace_id).run_token
    trace_claim(trace_id=started.trace_id, owner="dead-host:1:1", reserved_token=token)  # ... and died
    trace = Trace.objects.get(pk=started.trace_id)
    assert trace.status == TraceStatus.RUNNING and trace.run_request is not None
    Trace.objects.filter(pk=trace.pk).update(heartbeat_at=timezone.now() - LONG_AGO)

    llm.script("scripted", [Reply(text="There are none.")])
    with inline_worker():
        assert runs_sweep_stale().resumed == [trace.trace_id]

    trace.refresh_from_db()
    assert trace.status == TraceStatus.COMPLETED and trace.result_summary == "There are none."
    # the dead claim, the sweep's reservation and the new claim each took a token
    assert trace.run_request is None and trace.run_token == token + 3
    messages = assert_healthy_path(trace)
    assert [(m.role, m.content) for m in messages[1:]] == [
        ("user", "count the files"),
        ("assistant", "There are none."),
    ]
    resumed = TraceEvent.objects.get(trace=trace, type="run_resumed")
    assert "before the run's first step was saved" in resumed.payload["reason"]


def test_a_runs_first_commit_clears_its_stored_request(integrator, llm, inline_worker):
    llm.script("scripted", [Reply(text="Done.")])
    with inline_worker():
        started = trace_start(user=integrator, messages=[{"role": "user", "content": "hi"}], name="n")
    trace = Trace.objects.get(pk=started.trace_id)
    assert trace.status == TraceStatus.COMPLETED and trace.run_request is None

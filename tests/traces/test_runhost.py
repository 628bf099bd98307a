"""The run host (issue 18): runs in threads of one process, a capacity, the hand-over
at the claim; duplicate deliveries and a full process. Real threads, database and
scripted model; the model holds its reply until the test lets it go."""

from __future__ import annotations

import gc
import os
import runpy
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import F
from django.utils import timezone

from agentsite import heap
from tests.scripted_llm import Reply
from traces.models import Message, Trace, TraceStatus
from traces.process_local import PerProcess
from traces.runhost import CLAIMED, FULL, SKIPPED, RunHost
from traces.runner import RunConfig
from traces.services.runs import RUN_TASK, new_trace_id, task_config
from traces.tasks import _queue_again, run_trace


def reserved(owner: Any) -> tuple[str, RunConfig]:
    """A new trace reserved for a worker, as traces/services/runs.py:trace_start leaves it."""
    trace_id, now = new_trace_id(), timezone.now()
    Trace.objects.create(
        trace_id=trace_id,
        task="say done",
        status=TraceStatus.QUEUED,
        owner=owner,
        model="openai/scripted",
        created_at=now,
        updated_at=now,
        run_token=1,
        heartbeat_at=None,
    )
    return trace_id, RunConfig(new_trace_id=trace_id, reserved_token=1, owner_id=owner.pk)


def until_idle(host: RunHost) -> None:
    deadline = time.monotonic() + 60
    while host.running:
        assert time.monotonic() < deadline, f"runs still held: {host.running}"
        time.sleep(0.05)


MESSAGES = [{"role": "user", "content": "say done"}]


def held(gate: threading.Event, text: str) -> Callable[[dict[str, Any]], Reply]:
    """A scripted reply the model holds until the test sets `gate`."""

    def answer(body: dict[str, Any]) -> Reply:
        gate.wait(60)
        return Reply(text=text)

    return answer


@pytest.mark.django_db(transaction=True)
def test_a_run_goes_on_in_its_own_thread_and_a_full_host_takes_no_other(integrator, llm, workspace_root):
    gate = threading.Event()
    llm.script("scripted", [held(gate, "done")])
    host = RunHost(capacity=1)
    first, first_config = reserved(integrator)
    second, second_config = reserved(integrator)
    try:
        assert host.start(first, MESSAGES, first_config) == CLAIMED
        assert host.running == [first]
        owner = Trace.objects.get(pk=first).run_owner
        run_thread = next(t for t in threading.enumerate() if t.name == f"run {first}")
        assert owner.endswith(f":{run_thread.ident}") and run_thread is not threading.current_thread()
        # full: the second run is not taken, and its reservation stays queued
        assert host.start(second, MESSAGES, second_config, wait=0.3) == FULL
        row = Trace.objects.get(pk=second)
        assert (row.status, row.heartbeat_at, row.run_owner) == (TraceStatus.QUEUED, None, "")
    finally:
        gate.set()
    until_idle(host)
    assert host.start(second, MESSAGES, second_config) == CLAIMED  # the slot is free again
    until_idle(host)
    statuses = dict(Trace.objects.filter(pk__in=[first, second]).values_list("pk", "status"))
    assert statuses == {first: TraceStatus.COMPLETED, second: TraceStatus.COMPLETED}


@pytest.mark.django_db(transaction=True)
def test_a_full_process_gives_a_run_back_to_the_broker_after_the_slot_wait(
    integrator, llm, workspace_root, monkeypatch, settings
):
    """A process with no free slot holds a task only AGENT_SLOT_WAIT_SECONDS, then queues
    it again, still reserved, for a process with room (a burst spreads unevenly), and
    takes no further task itself until one of its slots frees."""
    from django_q.conf import Conf
    from django_q.models import OrmQ

    import traces.runhost

    gate = threading.Event()
    llm.script("scripted", [held(gate, "done"), Reply(text="done too")])
    host = RunHost(capacity=1)
    monkeypatch.setattr(traces.runhost, "_host", PerProcess(lambda: host))
    monkeypatch.setattr(Conf, "SYNC", False)  # a worker process's path, not the inline one
    settings.AGENT_SLOT_WAIT_SECONDS = 0.3
    first, first_config = reserved(integrator)
    second, second_config = reserved(integrator)
    first_dict, second_dict = task_config(first_config), task_config(second_config)
    outcomes: list[str] = []
    try:
        assert run_trace(first, MESSAGES, first_dict) == CLAIMED
        task = threading.Thread(target=lambda: outcomes.append(run_trace(second, MESSAGES, second_dict)))
        task.start()
        deadline = time.monotonic() + 30  # the slot wait, not half the task timeout
        while not OrmQ.objects.exists():
            assert time.monotonic() < deadline, "the run was not queued again"
            time.sleep(0.05)
        assert [(q.func(), q.task["args"][0]) for q in OrmQ.objects.all()] == [(RUN_TASK, second)]
        assert Trace.objects.get(pk=second).status == TraceStatus.QUEUED
        time.sleep(0.3)
        assert task.is_alive() and outcomes == []  # still full: the worker takes nothing new
    finally:
        gate.set()
    task.join(30)
    assert outcomes == ["requeued"]  # back once the first run freed its slot
    until_idle(host)
    assert run_trace(second, MESSAGES, second_dict) == CLAIMED  # the queued task, delivered again
    until_idle(host)
    statuses = dict(Trace.objects.filter(pk__in=[first, second]).values_list("pk", "status"))
    assert statuses == {first: TraceStatus.COMPLETED, second: TraceStatus.COMPLETED}


@pytest.mark.django_db(transaction=True)
def test_a_duplicate_delivery_to_the_host_does_nothing(integrator, llm, workspace_root):
    gate = threading.Event()
    llm.script("scripted", [held(gate, "done once"), Reply(text="a second run")])
    host = RunHost(capacity=2)
    trace_id, config = reserved(integrator)
    try:
        assert host.start(trace_id, MESSAGES, config) == CLAIMED
        assert host.start(trace_id, MESSAGES, config) == SKIPPED  # the reservation was claimed
        assert host.running == [trace_id]
    finally:
        gate.set()
    until_idle(host)
    trace = Trace.objects.get(pk=trace_id)
    assert (trace.status, trace.result_summary) == (TraceStatus.COMPLETED, "done once")
    assert len(llm.requests_for("scripted")) == 1


@pytest.mark.django_db
def test_a_run_a_full_worker_gave_up_waiting_for_goes_back_to_the_queue_still_reserved(integrator):
    from django_q.models import OrmQ

    trace_id, config = reserved(integrator)
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Trace.objects.filter(pk=trace_id).update(updated_at=an_hour_ago)
    assert _queue_again(trace_id, MESSAGES, config) == "requeued"
    queued = list(OrmQ.objects.all())
    assert [(q.func(), q.task["args"][0]) for q in queued] == [(RUN_TASK, trace_id)]
    assert queued[0].task["args"][2] == task_config(config)  # the same task as the first delivery
    assert Trace.objects.get(pk=trace_id).updated_at > an_hour_ago  # the sweep sees it as still queued
    # a reservation stopped meanwhile is not queued again
    Trace.objects.filter(pk=trace_id).update(status=TraceStatus.STOPPED)
    assert _queue_again(trace_id, MESSAGES, config) == "skipped"
    assert OrmQ.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_waiting_runs_see_a_stop_and_a_lost_lease_while_their_model_call_is_held(
    integrator, llm, workspace_root
):
    gate = threading.Event()
    llm.script("scripted", [held(gate, "too late"), held(gate, "too late")])
    host = RunHost(capacity=2)
    stopped, stopped_config = reserved(integrator)
    superseded, superseded_config = reserved(integrator)
    try:
        assert host.start(stopped, MESSAGES, stopped_config) == CLAIMED
        assert host.start(superseded, MESSAGES, superseded_config) == CLAIMED
        deadline = time.monotonic() + 30
        while len(llm.requests_for("scripted")) < 2:
            assert time.monotonic() < deadline, "the model calls did not start"
            time.sleep(0.05)
        Trace.objects.filter(pk=stopped).update(stop_requested=True)
        Trace.objects.filter(pk=superseded).update(run_token=F("run_token") + 1)  # another run claimed it
        until_idle(host)  # both runs ended while their model calls are still held
    finally:
        gate.set()
    assert Trace.objects.get(pk=stopped).status == TraceStatus.STOPPED
    row = Trace.objects.get(pk=superseded)
    assert (row.status, row.run_token) == (TraceStatus.RUNNING, 3)  # the other run's, untouched
    assert not Message.objects.filter(trace_id=superseded, role="assistant").exists()  # fenced


@pytest.fixture
def deferred_collections():
    """This (test) process deferring its full collections as a worker does, and not
    collecting by itself: only the run host's collection may free a cycle."""
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    heap.defer_full_collections()
    gc.disable()
    yield
    heap._deferred = False
    gc.set_threshold(*threshold)
    if enabled:
        gc.enable()


class Node:
    me: Node


@pytest.mark.django_db(transaction=True)
def test_the_host_collects_in_full_when_its_last_run_ends(
    integrator, llm, workspace_root, deferred_collections
):
    gates = {"first": threading.Event(), "second": threading.Event()}

    def answer(body: dict[str, Any]) -> Reply:
        gates[body["messages"][-1]["content"]].wait(60)
        return Reply(text="done")

    llm.script("scripted", [answer, answer])
    node = Node()
    node.me = node  # garbage in a reference cycle, made before the runs
    garbage = weakref.ref(node)
    del node
    host = RunHost(capacity=2)
    threads = {}
    try:
        for name in gates:
            trace_id, config = reserved(integrator)
            assert host.start(trace_id, [{"role": "user", "content": name}], config) == CLAIMED
            threads[name] = next(t for t in threading.enumerate() if t.name == f"run {trace_id}")
        gates["first"].set()
        threads["first"].join(60)
        assert not threads["first"].is_alive()
        assert garbage() is not None  # a run still goes on: no pause for it
    finally:
        for gate in gates.values():
            gate.set()
    threads["second"].join(60)
    assert not threads["second"].is_alive()
    assert garbage() is None  # the last run's end collected


@pytest.mark.parametrize(("value", "read"), [(None, 10), ("", 10), ("0", 0), ("19", 19)])
def test_worker_nice_defaults_to_ten(monkeypatch: pytest.MonkeyPatch, value: str | None, read: int) -> None:
    if value is None:
        monkeypatch.delenv("AGENT_WORKER_NICE", raising=False)
    else:
        monkeypatch.setenv("AGENT_WORKER_NICE", value)

    assert runpy.run_module("agentsite.settings.service")["AGENT_WORKER_NICE"] == read


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("20", "AGENT_WORKER_NICE=20 must be <= 19"),
        ("-5", "AGENT_WORKER_NICE=-5 must be >= 0"),
        ("x", "not an integer"),
    ],
)
def test_a_worker_nice_out_of_range_stops_start_up(
    monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    monkeypatch.setenv("AGENT_WORKER_NICE", value)

    with pytest.raises(ImproperlyConfigured, match=message):
        runpy.run_module("agentsite.settings.service")


def test_the_preload_imports_the_request_path_and_prints_nothing(tmp_path):
    """The cluster parent's preload (before it forks): litellm's providers, the OpenAI SDK and
    the built-in tools imported, no output (litellm's "Provider List" banner for its unpriced
    model used to reach the service's log). A process of its own: it freezes the heap."""
    script = (
        "import django, sys; django.setup()\n"
        "from traces.runhost import preload\n"
        "preload()\n"
        "wanted = ('litellm.llms.anthropic.chat.handler', 'openai.resources.chat', 'bs4',\n"
        "          'litellm.responses.mcp.chat_completions_handler')  # a call with tools imports it\n"
        "sys.stderr.write(' '.join(name for name in wanted if name not in sys.modules))\n"
    )
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="agentsite.settings", AGENT_WORKSPACE_ROOT=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr == "", "not imported, or printed: " + done.stderr

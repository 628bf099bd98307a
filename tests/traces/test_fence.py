"""Every write of a run goes through its fence (W5): a run that lost its lease
writes no goal, approval or experience counter, and a crash + resume counts an
outcome once.

"Another worker takes the trace" is a real token bump from a lifecycle hook, at
the point of the run the test names.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone

from memory.models import Experience, ExperienceStatus
from memory.services import experience_create
from tests.scripted_llm import Reply, ToolCall
from traces.guards.hooks import LifecycleHooks
from traces.models import Approval, Goal, Trace, TraceEvent
from traces.runner import AgentRunner, LeaseLost, RunConfig

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def take_lease_once(point: str) -> LifecycleHooks:
    """Hooks that bump the run's token once at `point`, as a second worker's claim would."""
    hooks = LifecycleHooks()
    done: list[bool] = []

    def claim(trace: Trace, *_: Any) -> None:
        if not done:
            done.append(True)
            Trace.objects.filter(pk=trace.pk).update(run_token=F("run_token") + 1)

    hooks.register(point, claim)
    return hooks


def resume(trace_id: str, runner: AgentRunner) -> Any:
    """The run after the lost one: the lease looks dead, a continue with no input claims it."""
    Trace.objects.filter(pk=trace_id).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    return runner.run_result([], RunConfig(trace_id=trace_id))


def test_a_goal_added_after_the_lease_was_lost_is_not_stored(llm, workspace_root):
    llm.script("scripted", [Reply(tool_calls=[ToolCall("goal", {"action": "add", "description": "Plan"})])])
    runner = AgentRunner(hooks=take_lease_once("before_tool_call"))

    with pytest.raises(LeaseLost):
        runner.run_result(user("plan it"), RunConfig(name="n", enable_memory=False))

    assert not Goal.objects.exists()
    assert not TraceEvent.objects.filter(type="goal_added").exists()


def test_an_approval_is_not_asked_by_a_run_that_lost_its_lease(llm, workspace_root):
    # ask-all gates a read-only call that would not commit the step before the gate.
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})])])
    runner = AgentRunner(hooks=take_lease_once("after_model"))

    with pytest.raises(LeaseLost):
        runner.run_result(user("look"), RunConfig(name="n", enable_memory=False, confirm_policy="ask-all"))

    assert not Approval.objects.exists()
    assert not TraceEvent.objects.filter(type="confirm_required").exists()


def test_an_asked_approval_is_stored_with_its_event(llm, workspace_root):
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})])])

    result = AgentRunner().run_result(
        user("look"), RunConfig(name="n", enable_memory=False, confirm_policy="ask-all")
    )

    assert result.status == "waiting"
    approval = Approval.objects.get(trace_id=result.trace_id)
    event = TraceEvent.objects.get(trace_id=result.trace_id, type="confirm_required")
    assert event.payload["approval_id"] == approval.pk and event.payload["tool"] == "list_files"


def test_citations_and_the_outcome_count_once_across_a_lost_lease_and_a_resume(llm, workspace_root):
    lesson = experience_create(
        rule="Tag the release first.", tags={"intent": ["deploy"]}, status=ExperienceStatus.APPROVED
    )
    tags = Reply(text=json.dumps({"state": [], "intent": ["deploy"]}))
    llm.script("utility", ["Deploy", tags])
    # The first answer is lost with the lease; the resumed run answers again.
    llm.script("scripted", [f"Done, following [{lesson.code}].", f"Done, following [{lesson.code}]."])

    with pytest.raises(LeaseLost):
        AgentRunner(hooks=take_lease_once("after_model")).run_result(user("deploy it"), RunConfig())

    trace = Trace.objects.get()
    lesson.refresh_from_db()
    assert (lesson.usage_count, lesson.outcome_runs, lesson.helpful) == (0, 0, 0)
    assert "outcome" not in trace.context["experiences"]

    result = resume(trace.trace_id, AgentRunner())

    assert result.status == "completed"
    lesson.refresh_from_db()
    assert (lesson.usage_count, lesson.outcome_runs, lesson.outcome_successes, lesson.helpful) == (1, 1, 1, 1)
    trace.refresh_from_db()
    assert trace.context["experiences"]["outcome"] == "completed"


def test_the_sweep_counts_the_outcome_of_a_run_that_died_after_its_answer(llm, workspace_root):
    from traces.services.sweep import runs_sweep_stale

    lesson = experience_create(rule="Check the logs.", tags={"intent": ["debug"]}, status="approved")
    llm.script("utility", ["Debug", Reply(text=json.dumps({"state": [], "intent": ["debug"]}))])
    llm.script("scripted", ["Found it."])
    result = AgentRunner().run_result(user("debug it"), RunConfig())
    assert result.status == "completed"
    lesson.refresh_from_db()
    assert lesson.outcome_runs == 1
    # Make it the trace of a worker that died after saving the answer, before its end:
    # still running, stale, its outcome neither marked nor counted.
    trace = Trace.objects.get(pk=result.trace_id)
    memory = {k: v for k, v in trace.context["experiences"].items() if k != "outcome"}
    stale = timezone.now() - timedelta(hours=1)
    Trace.objects.filter(pk=trace.pk).update(
        status="running", heartbeat_at=stale, context={**trace.context, "experiences": memory}
    )
    Experience.objects.filter(pk=lesson.pk).update(outcome_runs=0, outcome_successes=0)

    report = runs_sweep_stale()

    assert report.completed == [trace.pk]
    lesson.refresh_from_db()
    assert (lesson.outcome_runs, lesson.outcome_successes) == (1, 1)
    Trace.objects.filter(pk=trace.pk).update(status="running", heartbeat_at=stale)
    runs_sweep_stale()  # ends it again: the marker stops a second count
    lesson.refresh_from_db()
    assert lesson.outcome_runs == 1

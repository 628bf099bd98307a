"""A plan taken up again (R11 with R4 and G5): a rewind to exactly a step's answer keeps
that step done; an approval inside a step resumes the run in that same step."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from traces.models import Approval, Goal, Trace, TraceEvent
from traces.runner import RunConfig
from traces.selectors import trace_main_path
from traces.services.approvals import approval_decide

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def plan(*steps: str) -> str:
    return json.dumps({"steps": [{"description": s} for s in steps]})


def goals(trace_id: str) -> dict[str, Goal]:
    return {g.description: g for g in Goal.objects.filter(trace_id=trace_id)}


def test_rewind_to_exactly_a_steps_answer_keeps_that_step_done(runner, llm):
    llm.script(
        "scripted",
        [
            plan("write a.txt", "write b.txt"),
            Reply(tool_calls=[ToolCall("write", {"path": "a.txt", "content": "A"})]),
            Reply(text="wrote a.txt"),
            Reply(text="wrote b.txt"),
            Reply(text="Both written."),
        ],
    )
    first = runner.run_result(
        user("two files"), RunConfig(strategy="plan_execute", reflexion=False, name="p")
    )
    answer = next(m for m in trace_main_path(trace_id=first.trace_id) if m.content == "wrote a.txt")
    llm.script("scripted", [plan("write c.txt"), Reply(text="wrote c.txt"), Reply(text="c written.")])

    result = runner.run_result(
        user("instead of b, write c"), RunConfig(trace_id=first.trace_id, after_sequence=answer.sequence)
    )

    assert result.status == "completed" and result.result == "c written."
    by_name = goals(first.trace_id)
    # The step whose answer is the cut stays done; the one after the cut was open and is superseded.
    assert (by_name["write a.txt"].status, by_name["write a.txt"].summary) == ("completed", "wrote a.txt")
    assert by_name["write b.txt"].status == "abandoned"
    assert by_name["write b.txt"].summary == "superseded by the plan of a new request"
    assert by_name["write c.txt"].status == "completed"
    [rebuilt] = TraceEvent.objects.filter(trace_id=first.trace_id, type="goal_tree_rebuilt")
    assert rebuilt.payload["dropped_goal_ids"] == []  # both plans' goals were made before the cut


def test_an_approval_inside_a_plan_step_resumes_in_that_step_and_the_plan_goes_on(
    runner, llm, integrator, expert, inline_worker, workspace_root
):
    llm.script(
        "scripted",
        [
            plan("write out.txt", "check it"),
            Reply(tool_calls=[ToolCall("write", {"path": "out.txt", "content": "x"})]),
        ],
    )
    first = runner.run_result(
        user("write and check"),
        RunConfig(
            strategy="plan_execute", reflexion=False, confirm_policy="ask-risky", owner_id=integrator.pk
        ),
    )
    trace = Trace.objects.get(pk=first.trace_id)
    assert trace.status == "waiting"
    step_one = goals(trace.trace_id)["write out.txt"]
    assert trace.current_goal_id == step_one.goal_id
    llm.script(
        "scripted",
        [Reply(text="out.txt written"), Reply(text="it is there"), Reply(text="Written, checked.")],
    )

    with inline_worker():
        approval_decide(
            user=expert,
            trace_id=trace.trace_id,
            approval_id=Approval.objects.get(trace=trace).pk,
            decision="approve",
        )

    trace.refresh_from_db()
    assert trace.status == "completed" and trace.result_summary == "Written, checked."
    assert (workspace_root / trace.trace_id / "out.txt").read_text() == "x"
    by_name = goals(trace.trace_id)
    assert (by_name["write out.txt"].status, by_name["write out.txt"].summary) == (
        "completed",
        "out.txt written",
    )
    assert (by_name["check it"].status, by_name["check it"].summary) == ("completed", "it is there")
    resumed = llm.requests_for("scripted")[2]  # the first call after the approval: still step 1
    assert [m["role"] for m in resumed.messages if m["role"] != "system"][-1] == "tool"
    assert "1. [in_progress] write out.txt" in resumed.messages[-1]["content"]  # the plan injection
    guards = [m["content"] for m in resumed.messages if m["role"] == "system"]
    assert sum(g.startswith("Plan step 1 of 2") for g in guards) == 1  # no second note for the step
    assert not any(g.startswith("Plan step 2 of 2") for g in guards)
    notes = [
        m.content
        for m in trace_main_path(trace_id=trace.trace_id)
        if (m.content or "").startswith("Plan step")
    ]
    assert [n.split(":")[0] for n in notes] == ["Plan step 1 of 2", "Plan step 2 of 2"]
    assert TraceEvent.objects.filter(trace=trace, type="plan_made").count() == 1
    ended = TraceEvent.objects.filter(trace=trace, type="plan_step_ended").values_list("payload", flat=True)
    assert [(e["index"], e["status"]) for e in ended] == [(1, "completed"), (2, "completed")]

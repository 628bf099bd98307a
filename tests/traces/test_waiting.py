"""What a waiting trace waits for (traces/waiting.py): approvals, answers, sub-agents, the step limit."""

from __future__ import annotations

import pytest

from tests.factories import make_trace
from tests.scripted_llm import Reply, ToolCall
from traces.collaboration.humans import HUMAN, human_request_create
from traces.models import Approval, Trace, TraceStatus
from traces.runner import RunConfig
from traces.runner.config import STEP_LIMIT_PREFIX
from traces.waiting import STEP_LIMITED, traces_waiting_for

pytestmark = pytest.mark.django_db


def approval(trace: Trace, tool_name: str, call: str = "call_1") -> Approval:
    return Approval.objects.create(trace=trace, tool_call_id=call, message_sequence=1, tool_name=tool_name)


def test_a_run_gated_on_a_risky_call_waits_for_the_approval_of_that_tool(runner, llm, integrator):
    llm.script("scripted", [Reply(tool_calls=[ToolCall("write", {"path": "out.txt", "content": "x"})])])
    result = runner.run_result(
        [{"role": "user", "content": "write out.txt"}],
        RunConfig(confirm_policy="ask-risky", owner_id=integrator.pk),
    )
    trace = Trace.objects.get(pk=result.trace_id)
    assert trace.status == TraceStatus.WAITING

    assert traces_waiting_for([trace]) == {trace.trace_id: "waiting: approval of write"}


def test_each_tool_is_named_once_in_the_order_asked(integrator):
    trace = make_trace(integrator, status=TraceStatus.WAITING)
    approval(trace, "bash", "c1")
    approval(trace, "write", "c2")
    approval(trace, "bash", "c3")
    assert traces_waiting_for([trace])[trace.trace_id] == "waiting: approval of bash, write"


def test_an_ask_human_question_is_quoted_in_short(integrator):
    parent = make_trace(integrator, status=TraceStatus.WAITING)
    question = "Which window suits the team: **Saturday 02:00-04:00 UTC** or **Sunday 22:00-24:00 UTC**?"
    child = human_request_create(
        parent=parent,
        trace_id=f"{parent.trace_id}@human-001",
        goal_id=None,
        tool_call_id="c1",
        question=question,
        to="expert",
    )
    said = traces_waiting_for([parent, child])
    assert (
        said[parent.trace_id]
        == "waiting: answer to “Which window suits the team: Saturday 02:00-04:00 UTC or…”"
    )
    assert said[child.trace_id] == "waiting: an answer from expert"


def test_a_parent_waits_while_its_sub_agent_waits_for_an_approval(integrator):
    parent = make_trace(integrator, status=TraceStatus.WAITING)
    child = make_trace(
        integrator,
        trace_id=f"{parent.trace_id}@delegate-1",
        name="Clean the build dir",
        parent_trace=parent,
        status=TraceStatus.WAITING,
    )
    approval(child, "bash")
    said = traces_waiting_for([parent])
    assert said == {parent.trace_id: "waiting: sub-agent “Clean the build dir” (approval of bash)"}


def test_the_step_limit_is_a_pause_and_other_endings_say_nothing(integrator):
    paused = make_trace(
        integrator,
        status=TraceStatus.STOPPED,
        error_message=f"{STEP_LIMIT_PREFIX} 3 steps without a final answer",
    )
    stopped = make_trace(integrator, status=TraceStatus.STOPPED)
    done = make_trace(integrator, status=TraceStatus.COMPLETED)
    running = make_trace(integrator, status=TraceStatus.RUNNING)
    assert traces_waiting_for([paused, stopped, done, running]) == {paused.trace_id: STEP_LIMITED}


def test_answered_questions_and_decided_approvals_are_not_waited_for(integrator):
    trace = make_trace(integrator, status=TraceStatus.WAITING)
    Approval.objects.create(
        trace=trace, tool_call_id="c", message_sequence=1, tool_name="bash", status="approved"
    )
    make_trace(integrator, parent_trace=trace, agent_type=HUMAN, status=TraceStatus.COMPLETED)
    assert traces_waiting_for([trace]) == {trace.trace_id: "waiting: an expert"}


def test_no_query_when_nothing_on_the_page_waits(integrator, django_assert_num_queries):
    traces = [make_trace(integrator, status=TraceStatus.COMPLETED) for _ in range(3)]
    with django_assert_num_queries(0):
        assert traces_waiting_for(traces) == {}

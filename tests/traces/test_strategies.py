"""Strategies (R11): the Router's three routes and its fallback, plan-and-execute with a
failed step and the synthesis, a rewind into a plan — through real litellm."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from traces.models import Goal, Trace, TraceEvent
from traces.runner import RunConfig
from traces.selectors import trace_main_path

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def route(name: str, reason: str = "because") -> str:
    return json.dumps({"route": name, "reason": reason})


def plan(*steps: str) -> str:
    return json.dumps({"steps": [{"description": s} for s in steps]})


def events(trace_id: str, kind: str) -> list[dict[str, Any]]:
    return list(TraceEvent.objects.filter(trace_id=trace_id, type=kind).values_list("payload", flat=True))


def test_routed_direct_answers_with_one_call_offered_no_tool(runner, llm):
    llm.script("utility", [route("DIRECT", "a greeting")])
    llm.script("scripted", ["Hello there!"])

    result = runner.run_result(user("hi"), RunConfig(strategy="routed", name="greeting"))

    trace = Trace.objects.get(pk=result.trace_id)
    assert trace.status == "completed" and trace.result_summary == "Hello there!"
    [request] = llm.requests_for("scripted")
    assert "tools" not in request.body
    assert events(trace.trace_id, "route_decided") == [
        {"route": "DIRECT", "reason": "a greeting", "fallback": False}
    ]
    assert trace.run_settings["strategy"] == "routed" and trace.run_settings["reflexion"] is False
    assert trace.context["route"]["route"] == "DIRECT"


def test_routed_simple_tool_runs_the_react_loop(runner, llm, workspace_root):
    llm.script("utility", [route("SIMPLE_TOOL")])
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("write", {"path": "a.txt", "content": "x"})]), Reply(text="written")],
    )

    result = runner.run_result(user("write a.txt"), RunConfig(strategy="routed", name="w"))

    assert result.status == "completed" and result.result == "written"
    requests = llm.requests_for("scripted")
    assert len(requests) == 2 and all(r.get("tools") for r in requests)
    assert (workspace_root / result.trace_id / "a.txt").read_text() == "x"


@pytest.mark.parametrize("answer", ["I think it is complex", json.dumps({"route": "MAYBE"}), ""])
def test_a_garbage_router_answer_falls_back_to_simple_tool(runner, llm, answer):
    llm.script("utility", [answer])
    llm.script("scripted", ["answered by the loop"])

    result = runner.run_result(user("do it"), RunConfig(strategy="routed", name="g"))

    assert result.status == "completed"
    [decided] = events(result.trace_id, "route_decided")
    assert decided["route"] == "SIMPLE_TOOL" and decided["fallback"] is True
    assert "fell back to SIMPLE_TOOL" in decided["reason"]
    assert llm.requests_for("scripted")[0].get("tools")  # the loop, tools offered


def test_a_failed_router_call_falls_back_to_simple_tool(runner, llm):
    llm.script("utility", [Reply(status=400, error="bad request")])
    llm.script("scripted", ["fine"])

    result = runner.run_result(user("do it"), RunConfig(strategy="routed", name="g"))

    [decided] = events(result.trace_id, "route_decided")
    assert decided["route"] == "SIMPLE_TOOL" and "router call failed" in decided["reason"]
    assert result.status == "completed"


def three_step_run(llm: Any) -> None:
    """A plan of three steps whose second fails, then the synthesis."""
    llm.script(
        "scripted",
        [
            plan("write a.txt", "read missing.txt", "write c.txt"),
            Reply(tool_calls=[ToolCall("write", {"path": "a.txt", "content": "A"})]),
            Reply(text="wrote a.txt"),
            Reply(tool_calls=[ToolCall("read", {"path": "missing.txt"})]),
            Reply(text="[STEP FAILED] missing.txt does not exist"),
            Reply(tool_calls=[ToolCall("write", {"path": "c.txt", "content": "C"})]),
            Reply(text="wrote c.txt"),
            Reply(text="Done: a.txt and c.txt written. [STEP 2 FAILED] missing.txt could not be read."),
        ],
    )


def test_routed_plan_required_plans_runs_each_step_and_synthesizes_with_failed_marks(
    runner, llm, workspace_root
):
    llm.script("utility", [route("PLAN_REQUIRED", "three parts")])
    three_step_run(llm)

    result = runner.run_result(
        user("write a, read missing, write c"), RunConfig(strategy="routed", reflexion=False, name="p")
    )

    trace = Trace.objects.get(pk=result.trace_id)
    assert trace.status == "completed" and "[STEP 2 FAILED]" in trace.result_summary
    requests = llm.requests_for("scripted")
    assert "tools" not in requests[0].body  # the plan call
    synthesis = requests[-1]
    assert "tools" not in synthesis.body
    prompt = synthesis.messages[-1]["content"]
    assert (
        "[STEP 2 FAILED] missing.txt does not exist" in prompt
        and "Step 1 (write a.txt): wrote a.txt" in prompt
    )
    goals = {g.description: g for g in Goal.objects.filter(trace=trace)}
    parent = goals["write a, read missing, write c"]
    steps = [goals["write a.txt"], goals["read missing.txt"], goals["write c.txt"]]
    assert [g.parent_id for g in steps] == [parent.goal_id] * 3
    assert [g.status for g in steps] == ["completed", "abandoned", "completed"]
    assert steps[1].summary.startswith("[STEP 2 FAILED]")
    assert all(g.self_stats["message_count"] > 0 for g in steps)
    assert parent.status == "completed"
    assert parent.cumulative_stats["total_tokens"] >= sum(g.self_stats["total_tokens"] for g in steps)
    assert [e["status"] for e in events(trace.trace_id, "plan_step_ended")] == [
        "completed",
        "abandoned",
        "completed",
    ]
    assert (workspace_root / trace.trace_id / "c.txt").read_text() == "C"


def test_each_step_request_is_focused_on_its_goal(runner, llm):
    three_step_run(llm)

    runner.run_result(user("three things"), RunConfig(strategy="plan_execute", reflexion=False, name="p"))

    requests = llm.requests_for("scripted")
    step_two = requests[3]  # plan, step 1 (call, answer), step 2's first call
    guards = [m["content"] for m in step_two.messages if m["role"] == "system"]
    assert any(g.startswith("Plan step 2 of 3: read missing.txt") for g in guards)
    assert step_two.get("tools")


def test_a_malformed_plan_gets_one_retry_then_the_run_falls_back_to_react(runner, llm):
    llm.script("scripted", ["not a plan", json.dumps({"steps": []}), "answered directly"])

    result = runner.run_result(user("do it"), RunConfig(strategy="plan_execute", name="p"))

    assert result.status == "completed" and result.result == "answered directly"
    [failed] = events(result.trace_id, "plan_failed")
    assert failed["fallback"] == "react"
    retry = llm.requests_for("scripted")[1].messages[-1]["content"]
    assert retry.startswith("That plan could not be used")
    assert not Goal.objects.filter(trace_id=result.trace_id, reason__startswith="plan step").exists()


def test_rewind_into_a_plan_restores_its_goals_as_of_the_cut_and_takes_it_up(runner, llm):
    three_step_run(llm)
    first = runner.run_result(
        user("three things"), RunConfig(strategy="plan_execute", reflexion=False, name="p")
    )
    path = trace_main_path(trace_id=first.trace_id)
    step_two_note = next(m for m in path if (m.content or "").startswith("Plan step 2 of 3"))
    llm.script(
        "scripted",
        [
            Reply(text="read it after all"),
            Reply(tool_calls=[ToolCall("write", {"path": "c.txt", "content": "C2"})]),
            Reply(text="wrote c.txt again"),
            Reply(text="All three done."),
        ],
    )

    result = runner.run_result([], RunConfig(trace_id=first.trace_id, after_sequence=step_two_note.sequence))

    assert result.status == "completed" and result.result == "All three done."
    [rewind] = events(first.trace_id, "rewind")
    assert {g["status"] for g in rewind["goal_tree_snapshot"]["goals"]} == {"completed", "abandoned"}
    goals = {g.description: g for g in Goal.objects.filter(trace_id=first.trace_id)}
    assert goals["write a.txt"].status == "completed"  # done before the cut
    assert goals["read missing.txt"].status == "completed"  # reopened by the rewind, done again
    assert goals["read missing.txt"].summary == "read it after all"
    assert goals["write c.txt"].summary == "wrote c.txt again"
    assert Goal.objects.filter(trace_id=first.trace_id).count() == 4  # the same plan, no new one
    assert not events(first.trace_id, "plan_made")[1:]


@pytest.mark.parametrize(
    ("body", "field"),
    [({"strategy": "tree_of_thought"}, "strategy"), ({"reflexion": "yes"}, "reflexion")],
)
def test_a_bad_strategy_setting_is_400_naming_the_field(api_client, integrator, llm, body, field):
    response = api_client(integrator).post("/api/traces", {"task": "x", **body}, format="json")

    assert response.status_code == 400
    assert field in response.json()["error"]
    assert Trace.objects.count() == 0


def test_the_api_takes_a_strategy_and_the_run_keeps_it(api_client, integrator, inline_worker, llm):
    llm.script("utility", [route("DIRECT", "small talk")])
    llm.script("scripted", ["hi!"])

    with inline_worker():
        response = api_client(integrator).post(
            "/api/traces", {"task": "hello", "name": "n", "strategy": "routed"}, format="json"
        )

    assert response.status_code == 201
    trace = Trace.objects.get(pk=response.json()["trace_id"])
    assert trace.status == "completed" and trace.run_settings["strategy"] == "routed"
    assert events(trace.trace_id, "route_decided")[0]["route"] == "DIRECT"


def test_run_agent_takes_a_strategy(llm, workspace_root):
    from django.core.management import call_command

    llm.script("scripted", [plan("say hello"), Reply(text="hello said"), Reply(text="Hello!")])

    call_command("run_agent", "--strategy", "plan_execute", "--no-reflexion", "--name", "cli", "greet")

    trace = Trace.objects.get(name="cli")
    assert trace.result_summary == "Hello!"
    assert (trace.run_settings["strategy"], trace.run_settings["reflexion"]) == ("plan_execute", False)

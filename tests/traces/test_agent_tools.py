"""agent / evaluate details of seed 004 and query_subagent_status (seed 002): context, read-only
explore, the evaluate stop cascade, sub_trace_metadata in the API, status asks rate-limited."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from tests.traces.test_subagents import children_wait_for_locks, last_user_text  # noqa: F401
from traces.models import Message, Trace
from traces.runner import AgentRunner, RunConfig

pytestmark = pytest.mark.django_db

WRITERS = {"write", "edit", "bash"}


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def tool_messages(trace_id: str, name: str) -> list[Message]:
    return list(Message.objects.filter(trace_id=trace_id, role="tool", name=name).order_by("sequence"))


def test_agent_context_reaches_the_child_and_stays_on_its_trace(runner, llm):
    context = {"ticket": "OPS-12", "paths": ["src/a.py"]}
    seen: list[str] = []

    def child(body: dict[str, Any]) -> Reply:
        seen.append(last_user_text(body))
        return Reply(text="fixed")

    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("agent", {"task": "fix it", "context": context})]), child, "done"],
    )

    result = runner.run_result(user("delegate"), RunConfig())

    sub = Trace.objects.get(parent_trace_id=result.trace_id)
    assert sub.context["call_context"] == context and sub.task == "fix it"
    assert seen[0].startswith("fix it") and '"ticket": "OPS-12"' in seen[0]


def test_a_context_that_is_not_an_object_is_a_tool_error(runner, llm):
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("agent", {"task": "x", "context": "just text"})]), "ok"],
    )

    result = runner.run_result(user("delegate"), RunConfig())

    (told,) = tool_messages(result.trace_id, "agent")
    assert told.kind == "tool_error" and "context" in told.content
    assert not Trace.objects.filter(parent_trace_id=result.trace_id).exists()


def test_evaluate_context_reaches_the_reviewer(runner, llm):
    seen: list[str] = []

    def reviewer(body: dict[str, Any]) -> Reply:
        seen.append(last_user_text(body))
        return Reply(text='{"verdict": "pass", "reasoning": "ok", "suggestions": []}')

    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("goal", {"action": "add", "description": "Write the report"})]),
            Reply(
                tool_calls=[ToolCall("evaluate", {"result": "done", "context": {"criteria": "two sections"}})]
            ),
            reviewer,
            "fine",
        ],
    )

    result = runner.run_result(user("report"), RunConfig())

    sub = Trace.objects.get(parent_trace_id=result.trace_id)
    assert sub.context["call_context"] == {"criteria": "two sections"}
    assert '"criteria": "two sections"' in seen[0]


@pytest.mark.django_db(transaction=True)
def test_explore_stays_read_only_whatever_agent_type_asks(llm, workspace_root, children_wait_for_locks):  # noqa: F811
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[ToolCall("agent", {"task": ["look at a", "look at b"], "agent_type": "default"})]
            ),
            "a found",
            "b found",
            "merged",
        ],
    )

    result = AgentRunner().run_result(user("explore"), RunConfig())

    children = list(Trace.objects.filter(parent_trace_id=result.trace_id))
    assert len(children) == 2 and {c.agent_type for c in children} == {"default"}
    for child in children:
        offered = {t["function"]["name"] for t in child.tools}
        assert offered and not offered & WRITERS


@pytest.mark.django_db(transaction=True)
def test_stopping_the_parent_stops_a_running_evaluate(llm, workspace_root, settings, children_wait_for_locks):  # noqa: F811
    settings.AGENT_STOP_POLL_SECONDS = 0.05
    runner = AgentRunner()
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("goal", {"action": "add", "description": "Write the report"})]),
            Reply(tool_calls=[ToolCall("evaluate", {"result": "done"})]),
            Reply(text='{"verdict": "pass", "reasoning": "late", "suggestions": []}', delay=5.0),
        ],
    )
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(runner.run_result(user("evaluate"), RunConfig())))
    thread.start()
    deadline = time.monotonic() + 10
    while len(llm.requests_for("scripted")) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)  # until the reviewer's model call is in flight
    parent = Trace.objects.get(parent_trace__isnull=True, task="evaluate")
    assert runner.stop(parent.trace_id)
    thread.join(timeout=15)

    assert results[0].status == "stopped"
    assert Trace.objects.get(parent_trace_id=parent.trace_id).status == "stopped"  # not "completed" 5 s later


def test_the_api_goal_tree_carries_sub_trace_metadata(runner, llm, api_client, expert):
    llm.script("scripted", [Reply(tool_calls=[ToolCall("agent", {"task": "count"})]), "3", "done"])
    result = runner.run_result(user("delegate"), RunConfig(owner_id=expert.pk))
    sub = Trace.objects.get(parent_trace_id=result.trace_id)

    body = api_client(expert).get(f"/api/traces/{result.trace_id}").json()

    (goal,) = [g for g in body["goal_tree"]["goals"] if g["type"] == "agent_call"]
    meta = goal["sub_trace_metadata"][sub.trace_id]
    assert meta["status"] == "completed" and meta["summary"] == "3" and meta["mode"] == "delegate"


def test_query_subagent_status_reports_children_and_is_rate_limited(runner, llm, settings):
    settings.AGENT_STATUS_QUERY_BUDGET_PER_TURN = 2
    settings.AGENT_STATUS_QUERY_COOLDOWN_SECONDS = 0
    ask = Reply(tool_calls=[ToolCall("query_subagent_status", {})])
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("agent", {"task": "count"})]), "3 files", ask, ask, ask, "done"],
    )

    result = runner.run_result(user("delegate"), RunConfig())

    first, second, third = tool_messages(result.trace_id, "query_subagent_status")
    sub = Trace.objects.get(parent_trace_id=result.trace_id)
    rows = json.loads(first.content.split("\n\n", 1)[1])
    assert rows == [
        {
            "sub_trace_id": sub.trace_id,
            "mode": "delegate",
            "status": "completed",
            "round": 1,
            "messages": sub.total_messages,
            "tokens": sub.total_tokens,
            "cost": sub.total_cost,
            "latest": "3 files",
            "result": "3 files",
            "error": None,
        }
    ]
    assert second.kind == "" and third.kind == "tool_error" and "2 times this turn" in third.content

    llm.script("scripted", [ask, "ok"])
    runner.run_result(user("and now?"), RunConfig(trace_id=result.trace_id))
    assert tool_messages(result.trace_id, "query_subagent_status")[-1].kind == ""  # a new turn, a new budget


def test_query_subagent_status_asks_wait_for_the_cooldown(runner, llm, settings):
    settings.AGENT_STATUS_QUERY_COOLDOWN_SECONDS = 3600
    ask = Reply(tool_calls=[ToolCall("query_subagent_status", {})])
    llm.script("scripted", [ask, ask, "done"])

    result = runner.run_result(user("status?"), RunConfig())

    first, second = tool_messages(result.trace_id, "query_subagent_status")
    assert first.kind == "" and "No sub-agents yet" in first.content
    assert second.kind == "tool_error" and "ask again in" in second.content

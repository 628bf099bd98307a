"""The agent and evaluate tools (S1, S2): sub-traces, goals, collaborators, healing (R6)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from django.db import OperationalError, connection

from tests.scripted_llm import Reply, ToolCall
from tools.builtin.evaluate import parse_judgement
from traces.collaboration import subtraces
from traces.models import Goal, Message, Trace, TraceEvent
from traces.runner import AgentRunner, RunConfig

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def last_user_text(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m["role"] == "user"]
    content = users[-1]["content"] if users else ""
    return content if isinstance(content, str) else json.dumps(content)


def tool_result(trace_id: str, name: str) -> Message:
    return Message.objects.filter(trace_id=trace_id, role="tool", name=name).order_by("sequence").last()


def test_delegate_runs_one_sub_trace_and_turns_the_calling_goal_into_an_agent_call(runner, llm, integrator):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "count the files", "skills": ["planning"]})]),
            Reply(text="There are 3 files."),  # the child
            Reply(text="Done: 3 files."),
        ],
    )
    result = runner.run_result(user("how many files?"), RunConfig(owner_id=integrator.pk))

    assert result.status == "completed" and result.result == "Done: 3 files."
    child = Trace.objects.get(parent_trace_id=result.trace_id)
    assert child.trace_id.startswith(f"{result.trace_id}@delegate-") and child.trace_id.endswith("-001")
    assert child.status == "completed" and child.result_summary == "There are 3 files."
    assert child.owner_id == integrator.pk and child.task == "count the files"
    child_tools = {t["function"]["name"] for t in child.tools}
    assert not child_tools & {"agent", "evaluate", "ask_human"}  # no recursion
    assert "bash" in child_tools  # delegate keeps the full toolset

    output = json.loads(tool_result(result.trace_id, "agent").content.split("\n\n", 1)[1])
    assert output["sub_trace_id"] == child.trace_id and output["summary"] == "There are 3 files."
    assert output["stats"]["message_count"] == child.total_messages

    goal = Goal.objects.get(trace_id=result.trace_id)
    assert goal.type == "agent_call" and goal.agent_call_mode == "delegate"
    assert goal.sub_trace_ids == [child.trace_id] and child.parent_goal_id == goal.goal_id
    assert goal.cumulative_stats["total_tokens"] >= goal.self_stats["total_tokens"] + child.total_tokens
    parent = Trace.objects.get(pk=result.trace_id)
    (collaborator,) = parent.context["collaborators"]
    assert collaborator["type"] == "agent" and collaborator["status"] == "completed"
    assert collaborator["trace_id"] == child.trace_id and "3 files" in collaborator["summary"]
    types = list(TraceEvent.objects.filter(trace_id=result.trace_id).values_list("type", flat=True))
    assert types.index("sub_trace_started") < types.index("sub_trace_completed")


def test_continue_from_resumes_the_same_sub_trace_with_its_history(runner, llm):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "remember the word 'teal'"})]),
            Reply(text="noted"),
            Reply(text="first done"),
        ],
    )
    first = runner.run_result(user("start"), RunConfig())
    child = Trace.objects.get(parent_trace_id=first.trace_id)

    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "which word?", "continue_from": child.trace_id})]),
            lambda body: Reply(
                text="teal" if "remember the word 'teal'" in json.dumps(body["messages"]) else "?"
            ),
            Reply(text="it said teal"),
        ],
    )
    second = runner.run_result(user("ask it"), RunConfig(trace_id=first.trace_id))

    assert second.status == "completed"
    assert Trace.objects.filter(parent_trace_id=first.trace_id).count() == 1
    child.refresh_from_db()
    assert child.result_summary == "teal" and child.status == "completed"
    assert "teal" in tool_result(first.trace_id, "agent").content
    goal = Goal.objects.get(trace_id=first.trace_id)
    assert goal.sub_trace_ids == [child.trace_id]


def test_continue_from_an_unknown_sub_trace_is_a_tool_error(runner, llm):
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("agent", {"task": "x", "continue_from": "nope"})]), Reply(text="ok")],
    )
    result = runner.run_result(user("go"), RunConfig())
    message = tool_result(result.trace_id, "agent")
    assert message.kind == "tool_error" and "no sub-trace 'nope'" in message.content


def retry_when_locked(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    """The test database is SQLite in memory with a shared cache, where a second writer
    gets "table is locked" at once instead of waiting (a file database, as deployed,
    waits: busy_timeout). Child threads wait here the way they would there."""
    for _ in range(2000):
        try:
            return execute(sql, params, many, context)
        except OperationalError as exc:
            if "locked" not in str(exc):
                raise
            time.sleep(0.002)
    return execute(sql, params, many, context)


@pytest.fixture
def children_wait_for_locks(monkeypatch: Any) -> None:
    original = subtraces.run_child

    def run_child(*args: Any, **kwargs: Any) -> Any:
        with connection.execute_wrapper(retry_when_locked):
            return original(*args, **kwargs)

    monkeypatch.setattr(subtraces, "run_child", run_child)


@pytest.mark.django_db(transaction=True)
def test_explore_runs_three_read_only_children_concurrently(llm, workspace_root, children_wait_for_locks):
    runner = AgentRunner()
    runner.run_result(user("warm up litellm"), RunConfig())  # import and first-call costs paid here
    llm.reset()

    def child_or_parent(body: dict[str, Any]) -> Reply:
        text = last_user_text(body)
        if text.startswith("look at "):
            return Reply(text=f"finding about {text[8:]}", delay=1.0)
        return Reply(text="unexpected")

    tasks = ["look at alpha", "look at beta", "look at gamma"]
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": tasks})]),
            *[child_or_parent] * 3,
            Reply(text="merged"),
        ],
    )
    started = time.perf_counter()
    result = runner.run_result(user("explore"), RunConfig())
    elapsed = time.perf_counter() - started

    assert result.status == "completed"
    assert elapsed < 2.0, f"three 1 s children took {elapsed:.2f} s: not concurrent"
    children = list(Trace.objects.filter(parent_trace_id=result.trace_id).order_by("trace_id"))
    assert [c.trace_id.split("@")[1][:11] for c in children] == ["explore-001", "explore-002", "explore-003"]
    assert all(c.status == "completed" and c.agent_type == "explore" for c in children)
    for child in children:
        offered = {t["function"]["name"] for t in child.tools}
        assert not offered & {"write", "edit", "bash", "agent", "evaluate"}
    merged = tool_result(result.trace_id, "agent").content
    assert all(f"finding about {name}" in merged for name in ("alpha", "beta", "gamma"))
    goal = Goal.objects.get(trace_id=result.trace_id)
    assert goal.agent_call_mode == "explore" and sorted(goal.sub_trace_ids) == [c.trace_id for c in children]
    parent = Trace.objects.get(pk=result.trace_id)
    assert len(parent.context["collaborators"]) == 3
    assert {c["status"] for c in parent.context["collaborators"]} == {"completed"}


def test_evaluate_judges_the_current_goal_with_a_read_only_child(runner, llm):
    def reviewer(body: dict[str, Any]) -> Reply:
        text = last_user_text(body)
        assert "Goal: Write the report" in text and "report.md has 2 sections" in text
        return Reply(
            text='Here is my judgement:\n```json\n{"verdict": "partial", "reasoning": "one section is missing", '
            '"suggestions": ["add a conclusion"]}\n```'
        )

    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("goal", {"action": "add", "description": "Write the report"})]),
            Reply(tool_calls=[ToolCall("evaluate", {"result": "report.md has 2 sections"})]),
            reviewer,
            Reply(text="will fix"),
        ],
    )
    result = runner.run_result(user("report"), RunConfig())

    output = json.loads(tool_result(result.trace_id, "evaluate").content.split("\n\n", 1)[1])
    assert output["verdict"] == "partial" and output["suggestions"] == ["add a conclusion"]
    child = Trace.objects.get(pk=output["sub_trace_id"])
    assert "@evaluate-" in child.trace_id and child.agent_type == "explore"
    assert not {t["function"]["name"] for t in child.tools} & {"write", "bash", "evaluate", "agent"}
    goal = Goal.objects.get(trace_id=result.trace_id)
    assert goal.type == "agent_call" and goal.agent_call_mode == "evaluate"


@pytest.mark.parametrize(
    ("text", "verdict", "suggestions"),
    [
        ('{"verdict": "PASS", "suggestions": "none needed"}', "pass", ["none needed"]),
        ('I think {"verdict": "fail", "reasoning": "x"} overall', "fail", []),
        ("Verdict: partial.\n- add tests\n- rename x", "partial", ["add tests", "rename x"]),
        ("no idea", "unknown", []),
    ],
)
def test_judgements_are_parsed_leniently(text, verdict, suggestions):
    judgement = parse_judgement(text)
    assert judgement["verdict"] == verdict and judgement["suggestions"] == suggestions


def test_an_interrupted_agent_call_heals_with_its_sub_trace_id_and_can_be_continued(runner, llm):
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("agent", {"task": "long job"})]), Reply(text="child part one"), "ok"],
    )
    first = runner.run_result(user("start"), RunConfig())
    child = Trace.objects.get(parent_trace_id=first.trace_id)
    # The worker died inside the agent call: its result was never saved.
    tool = tool_result(first.trace_id, "agent")
    Message.objects.filter(trace_id=first.trace_id, sequence__gte=tool.sequence).delete()
    Trace.objects.filter(pk=first.trace_id).update(status="failed", head_sequence=tool.sequence - 1)

    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "finish it", "continue_from": child.trace_id})]),
            Reply(text="child finished"),
            Reply(text="all done"),
        ],
    )
    second = runner.run_result(user("go on"), RunConfig(trace_id=first.trace_id))

    healed = Message.objects.get(trace_id=first.trace_id, kind="healed")
    body = json.loads(healed.content)
    assert body["status"] == "interrupted" and body["sub_trace_id"] == child.trace_id
    assert child.trace_id in body["continue_from"] and body["stats"]["messages"] == child.total_messages
    assert second.status == "completed"
    child.refresh_from_db()
    assert child.result_summary == "child finished"


@pytest.mark.django_db(transaction=True)
def test_stopping_the_parent_stops_a_running_delegate(llm, workspace_root, settings, children_wait_for_locks):
    settings.AGENT_STOP_POLL_SECONDS = 0.05
    runner = AgentRunner()
    runner.run_result(user("warm up litellm"), RunConfig())
    llm.reset()
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("agent", {"task": "slow job"})]), Reply(text="too late", delay=5.0)],
    )
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(runner.run_result(user("delegate"), RunConfig())))
    started = time.perf_counter()
    thread.start()
    deadline = time.monotonic() + 10
    while len(llm.requests_for("scripted")) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)  # until the child's model call is in flight
    parent = Trace.objects.get(parent_trace__isnull=True, task="delegate")
    assert runner.stop(parent.trace_id)
    thread.join(timeout=10)

    assert time.perf_counter() - started < 4.0
    assert results[0].status == "stopped"
    child = Trace.objects.get(parent_trace_id=parent.trace_id)
    assert child.status == "stopped"


@pytest.mark.django_db(transaction=True)
def test_explore_gives_each_child_its_own_messages_when_given_one_list_per_task(
    llm, workspace_root, children_wait_for_locks
):
    def echo_context(body: dict[str, Any]) -> Reply:
        texts = [m["content"] for m in body["messages"] if m["role"] == "user"]
        return Reply(text=f"{texts[-1]} saw {texts[0]}")

    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall(
                        "agent",
                        {
                            "task": ["task one", "task two"],
                            "messages": [
                                [{"role": "user", "content": "context one"}],
                                [{"role": "user", "content": "context two"}],
                            ],
                        },
                    )
                ]
            ),
            echo_context,
            echo_context,
            Reply(text="merged"),
        ],
    )
    result = AgentRunner().run_result(user("explore"), RunConfig())

    children = {c.task: c.result_summary for c in Trace.objects.filter(parent_trace_id=result.trace_id)}
    assert children == {"task one": "task one saw context one", "task two": "task two saw context two"}


def test_per_task_messages_must_match_the_tasks(runner, llm):
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall("agent", {"task": ["a", "b"], "messages": [[{"role": "user", "content": "x"}]]})
                ]
            ),
            Reply(text="ok"),
        ],
    )
    result = runner.run_result(user("go"), RunConfig())
    assert (
        "one list of messages per task: got 1 lists for 2 tasks"
        in tool_result(result.trace_id, "agent").content
    )
    assert not Trace.objects.filter(parent_trace_id=result.trace_id).exists()


def test_a_sub_agent_at_its_step_limit_pauses_and_the_parent_is_told(runner, llm, monkeypatch):
    from memory.presets import AGENT_PRESETS, Preset

    monkeypatch.setitem(AGENT_PRESETS, "brief", Preset(allowed_tools=["list_files"], max_iterations=1))
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "count the files", "agent_type": "brief"})]),
            Reply(tool_calls=[ToolCall("list_files", {})]),  # the child's one step: no answer yet
            Reply(text="the child paused"),
        ],
    )

    result = runner.run_result(user("delegate"), RunConfig(name="n"))

    assert result.status == "completed"
    child = Trace.objects.get(parent_trace_id=result.trace_id)
    assert child.status == "stopped" and child.error_message.startswith("step limit: 1 steps")
    told = tool_result(result.trace_id, "agent")
    title, _, body = told.content.partition("\n")
    assert title.startswith("Sub-agent paused (step limit)")
    data = json.loads(body)
    assert data["paused"] == "step_limit" and "continue_from" in data["note"]
    paused = TraceEvent.objects.get(trace_id=result.trace_id, type="subagent_paused")
    assert paused.payload["sub_trace_id"] == child.trace_id and paused.payload["reason"] == "step_limit"
    parent = Trace.objects.get(pk=result.trace_id)
    assert parent.context["collaborators"][0]["status"] == "paused"

"""Parallel tool calls (seed 002 AgentExecutor): read-only calls of one reply at once, results in order."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from tools.registry import ToolRegistry, build_tool
from traces.models import Message, TraceEvent
from traces.runner import AgentRunner, RunConfig
from traces.runner.tool_api import ToolContext

WAIT = 10.0  # how long a tool waits for its partners before it gives up (a failure, never reached when green)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def registry_of(*tools: Any) -> ToolRegistry:
    registry = ToolRegistry()
    for tool in tools:
        registry.register(tool)
    return registry


def results(trace_id: str) -> list[Message]:
    return list(Message.objects.filter(trace_id=trace_id, role="tool").order_by("sequence"))


def meeting(parties: int, timeout: float = WAIT) -> Any:
    """A read-only tool that returns only once `parties` calls are inside it at the same time."""
    barrier = threading.Barrier(parties, timeout=timeout)
    order: list[str] = []

    def meet(label: str) -> str:
        """Waits for the other calls, then answers with its label."""
        barrier.wait()
        order.append(label)
        return f"met {label}"

    return build_tool(meet), order


@pytest.mark.django_db
def test_read_only_calls_of_one_reply_run_at_once_and_answer_in_call_order(llm, workspace_root):
    meet, _ = meeting(3)
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("meet", {"label": x}, id=f"call_{x}") for x in "abc"]),
            Reply(text="done"),
        ],
    )

    result = AgentRunner(tool_registry=registry_of(meet)).run_result(user("go"), RunConfig())

    assert result.status == "completed"
    messages = results(result.trace_id)
    assert [m.tool_call_id for m in messages] == ["call_a", "call_b", "call_c"]
    assert [m.content for m in messages] == ["met a", "met b", "met c"]  # none broke the barrier
    batch = TraceEvent.objects.get(trace_id=result.trace_id, type="tool_batch")
    assert batch.payload == {"tool_call_ids": ["call_a", "call_b", "call_c"], "size": 3}
    sent = llm.requests_for("scripted")[1].messages
    assert [m.get("tool_call_id") for m in sent if m["role"] == "tool"] == ["call_a", "call_b", "call_c"]


@pytest.mark.django_db
def test_the_batch_is_bounded_by_agent_parallel_tools(llm, workspace_root, settings):
    settings.AGENT_PARALLEL_TOOLS = 2
    meet, _ = meeting(3, timeout=1.0)  # three never meet when at most two run
    llm.script("scripted", [Reply(tool_calls=[ToolCall("meet", {"label": x}) for x in "abc"]), "done"])

    result = AgentRunner(tool_registry=registry_of(meet)).run_result(user("go"), RunConfig())

    assert all(m.kind == "tool_error" for m in results(result.trace_id))


@pytest.mark.django_db
def test_one_at_a_time_when_parallel_tools_is_one(llm, workspace_root, settings):
    settings.AGENT_PARALLEL_TOOLS = 1
    meet, _ = meeting(2, timeout=1.0)
    llm.script("scripted", [Reply(tool_calls=[ToolCall("meet", {"label": x}) for x in "ab"]), "done"])

    result = AgentRunner(tool_registry=registry_of(meet)).run_result(user("go"), RunConfig())

    assert [m.kind for m in results(result.trace_id)] == ["tool_error", "tool_error"]
    assert not TraceEvent.objects.filter(trace_id=result.trace_id, type="tool_batch").exists()


@pytest.mark.django_db
def test_a_risky_call_runs_alone_between_the_batches_around_it(llm, workspace_root):
    pair = threading.Barrier(2, timeout=WAIT)  # looks meet in pairs: a batch of other sizes breaks it
    log: list[str] = []

    def look(label: str) -> str:
        """Reads something."""
        pair.wait()
        log.append(f"look {label}")
        return label

    def change(label: str) -> str:
        """Changes something."""
        log.append(f"change {label}")
        return label

    registry = registry_of(build_tool(look), build_tool(change, risk="risky", read_only=False))
    calls = [
        ToolCall("look", {"label": "1"}),
        ToolCall("look", {"label": "2"}),
        ToolCall("change", {"label": "x"}),
    ]
    calls += [ToolCall("look", {"label": "3"}), ToolCall("look", {"label": "4"})]
    llm.script("scripted", [Reply(tool_calls=calls), "done"])

    result = AgentRunner(tool_registry=registry).run_result(user("go"), RunConfig())

    assert [m.content for m in results(result.trace_id)] == ["1", "2", "x", "3", "4"]
    assert log.index("change x") == 2 and set(log[:2]) == {"look 1", "look 2"}
    assert TraceEvent.objects.filter(trace_id=result.trace_id, type="tool_batch").count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_stop_during_a_batch_ends_the_step_and_the_open_calls_heal(llm, workspace_root):
    release = threading.Event()

    def slow() -> str:
        """Reads slowly."""
        release.wait(WAIT)
        return "slow result"

    def stopper(ctx: ToolContext) -> str:
        """Asks the run to stop, as an expert would."""
        ctx.runner.stop(ctx.trace_id)
        return "asked"

    runner = AgentRunner(tool_registry=registry_of(build_tool(slow), build_tool(stopper)))
    llm.script("scripted", [Reply(tool_calls=[ToolCall("slow", {}), ToolCall("stopper", {})]), "never"])
    try:
        result = runner.run_result(user("go"), RunConfig())

        assert result.status == "stopped"
        assert not release.is_set() and results(result.trace_id) == []  # the slow call was not waited for
        assert len(llm.requests_for("scripted")) == 1
    finally:
        release.set()

"""Events written ahead of a model call leave when they happen, not with its reply (issue 19)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.scripted_llm import Reply
from traces import events as event_bus
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db(transaction=True)  # events are published on commit


def test_round_start_reaches_listeners_while_the_model_is_still_thinking(runner, llm, integrator, settings):
    settings.AGENT_STOP_POLL_SECONDS = 30  # no poll commits it meanwhile: only the early commit can
    published = threading.Event()

    def listener(trace_id: str, events: list[dict[str, Any]]) -> None:
        if any(e["type"] == "round_start" for e in events):
            published.set()

    seen: list[bool] = []

    def answer(body: dict[str, Any]) -> Reply:
        seen.append(published.wait(timeout=10))  # the model answers once it was published, or gives up
        return Reply(text="done")

    llm.script("scripted", [answer])
    unsubscribe = event_bus.subscribe(listener)
    try:
        result = runner.run_result([{"role": "user", "content": "hi"}], RunConfig(owner_id=integrator.pk))
    finally:
        unsubscribe()
    assert result.status == "completed"
    assert seen == [True]


def test_a_slow_model_s_round_start_leaves_before_the_request_is_built(runner, llm, integrator, settings):
    # With many runs sharing the CPU, building a request takes a while (issue 18): the
    # round's start is committed before it, not 5 ms after the request was sent. The
    # request's last step here (a `before_model` extension) waits until its round's
    # round_start was published; the first round has no model timing yet.
    from tests.scripted_llm import ToolCall
    from traces.runner.extensions import extensions

    settings.AGENT_STOP_POLL_SECONDS = 30
    published: list[int] = []
    changed = threading.Condition()
    seen: list[bool] = []

    def listener(trace_id: str, events: list[dict[str, Any]]) -> None:
        with changed:
            published.extend(e["payload"]["iteration"] for e in events if e["type"] == "round_start")
            changed.notify_all()

    def building(trace: Any, messages: list[dict[str, Any]], emit: Any) -> None:
        iteration = len(seen)
        with changed:
            seen.append(changed.wait_for(lambda: iteration in published, timeout=3))

    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("list_files", {})], delay=0.1), Reply(text="done", delay=0.1)],
    )
    unsubscribe = event_bus.subscribe(listener)
    extensions.before_model.append(building)
    try:
        result = runner.run_result([{"role": "user", "content": "hi"}], RunConfig(owner_id=integrator.pk))
    finally:
        extensions.before_model.remove(building)
        unsubscribe()
    assert result.status == "completed"
    assert seen == [True, True]


def _published_types() -> tuple[Any, Any, Any]:
    """A listener recording each published event type, and a wait for one of them."""
    published: list[str] = []
    changed = threading.Condition()

    def listener(trace_id: str, events: list[dict[str, Any]]) -> None:
        with changed:
            published.extend(e["type"] for e in events)
            changed.notify_all()

    def wait_for(kind: str, count: int = 1) -> bool:
        with changed:
            return changed.wait_for(lambda: published.count(kind) >= count, timeout=10)

    return listener, wait_for, published


def _run_with(tool: Any, calls: list[Any], listener: Any, integrator: Any, llm: Any) -> Any:
    """A run whose model makes `calls` of `tool` (the only tool), then answers; `listener`
    hears every publish meanwhile."""
    from tools.registry import ToolRegistry
    from traces.runner import AgentRunner

    registry = ToolRegistry()
    registry.register(tool)
    llm.script("scripted", [Reply(tool_calls=calls), Reply(text="done")])
    unsubscribe = event_bus.subscribe(listener)
    try:
        return AgentRunner(tool_registry=registry).run_result(
            [{"role": "user", "content": "hi"}], RunConfig(owner_id=integrator.pk)
        )
    finally:
        unsubscribe()


def test_a_long_tool_s_call_reaches_listeners_while_the_tool_runs(llm, integrator, workspace_root, settings):
    from tests.scripted_llm import ToolCall
    from tools.registry import build_tool

    settings.AGENT_STOP_POLL_SECONDS = 30  # no poll commits it meanwhile: only the early commit can
    listener, wait_for, published = _published_types()
    seen: list[bool] = []

    def build() -> str:
        """Runs until its call was published (a long command, as an expert watches it)."""
        seen.append(wait_for("tool_call"))
        return "built"

    result = _run_with(build_tool(build, read_only=False), [ToolCall("build", {})], listener, integrator, llm)
    assert result.status == "completed"
    assert seen == [True]
    assert published.index("tool_call") < published.index("tool_result")


def test_a_long_batch_s_calls_reach_listeners_while_the_tools_run(llm, integrator, workspace_root, settings):
    from tests.scripted_llm import ToolCall
    from tools.registry import build_tool

    settings.AGENT_STOP_POLL_SECONDS = 30
    listener, wait_for, _ = _published_types()
    seen: list[bool] = []

    def read_slowly(label: str) -> str:
        """Reads until both calls of the batch were published."""
        seen.append(wait_for("tool_call", 2))
        return label

    calls = [ToolCall("read_slowly", {"label": x}, id=f"call_{x}") for x in "ab"]
    # read-only: the two calls share a batch
    result = _run_with(build_tool(read_slowly), calls, listener, integrator, llm)
    assert result.status == "completed"
    assert seen == [True, True]


def test_a_side_effecting_call_leaves_with_its_reply_before_the_tool_starts(llm, integrator, workspace_root):
    # One commit carries the reply and its `tool_call` event, before the tool runs: the
    # call is not held back until its result (a busy worker's tool takes a while to
    # start and end), and the reply costs no commit of its own.
    from tests.scripted_llm import ToolCall
    from tools.registry import build_tool

    batches: list[list[str]] = []

    def listener(trace_id: str, events: list[dict[str, Any]]) -> None:
        batches.append([e["type"] for e in events])

    at_start: list[list[list[str]]] = []

    def touch() -> str:
        """Changes something outside the run (not read-only)."""
        at_start.append([list(batch) for batch in batches])
        return "touched"

    result = _run_with(build_tool(touch, read_only=False), [ToolCall("touch", {})], listener, integrator, llm)
    assert result.status == "completed"
    [seen] = at_start
    assert seen[-1][-2:] == ["message", "tool_call"]  # the reply, then its call, in one commit
    assert not any("tool_result" in batch for batch in seen)
    after = batches[len(seen)]
    assert after[0] == "tool_result"  # the result's commit carries no second tool_call
    assert sum(batch.count("tool_call") for batch in batches) == 1

"""A process's runs take turns at their work, first ready first (traces/runner/turns.py,
issue 18): the queue's order, a turn that passes on when overdue, and a real run that
holds its turn while it works and lets it go while it waits on its model or a tool."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from tests.traces.test_runner_rules import registry_with
from traces.models import Message, TraceStatus
from traces.runner import AgentRunner, RunConfig
from traces.runner.tool_api import ToolContext
from traces.runner.turns import Turn, Turns, Unturned, held_here, process_turns


def taken_in_order(turns: Turns, readies: list[float]) -> list[float]:
    """Queue one taker per `ready` behind a held turn, then let them go: the order they got it."""
    first = turns.take(0.0)
    order: list[float] = []
    threads = []
    for ready in readies:
        thread = threading.Thread(target=lambda r=ready: (turns.give(turns.take(r)), order.append(r)))
        thread.start()
        threads.append(thread)
        deadline = time.monotonic() + 5
        while turns.waiting < len(threads):  # queued in this order before the next starts
            assert time.monotonic() < deadline
            time.sleep(0.001)
    turns.give(first)
    for thread in threads:
        thread.join(5)
    return order


def test_runs_get_the_turn_in_the_order_they_became_ready_not_the_order_they_asked(settings):
    settings.AGENT_TURN_SECONDS = 30
    assert taken_in_order(Turns(), [3.0, 1.0, 2.0, 0.5]) == [0.5, 1.0, 2.0, 3.0]


def test_a_turn_held_past_its_time_passes_on_and_its_late_give_changes_nothing(settings):
    settings.AGENT_TURN_SECONDS = 0.05
    turns = Turns()
    stuck = turns.take(0.0)  # a run that waits on something unmarked and never gives
    started = time.monotonic()
    second = turns.take(1.0)
    assert time.monotonic() - started >= 0.05
    turns.give(stuck)  # not the holder any more: the second run keeps it
    assert turns.held
    turns.give(second)
    assert not turns.held and turns.waiting == 0


def test_a_wait_gives_the_turn_to_the_next_run_and_a_tool_keeps_its_place(settings):
    settings.AGENT_TURN_SECONDS = 30
    turns = process_turns()
    early, late = Turn(), Turn()  # early became ready first
    early.take()
    assert held_here() is early and turns.held
    got: list[str] = []
    other = threading.Thread(target=lambda: (late.take(), got.append("late"), time.sleep(0.05), late.give()))
    other.start()
    with early.waiting(again=False):  # a tool: the late run works meanwhile
        assert held_here() is None
        deadline = time.monotonic() + 5
        while not got:
            assert time.monotonic() < deadline, "the other run did not get the turn while this one waited"
            time.sleep(0.001)
    assert held_here() is early  # back, once the late run gave it
    other.join(5)
    early.give()
    assert held_here() is None and not turns.held


def test_a_run_that_must_wait_for_the_turn_first_lets_go_of_what_the_holder_needs(settings):
    # (a run waiting for its turn gives its pooled connection back: held by 64 waiting
    # runs, a pool of 6 left the holder nothing, and every turn passed on only when overdue)
    settings.AGENT_TURN_SECONDS = 30
    turns = Turns()
    calls: list[str] = []
    first = turns.take(0.0, lambda: calls.append("first"))  # free: nothing to let go of
    waiter = threading.Thread(target=lambda: turns.give(turns.take(1.0, lambda: calls.append("second"))))
    waiter.start()
    deadline = time.monotonic() + 5
    while not calls:
        assert time.monotonic() < deadline, "the waiting run did not let go before it waited"
        time.sleep(0.001)
    assert calls == ["second"] and turns.waiting == 1  # let go while still waiting
    turns.give(first)
    waiter.join(5)
    assert not turns.held


def test_turns_off_hold_nothing(settings):
    settings.AGENT_TURN_SECONDS = 0
    turn = Turn()
    turn.take()
    assert not turn.held and held_here() is None


def test_a_model_client_called_in_a_runs_thread_waits_without_its_turn(settings):
    settings.AGENT_TURN_SECONDS = 30
    seen: list[bool] = []
    client = Unturned(lambda *args, **kwargs: seen.append(process_turns().held) or "reply")
    turn = Turn()
    turn.take()
    try:
        assert client([]) == "reply"
        assert held_here() is turn  # taken again after the call
    finally:
        turn.give()
    assert seen == [False]
    assert Unturned(client).call is client.call  # wrapping twice wraps once


@pytest.mark.django_db(transaction=True)
def test_a_run_holds_its_turn_while_it_works_and_not_while_it_waits(llm, workspace_root, settings):
    # A turn that never passes on in this test: a wait that kept it would hold up the other run.
    settings.AGENT_TURN_SECONDS = 60
    turns = process_turns()
    other_done = threading.Event()
    seen: dict[str, Any] = {}

    def probe(ctx: ToolContext) -> str:
        """Waits, as a slow tool does, until another run of this process has finished."""
        seen["in the tool"] = held_here()
        runner = AgentRunner()
        threading.Thread(
            target=lambda: (runner.run_result([{"role": "user", "content": "other"}]), other_done.set())
        ).start()
        return "the other run finished" if other_done.wait(20) else "the other run was held up"

    def first_call(body: dict[str, Any]) -> Reply:
        deadline = time.monotonic() + 10
        while turns.held and time.monotonic() < deadline:  # the run lets go as it starts to wait
            time.sleep(0.005)
        seen["held while the model thinks"] = turns.held
        return Reply(tool_calls=[ToolCall("probe", {})])

    def at_round(figures: dict[str, Any]) -> None:
        seen.setdefault("at a round's start", held_here())

    llm.script("scripted", [first_call, "the other's answer", "done"])
    runner = AgentRunner(tool_registry=registry_with(probe))
    result = runner.run_result([{"role": "user", "content": "go"}], RunConfig(on_progress=at_round))

    assert result.status == TraceStatus.COMPLETED
    assert seen["at a round's start"] is not None  # working: the run's own turn
    assert seen["held while the model thinks"] is False
    assert seen["in the tool"] is None
    tool_result = Message.objects.get(trace_id=result.trace_id, role="tool")
    assert tool_result.content == "the other run finished"
    assert not turns.held and turns.waiting == 0  # both runs gave it back at their end

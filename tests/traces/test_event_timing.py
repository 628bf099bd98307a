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

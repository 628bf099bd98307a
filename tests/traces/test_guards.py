"""Runtime guards (G1-G3, G6) through the runner and real litellm; hooks (G4): test_hooks.py."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall
from traces.guards.loop_detection import LoopDetector
from traces.models import Message, Trace, TraceEvent
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_loop_detector_levels_for_each_pattern():
    repeat = LoopDetector(warning=3, critical=5)
    levels = [repeat.observe("read", {"path": "a"}, f"result {i}") for i in range(5)]
    assert [(v.kind, v.level) if v else None for v in levels] == [
        None,
        None,
        ("generic_repeat", "warning"),
        None,  # warned once per pattern
        ("generic_repeat", "critical"),
    ]

    stuck = LoopDetector(warning=3, critical=6)
    verdicts = [stuck.observe("grep", '{"pattern": "x"}', "same") for _ in range(6)]
    assert (verdicts[2].kind, verdicts[2].level) == ("no_progress", "warning")
    assert (verdicts[5].kind, verdicts[5].level) == ("no_progress", "critical")

    pong = LoopDetector(warning=4, critical=8, window=30)
    seen = [pong.observe("read" if i % 2 else "list_files", {}, str(i)) for i in range(8)]
    assert [(v.kind, v.level) if v else None for v in seen] == [None] * 3 + [("ping_pong", "warning")] + [
        None
    ] * 3 + [("ping_pong", "critical")]

    fresh = LoopDetector(warning=3, critical=5)
    assert all(fresh.observe("read", {"path": str(i)}, "x") is None for i in range(10))


def test_a_looping_run_is_warned_then_failed_and_flagged_for_an_expert(runner, llm, settings):
    settings.AGENT_LOOP_WARNING = 3
    settings.AGENT_LOOP_CRITICAL = 5
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {"path": "."})])] * 10)

    result = runner.run_result(user("look"), RunConfig(max_iterations=20))

    trace = Trace.objects.get(pk=result.trace_id)
    assert trace.status == "failed" and trace.needs_attention
    assert "loop detected" in trace.attention_reason and trace.error_message == trace.attention_reason
    warnings = Message.objects.filter(trace=trace, kind="loop_warning")
    assert warnings.count() == 1 and warnings.get().role == "system"
    levels = [e.payload["level"] for e in TraceEvent.objects.filter(trace=trace, type="loop_detected")]
    assert levels == ["warning", "critical"]
    assert Message.objects.filter(trace=trace, role="tool").count() == 5


def test_inline_tool_calls_in_plain_text_become_real_calls(runner, llm):
    llm.script(
        "scripted",
        [
            Reply(
                text='Let me look.\n<tool_call>{"name": "list_files", "arguments": {"path": "."}}</tool_call>'
            ),
            Reply(text='{"name": "glob", "arguments": {"pattern": "*.md"}}'),
            Reply(text='{"name": "not_a_tool", "arguments": {}}'),
        ],
    )
    result = runner.run_result(user("look"), RunConfig())

    assistants = list(Message.objects.filter(trace_id=result.trace_id, role="assistant").order_by("sequence"))
    assert [c["function"]["name"] for c in assistants[0].tool_calls] == ["list_files"]
    assert assistants[0].content == "Let me look."
    assert [c["function"]["name"] for c in assistants[1].tool_calls] == ["glob"]
    assert assistants[2].tool_calls is None  # an unknown name stays text: the final answer
    assert result.status == "completed"


def test_streamed_tokens_are_persisted_as_token_events(runner, llm):
    llm.script("scripted", [Reply(text="one two three four", chunks=["one ", "two ", "three ", "four"])])
    result = runner.run_result(user("count"), RunConfig(stream=True))
    tokens = TraceEvent.objects.filter(trace_id=result.trace_id, type="token").order_by("event_id")
    assert "".join(e.payload["text"] for e in tokens) == "one two three four"
    final = TraceEvent.objects.get(trace_id=result.trace_id, type="final")
    assert all(e.event_id < final.event_id for e in tokens)


def test_hard_timeout_abandons_the_call_and_fails_the_trace_clearly(runner, llm, settings):
    settings.AGENT_TIMEOUT_HARD = 1.0
    llm.script("scripted", [Reply(text="too late", delay=4)])
    started = time.monotonic()
    result = runner.run_result(user("slow"), RunConfig(stream=False))
    assert time.monotonic() - started < 3.5
    assert result.status == "failed" and "hard timeout (1 s)" in result.error
    assert TraceEvent.objects.filter(trace_id=result.trace_id, type="error").exists()


def test_a_silent_stream_hits_the_heartbeat_timeout(runner, llm, settings):
    settings.AGENT_TIMEOUT_HEARTBEAT = 1.0
    llm.script("scripted", [Reply(text="a b c d e f", chunk_delay=2.5)])
    result = runner.run_result(user("stall"), RunConfig(stream=True))
    assert result.status == "failed" and "heartbeat timeout" in result.error


def test_a_slow_first_token_emits_waiting_pulses(runner, llm, settings):
    settings.AGENT_TIMEOUT_FIRST_FEEDBACK = 0.3
    llm.script("scripted", [Reply(text="finally", delay=1.2)])
    result = runner.run_result(user("wait"), RunConfig(stream=True))
    assert result.status == "completed"
    tokens = list(TraceEvent.objects.filter(trace_id=result.trace_id, type="token").order_by("event_id"))
    pulses = [e for e in tokens if e.payload.get("pulse")]
    assert 1 <= len(pulses) <= 4 and pulses[0].payload["seconds"] >= 0.3
    assert all(e.payload["text"] == "" for e in pulses)
    assert "".join(e.payload["text"] for e in tokens) == "finally"

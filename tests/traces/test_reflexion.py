"""Reflexion (R11): a self-critique after a failed tool call, the lesson in later requests and
saved as a draft experience, and a step that gives up after three lessons — through real litellm."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory.models import Experience
from tests.scripted_llm import Reply, ToolCall
from traces.models import Goal, Message, Trace, TraceEvent
from traces.runner import RunConfig
from traces.selectors import trace_main_path

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def critique(lesson: str) -> str:
    return json.dumps(
        {"what_went_wrong": "the file does not exist", "lesson": lesson, "retry_plan": "list the files first"}
    )


def failing_read() -> Reply:
    return Reply(tool_calls=[ToolCall("read", {"path": "missing.txt"})])


def test_a_failed_call_gets_a_critique_and_a_retry_that_reads_the_lesson(runner, llm, workspace_root):
    llm.script(
        "scripted",
        [
            failing_read(),
            critique("Check that a file exists before reading it."),
            Reply(tool_calls=[ToolCall("write", {"path": "missing.txt", "content": "now here"})]),
            Reply(text="created it instead"),
        ],
    )

    result = runner.run_result(user("read missing.txt"), RunConfig(reflexion=True, name="r"))

    assert result.status == "completed" and result.result == "created it instead"
    requests = llm.requests_for("scripted")
    critique_request = requests[1]
    assert "tools" not in critique_request.body
    assert critique_request.messages[-1]["content"].startswith("A tool call just failed")
    retry = requests[2]
    assert retry.get("tools")
    notes = [m["content"] for m in retry.messages if m["role"] == "system"]
    assert any("Lesson: Check that a file exists before reading it." in n for n in notes)
    # the critique exchange is a side branch: stored, off the main path
    trace = Trace.objects.get(pk=result.trace_id)
    side = Message.objects.filter(trace=trace, kind="reflect").order_by("sequence")
    assert [m.role for m in side] == ["user", "assistant"]
    assert not {m.sequence for m in side} & {m.sequence for m in trace_main_path(trace_id=trace.trace_id)}
    [lesson] = TraceEvent.objects.filter(trace=trace, type="reflexion_lesson").values_list(
        "payload", flat=True
    )
    assert lesson["count"] == 1 and lesson["limit"] == 3 and lesson["tool"] == "read"
    experience = Experience.objects.get(trace=trace)
    assert experience.status == "draft" and experience.source == "execution"
    assert experience.rule == "Check that a file exists before reading it."
    failed = Message.objects.get(trace=trace, kind="tool_error")
    assert experience.evidence["trace_id"] == trace.trace_id
    assert {"sequence": failed.sequence, "message_id": failed.message_id} in experience.evidence["messages"]


def test_lessons_stay_in_the_context_injection_for_the_rest_of_the_run(runner, llm, settings):
    llm.script(
        "scripted",
        [failing_read(), critique("Never guess file names."), Reply(text="gave an answer")],
    )

    runner.run_result(user("read it"), RunConfig(reflexion=True, context_every=1, name="r"))

    last = llm.requests_for("scripted")[-1]
    injected = [
        m["content"] for m in last.messages if m["role"] == "system" and "## Current Plan" in m["content"]
    ]
    assert "Lessons learned in this run (Reflexion)" in injected[-1]
    assert "- Never guess file names." in injected[-1]


def test_without_reflexion_a_failed_call_gets_no_critique(runner, llm):
    llm.script("scripted", [failing_read(), Reply(text="could not read it")])

    result = runner.run_result(user("read it"), RunConfig(name="r"))

    assert result.status == "completed" and len(llm.requests_for("scripted")) == 2
    assert not Experience.objects.exists()


def test_a_plan_step_gives_up_after_three_lessons_and_the_run_goes_on(runner, llm):
    llm.script(
        "scripted",
        [
            json.dumps({"steps": [{"description": "read missing.txt"}]}),
            failing_read(),
            critique("lesson one"),
            failing_read(),
            critique("lesson two"),
            failing_read(),
            critique("lesson three"),
            failing_read(),
            Reply(text="Nothing could be read. [STEP 1 FAILED]"),
        ],
    )

    result = runner.run_result(user("read missing.txt"), RunConfig(strategy="plan_execute", name="p"))

    trace = Trace.objects.get(pk=result.trace_id)
    assert trace.run_settings["reflexion"] is True  # on by default for plan_execute
    assert result.status == "completed" and "[STEP 1 FAILED]" in (result.result or "")
    step = Goal.objects.get(trace=trace, reason="plan step 1 of 1")
    assert step.status == "abandoned"
    assert step.summary.startswith("[STEP 1 FAILED] gave up after 3 Reflexion lessons")
    assert Experience.objects.filter(trace=trace).count() == 3
    assert len(llm.requests_for("scripted")) == 9
    synthesis = llm.requests_for("scripted")[-1].messages[-1]["content"]
    assert "[STEP 1 FAILED] gave up after 3 Reflexion lessons" in synthesis


def test_a_react_run_that_runs_out_of_lessons_fails_saying_so(runner, llm):
    llm.script(
        "scripted",
        [
            failing_read(),
            critique("a"),
            failing_read(),
            critique("b"),
            failing_read(),
            critique("c"),
            failing_read(),
        ],
    )

    result = runner.run_result(user("read it"), RunConfig(reflexion=True, name="r"))

    assert result.status == "failed" and "gave up after 3 Reflexion lessons" in (result.error or "")

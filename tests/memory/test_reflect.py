"""Reflection (M3): a side branch off the head that stores draft experiences."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from memory.models import Experience
from tests.factories import make_trace
from tests.scripted_llm import Reply
from traces.models import Message, Trace, TraceEvent
from traces.runner import RunConfig
from traces.selectors import trace_main_path

pytestmark = pytest.mark.django_db

CHAT = [
    ("system", "be brief"),
    ("user", "count the lines of a.txt"),
    ("assistant", "I ran wc and got 3"),
    ("user", "thanks"),
    ("assistant", "done"),
]


def reflection(*experiences: dict[str, Any]) -> Reply:
    return Reply(text=json.dumps({"experiences": list(experiences)}))


LESSON = {
    "category": "tool_usage",
    "tags": {"state": ["text file"], "intent": ["count lines"]},
    "condition": "counting lines of a file",
    "rule": "Use wc -l instead of reading the whole file.",
    "evidence": [3],
}


def test_reflect_endpoint_stores_drafts_on_a_side_branch(api_client, integrator, inline_worker, llm):
    trace = make_trace(integrator, messages=CHAT)
    llm.script("scripted", [reflection(LESSON, {**LESSON, "category": "logic_flow", "evidence": [2, 3]})])

    with inline_worker():
        response = api_client(integrator).post(
            f"/api/traces/{trace.trace_id}/reflect", {"focus": "why wc"}, format="json"
        )

    assert response.status_code == 202
    assert response.json() == {"trace_id": trace.trace_id, "status": "started"}
    trace.refresh_from_db()
    assert trace.status == "completed" and trace.head_sequence == 5  # the head did not move
    assert [m.sequence for m in trace_main_path(trace_id=trace.trace_id)] == [1, 2, 3, 4, 5]
    branch = list(Message.objects.filter(trace=trace, sequence__gt=5).order_by("sequence"))
    assert [(m.role, m.parent_sequence, m.kind) for m in branch] == [
        ("user", 5, "reflect"),
        ("assistant", 6, "reflect"),
    ]
    assert "Focus on: why wc" in branch[0].content and "#3 assistant: I ran wc and got 3" in branch[0].content
    request = llm.requests_for("scripted")[0].messages
    assert [m["role"] for m in request] == ["system", "user", "assistant", "user", "assistant", "user"]
    first, second = Experience.objects.order_by("code")
    assert (first.status, first.source, first.helpful, first.category) == (
        "draft",
        "execution",
        1,
        "tool_usage",
    )
    assert first.tags == {"state": ["text_file"], "intent": ["count_lines"]}
    assert first.trace_id == trace.trace_id
    assert first.evidence["messages"] == [{"sequence": 3, "message_id": f"{trace.trace_id}-0003"}]
    assert second.evidence_sequences == [2, 3]
    event = TraceEvent.objects.get(trace=trace, type="experiences_extracted")
    assert event.payload["codes"] == [first.code, second.code]


def test_a_continue_after_reflection_does_not_see_the_branch(runner, llm, integrator):
    llm.script("scripted", ["first answer"])
    result = runner.run_result([{"role": "user", "content": "hi"}], RunConfig(name="n"))
    from memory.reflect import reflect_on_trace

    llm.script("scripted", [reflection(LESSON | {"evidence": [2]})])
    assert reflect_on_trace(trace_id=result.trace_id).status == "completed"
    llm.script("scripted", ["second answer"])
    runner.run_result([{"role": "user", "content": "more"}], RunConfig(trace_id=result.trace_id))

    sent = llm.requests_for("scripted")[-1].messages
    assert [m["content"] for m in sent if m["role"] != "system"] == ["hi", "first answer", "more"]
    path = trace_main_path(trace_id=result.trace_id)
    assert all(m.kind != "reflect" for m in path)
    assert Message.objects.filter(trace_id=result.trace_id, kind="reflect").count() == 2


def test_invalid_output_is_retried_once(integrator, llm):
    from memory.reflect import reflect_on_trace

    trace = make_trace(integrator, messages=CHAT)
    llm.script("scripted", ["I think it went well.", reflection(LESSON)])

    result = reflect_on_trace(trace_id=trace.trace_id)

    assert result.status == "completed" and len(result.codes) == 1
    retry = llm.requests_for("scripted")[1].messages
    assert retry[-2]["content"] == "I think it went well."
    assert "could not be used" in retry[-1]["content"]
    branch = Message.objects.filter(trace=trace, kind="reflect").order_by("sequence")
    assert [(m.role, m.parent_sequence) for m in branch] == [
        ("user", 5),
        ("assistant", 6),
        ("user", 7),
        ("assistant", 8),
    ]


def test_invalid_twice_is_an_error_event_and_nothing_is_saved(integrator, llm):
    from memory.reflect import reflect_on_trace

    trace = make_trace(integrator, messages=CHAT, status="failed", error_message="boom")
    bad_evidence = LESSON | {"evidence": [42]}
    llm.script("scripted", [reflection(bad_evidence), reflection(LESSON | {"rule": ""})])

    result = reflect_on_trace(trace_id=trace.trace_id)

    assert result.status == "failed" and "invalid twice" in result.error and "rule" in result.error
    assert "[42] are not messages of this run" in llm.requests_for("scripted")[1].messages[-1]["content"]
    assert not Experience.objects.exists()
    error = TraceEvent.objects.get(trace=trace, type="error")
    assert error.payload["stage"] == "reflect"
    trace.refresh_from_db()
    assert (trace.status, trace.error_message, trace.head_sequence) == ("failed", "boom", 5)
    assert trace.run_owner == ""


def test_model_failure_is_an_error_event(integrator, llm, settings):
    from memory.reflect import reflect_on_trace

    settings.AGENT_LLM_RETRIES = 0
    trace = make_trace(integrator, messages=CHAT)
    llm.script("scripted", [Reply(status=400, error="bad request")])

    result = reflect_on_trace(trace_id=trace.trace_id)

    assert result.status == "failed" and "model call failed" in result.error
    assert TraceEvent.objects.filter(trace=trace, type="error").exists()
    assert Trace.objects.get(pk=trace.pk).status == "completed"


def test_reflect_refusals(api_client, integrator, stranger, llm):
    trace = make_trace(integrator, messages=CHAT)
    running = make_trace(integrator, messages=CHAT, status="running")
    empty = make_trace(integrator)

    assert (
        api_client(stranger).post(f"/api/traces/{trace.trace_id}/reflect", {}, format="json").status_code
        == 404
    )
    assert api_client().post(f"/api/traces/{trace.trace_id}/reflect", {}, format="json").status_code == 401
    conflict = api_client(integrator).post(f"/api/traces/{running.trace_id}/reflect", {}, format="json")
    assert conflict.status_code == 409 and conflict.json()["code"] == "run_conflict"
    nothing = api_client(integrator).post(f"/api/traces/{empty.trace_id}/reflect", {}, format="json")
    assert nothing.status_code == 400 and "no messages" in nothing.json()["error"]
    long = api_client(integrator).post(
        f"/api/traces/{trace.trace_id}/reflect", {"focus": "x" * 3000}, format="json"
    )
    assert long.status_code == 400 and long.json()["code"] == "max_length"


def test_a_queued_reflection_holds_the_trace(api_client, integrator, llm, django_capture_on_commit_callbacks):
    trace = make_trace(integrator, messages=CHAT)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        api_client(integrator).post(f"/api/traces/{trace.trace_id}/reflect", {}, format="json")
    assert len(callbacks) == 1
    trace.refresh_from_db()
    assert trace.status == "queued" and trace.heartbeat_at is None
    second = api_client(integrator).post(f"/api/traces/{trace.trace_id}/run", {"messages": []}, format="json")
    assert second.status_code == 409


def test_run_agent_reflect_option(integrator, llm):
    trace = make_trace(integrator, messages=CHAT)
    llm.script("scripted", [reflection(LESSON)])
    out = io.StringIO()

    call_command("run_agent", "--trace", trace.trace_id, "--reflect", "wc", stdout=out)

    assert "draft experiences ex_001" in out.getvalue()
    llm.script("scripted", ["no json", "still no json"])
    with pytest.raises(CommandError):
        call_command("run_agent", "--trace", trace.trace_id, "--reflect", stdout=io.StringIO())


def test_admin_reflect_action(client, expert, integrator, inline_worker, llm):
    trace = make_trace(integrator, messages=CHAT)
    llm.script("scripted", [reflection(LESSON)])
    client.force_login(expert)
    expert.is_superuser = True
    expert.save()

    with inline_worker():
        response = client.post(
            "/admin/traces/trace/", {"action": "reflect_traces", "_selected_action": [trace.trace_id]}
        )

    assert response.status_code == 302
    assert Experience.objects.get().trace_id == trace.trace_id


def test_reflection_inside_a_run_uses_the_runs_store(integrator, llm):
    """C2's first step: a run holding the lease reflects through its own RunStore."""
    from memory.reflect import Reflection
    from traces.runner.store import RunStore, trace_claim

    trace = make_trace(integrator, messages=CHAT)
    claimed = trace_claim(trace_id=trace.trace_id, owner="test")
    store = RunStore(claimed)
    llm.script("scripted", [reflection(LESSON)])

    result = Reflection(trace.trace_id, focus="before compaction").run_with_store(store)

    assert result.status == "completed" and result.messages == [6, 7]
    assert claimed.head_sequence == 5 and claimed.last_sequence == 7
    assert Trace.objects.get(pk=trace.pk).last_sequence == 7


def test_a_condition_said_with_when_is_stored_as_the_clause_after_it(integrator, llm):
    from memory.reflect import reflect_on_trace

    trace = make_trace(integrator, messages=CHAT)
    llm.script("scripted", [reflection(LESSON | {"condition": "When counting lines of a file"})])

    result = reflect_on_trace(trace_id=trace.trace_id)

    experience = Experience.objects.get(code=result.codes[0])
    assert experience.condition == "counting lines of a file"
    assert experience.prompt_line().startswith(f"- [{experience.code}] When counting lines of a file: Use wc")

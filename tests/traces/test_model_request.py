"""What the model saw (issue 22): the recorded request of an assistant message equals the wire request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory.models import ExperienceStatus
from memory.services import experience_create
from tests.scripted_llm import Reply
from tests.traces.test_compaction import SKILLS, big_output, is_compact_request, scripted, user
from traces.models import Message, ModelRequest, RequestPart, Trace
from traces.observability.requests import decode
from traces.runner import RunConfig
from traces.runner.microcompact import STUB_PREFIX

pytestmark = pytest.mark.django_db


def normal(value: Any) -> str:
    """JSON normalised: sorted keys, and no null-valued keys (litellm leaves them out of the body)."""
    return json.dumps(_without_nulls(value), sort_keys=True, ensure_ascii=False)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def wire_calls(llm: Any) -> list[Any]:
    """The main model's requests that became assistant messages (summaries are utility calls)."""
    return [r for r in llm.requests_for("scripted") if not is_compact_request(r.body)]


@pytest.fixture
def compacted_run(runner: Any, llm: Any, settings: Any, integrator: Any) -> Any:
    """A run with an experience injected, microcompact from the start and level-2 summaries."""
    settings.AGENT_CONTEXT_TOKENS = 1600
    settings.AGENT_COMPACTION_REFLECT = False
    settings.AGENT_MICROCOMPACT_THRESHOLD = 0
    settings.AGENT_MICROCOMPACT_KEEP = 1
    hit = experience_create(
        rule="Print digits with python3.", tags={"intent": ["printing"]}, status=ExperienceStatus.APPROVED
    )
    llm.script("utility", ["Digits", json.dumps({"state": ["digits"], "intent": ["printing"]})])
    llm.script("scripted", [scripted([Reply(tool_calls=[big_output(i)]) for i in range(8)])] * 40)
    result = runner.run_result(
        user("print big digits eight times"),
        RunConfig(stream=False, skills=SKILLS, owner_id=integrator.pk, llm_params={"temperature": 0.25}),
    )
    assert result.status == "completed"
    return result, hit


def test_the_request_view_equals_what_reached_the_model(compacted_run, llm, api_client, integrator):
    result, hit = compacted_run
    sent = wire_calls(llm)
    assistants = list(
        Message.objects.filter(trace_id=result.trace_id, role="assistant", kind="").order_by("sequence")
    )
    assert len(assistants) == len(sent) >= 9
    # the run went through everything that reshapes a request
    assert f"[{hit.code}]" in sent[0].messages[1]["content"]  # experience injection
    assert any(str(m.get("content", "")).startswith(STUB_PREFIX) for r in sent for m in r.messages)
    summary = Message.objects.filter(trace_id=result.trace_id, kind="summary").first()
    assert summary is not None and any(m.get("content") == summary.content for r in sent for m in r.messages)
    client = api_client(integrator)
    for message, wire in zip(assistants, sent, strict=True):
        response = client.get(f"/api/traces/{result.trace_id}/messages/{message.sequence}/request")
        assert response.status_code == 200
        seen = response.json()
        assert normal(seen["messages"]) == normal(wire.body["messages"])
        assert normal(seen["tools"]) == normal(wire.body["tools"])
        assert seen["parameters"] == {"temperature": 0.25, "stream": False}
        assert wire.body["temperature"] == 0.25 and seen["model"] == "openai/scripted"


def test_requests_are_stored_compactly(compacted_run, llm):
    result, _ = compacted_run
    rows = list(ModelRequest.objects.filter(trace_id=result.trace_id).order_by("sequence"))
    distinct = {normal(m) for r in wire_calls(llm) for m in r.messages}
    parts = RequestPart.objects.filter(trace_id=result.trace_id).count()
    assert parts == len(distinct) + 1  # each message body once, and the tools list
    assert sum(_length(r, rows) for r in rows) > 2 * parts
    assert all(len(r.parts) <= 8 for r in rows[1:])  # slices of the previous request, a few new parts


def _length(row: ModelRequest, rows: list[ModelRequest]) -> int:
    by_sequence = {r.sequence: r for r in rows}
    chain, at = [], row.sequence
    while at is not None:
        chain.append(by_sequence[at].parts)
        at = by_sequence[at].base_sequence
    return len(decode(chain[::-1]))


def test_the_request_is_visible_only_to_who_sees_the_trace(compacted_run, api_client, stranger):
    result, _ = compacted_run
    sequence = Message.objects.filter(trace_id=result.trace_id, role="assistant").first().sequence
    url = f"/api/traces/{result.trace_id}/messages/{sequence}/request"
    assert api_client().get(url).status_code in (401, 403)
    response = api_client(stranger).get(url)
    assert response.status_code == 404 and response.json()["code"] == "trace_not_found"


def test_a_message_without_a_request_is_a_json_404(compacted_run, api_client, integrator):
    result, _ = compacted_run
    user_message = Message.objects.get(trace_id=result.trace_id, sequence=2)
    response = api_client(integrator).get(
        f"/api/traces/{result.trace_id}/messages/{user_message.sequence}/request"
    )
    assert response.status_code == 404
    assert response.json() == {
        "error": f"message 2 of trace {result.trace_id!r} has no recorded model request",
        "code": "request_not_found",
    }
    assert Trace.objects.filter(pk=result.trace_id).exists()


def test_a_continued_trace_records_its_requests_without_storing_parts_again(
    runner, llm, api_client, integrator
):
    llm.script("scripted", [Reply(text=f"answer {n}") for n in range(20)])
    first = runner.run_result(user("first question"), RunConfig(stream=False, owner_id=integrator.pk))
    for n in range(18):  # a history longer than the stored-parts check's threshold
        runner.run_result(user(f"question {n}"), RunConfig(stream=False, trace_id=first.trace_id))
    parts_before = RequestPart.objects.filter(trace_id=first.trace_id).count()
    runner.run_result(user("last question"), RunConfig(stream=False, trace_id=first.trace_id))

    parts = RequestPart.objects.filter(trace_id=first.trace_id).count()
    assert parts == parts_before + 2  # the new question and the previous answer; the rest was stored
    last = Message.objects.filter(trace_id=first.trace_id, role="assistant").order_by("sequence").last()
    seen = api_client(integrator).get(f"/api/traces/{first.trace_id}/messages/{last.sequence}/request").json()
    assert normal(seen["messages"]) == normal(llm.requests_for("scripted")[-1].body["messages"])


def test_deleting_a_trace_deletes_its_recorded_requests(runner, llm, integrator):
    from traces.services.delete import trace_delete

    llm.script("scripted", ["an answer"])
    result = runner.run_result(user("a question"), RunConfig(stream=False, owner_id=integrator.pk))
    assert ModelRequest.objects.filter(trace_id=result.trace_id).exists()

    trace_delete(user=integrator, trace_id=result.trace_id)

    assert not ModelRequest.objects.filter(trace_id=result.trace_id).exists()
    assert not RequestPart.objects.filter(trace_id=result.trace_id).exists()

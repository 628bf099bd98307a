"""One-shot traces (seed 004 `mode: "call"`, `prompt_name`): POST /api/calls through the real
litellm wrapper against the scripted model, recorded as a trace of mode `call`."""

from __future__ import annotations

import pytest

from tests.scripted_llm import Reply
from traces.models import Message, TraceEvent

pytestmark = pytest.mark.django_db


def test_a_call_is_one_request_without_tools_recorded_as_a_call_trace(api_client, integrator, stranger, llm):
    llm.script("scripted", [Reply(text="Bonjour")])
    client = api_client(integrator)

    response = client.post(
        "/api/calls",
        {
            "messages": [
                {"role": "system", "content": "Translate to French."},
                {"role": "user", "content": "Hello"},
            ],
            "prompt_name": "translate",
            "llm_params": {"temperature": 0.1},
        },
        format="json",
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["mode"], body["prompt_name"], body["status"]) == ("call", "translate", "completed")
    assert body["result_summary"] == "Bonjour" and body["owner"] == "integrator"
    [sent] = llm.requests_for("scripted")
    assert "tools" not in sent.body and sent.body["temperature"] == 0.1
    assert [m["content"] for m in sent.body["messages"]] == ["Translate to French.", "Hello"]
    stored = list(Message.objects.filter(trace_id=body["trace_id"]).order_by("sequence"))
    assert [(m.role, m.sequence, m.parent_sequence) for m in stored] == [
        ("system", 1, None),
        ("user", 2, 1),
        ("assistant", 3, 2),
    ]
    reply = stored[-1]
    assert (reply.prompt_tokens, reply.completion_tokens) == (sent.prompt_tokens, sent.completion_tokens)
    assert body["total_tokens"] == sent.prompt_tokens + sent.completion_tokens
    events = list(TraceEvent.objects.filter(trace_id=body["trace_id"]).order_by("event_id"))
    assert [(e.event_id, e.type) for e in events] == [(1, "run_started"), (2, "final")]
    assert events[0].payload["prompt_name"] == "translate"
    path = client.get(f"/api/traces/{body['trace_id']}/messages").json()
    assert [m["content"] for m in path][-1] == "Bonjour"  # reads like any other trace
    assert api_client(stranger).get(f"/api/traces/{body['trace_id']}").status_code == 404


def test_a_failing_model_fails_the_call_trace_with_the_reason(api_client, integrator, llm, settings):
    settings.AGENT_LLM_RETRIES = 0
    llm.script("scripted", [Reply(status=400, error="the prompt is not allowed")])

    response = api_client(integrator).post(
        "/api/calls", {"task": "Hello", "prompt_name": "greet"}, format="json"
    )

    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "failed" and "the prompt is not allowed" in body["error_message"]
    assert list(Message.objects.filter(trace_id=body["trace_id"]).values_list("role", flat=True)) == ["user"]
    last = TraceEvent.objects.filter(trace_id=body["trace_id"]).order_by("-event_id").first()
    assert last.type == "error" and last.payload["status"] == "failed"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"messages": [{"role": "system", "content": "only a system prompt"}]}, "at least one user message"),
        (
            {"task": "x", "llm_params": {"api_base": "http://evil.example"}},
            "llm_params: api_base may not be set",
        ),
        ({"task": "x", "messages": [{"role": "user", "content": "x"}]}, "either messages or task"),
        ({"task": "x", "prompt_name": "p" * 201}, "prompt_name"),
    ],
)
def test_bad_calls_are_400_and_no_model_is_asked(api_client, integrator, llm, body, reason):
    response = api_client(integrator).post("/api/calls", body, format="json")
    assert response.status_code == 400
    assert reason in str(response.json())
    assert llm.requests_for("scripted") == []


def test_calls_need_a_login(api_client, llm):
    assert api_client().post("/api/calls", {"task": "x"}, format="json").status_code in (401, 403)
    assert llm.requests_for("scripted") == []

"""The portal's "what the model saw" page: the recorded request, escaped, for who sees the trace."""

from __future__ import annotations

import html
import json

import pytest

from tests.scripted_llm import Reply, ToolCall
from traces.models import Message
from traces.runner import AgentRunner, RunConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(llm, workspace_root, integrator):
    llm.script(
        "scripted", [Reply(tool_calls=[ToolCall("bash", {"command": "echo '<script>x</script>'"})]), "ok"]
    )
    result = AgentRunner().run_result(
        [{"role": "user", "content": "say <b>hi</b>"}], RunConfig(stream=False, owner_id=integrator.pk)
    )
    assert result.status == "completed"
    return result, llm.requests_for("scripted")


def test_the_page_shows_each_message_the_model_was_sent_escaped(run, browser_client, integrator):
    result, wire = run
    replies = Message.objects.filter(trace_id=result.trace_id, role="assistant").order_by("sequence")
    last = replies.last()
    page = browser_client(integrator).get(f"/traces/{result.trace_id}/messages/{last.sequence}/request/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "<script>x</script>" not in text and "<b>hi</b>" not in text
    for message in wire[-1].messages:
        assert html.escape(json.dumps(message["role"])) in text
    assert html.escape(json.dumps(wire[-1].messages[-1]["content"], ensure_ascii=False)) in text
    assert "bash" in text and "&quot;stream&quot;: false" in text
    trace_page = browser_client(integrator).get(f"/traces/{result.trace_id}/").content.decode()
    assert f"/traces/{result.trace_id}/messages/{last.sequence}/request/" in trace_page


def test_the_page_is_for_who_sees_the_trace(run, browser_client, stranger, expert):
    result, _ = run
    url = f"/traces/{result.trace_id}/messages/3/request/"
    assert browser_client().get(url).status_code == 302  # to the login page
    assert browser_client(stranger).get(url).status_code == 404
    assert browser_client(expert).get(url).status_code == 200


def test_a_message_without_a_request_says_so(run, browser_client, integrator):
    result, _ = run
    page = browser_client(integrator).get(f"/traces/{result.trace_id}/messages/2/request/")
    assert page.status_code == 404 and "No model request is recorded" in page.content.decode()

"""A2A messages (S4): the authenticated webhook, the check_messages tool, the context hook."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.factories import make_trace
from tests.scripted_llm import Reply, ToolCall
from traces.collaboration.inbox import inbox_context_hook
from traces.models import InboxMessage, Message
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db

URL = "/webhook/a2a-messages"


def token_client(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def payload(trace_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "to_trace_id": trace_id,
        "from_agent_id": "code-reviewer",
        "conversation_id": "conv-7",
        "content": "please check utils.py",
        **extra,
    }


def test_the_webhook_stores_a_message_for_a_trace_the_token_may_see(integrator):
    trace = make_trace(integrator)
    response = token_client(integrator).post(URL, payload(trace.trace_id), format="json")

    assert response.status_code == 202, response.content
    message = InboxMessage.objects.get()
    assert response.json() == {"status": "received", "message_id": message.pk, "to_trace_id": trace.trace_id}
    assert (message.from_agent_id, message.conversation_id, message.content) == (
        "code-reviewer",
        "conv-7",
        "please check utils.py",
    )
    assert message.sender == integrator and message.read_at is None


def test_the_webhook_refuses_anonymous_sessions_strangers_and_bad_payloads(integrator, stranger, api_client):
    trace = make_trace(integrator)
    assert APIClient().post(URL, payload(trace.trace_id), format="json").status_code == 401
    session = APIClient()
    session.force_login(integrator)  # a browser session is not a machine token
    assert session.post(URL, payload(trace.trace_id), format="json").status_code in (401, 403)
    hidden = token_client(stranger).post(URL, payload(trace.trace_id), format="json")
    assert hidden.status_code == 404 and hidden.json()["code"] == "trace_not_found"
    client = token_client(integrator)
    missing = client.post(URL, {"to_trace_id": trace.trace_id, "content": "x"}, format="json")
    assert missing.status_code == 400 and "from_agent_id" in missing.json()["error"]
    empty = client.post(URL, payload(trace.trace_id, content=""), format="json")
    assert empty.status_code == 400
    assert not InboxMessage.objects.exists()


def test_the_context_hook_and_check_messages_show_new_messages_once(runner, llm, integrator):
    def deliver_then_read(body: dict[str, Any]) -> Reply:
        return Reply(tool_calls=[ToolCall("check_messages", {})])

    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("list_files", {})]),
            deliver_then_read,
            Reply(tool_calls=[ToolCall("check_messages", {})]),
            Reply(text="read them"),
        ],
    )
    result = None

    def on_event(item: Any) -> None:
        nonlocal result
        if isinstance(item, Message) and item.name == "list_files" and not InboxMessage.objects.exists():
            for sender, text in (("planner", "step 2 is done"), ("code-reviewer", "utils.py looks fine")):
                InboxMessage.objects.create(
                    to_trace_id=item.trace_id, from_agent_id=sender, conversation_id="c1", content=text
                )

    result = runner.run_result(
        [{"role": "user", "content": "work"}], RunConfig(context_every=1), on_event=on_event
    )

    contexts = list(Message.objects.filter(trace_id=result.trace_id, kind="context").order_by("sequence"))
    # iteration 0 had nothing to inject; the messages arrived with list_files' result
    assert "2 new messages, latest from code-reviewer" in contexts[0].content
    reads = list(Message.objects.filter(trace_id=result.trace_id, name="check_messages").order_by("sequence"))
    assert reads[0].content.startswith("2 new messages")
    assert "From planner (conversation c1)" in reads[0].content and "utils.py looks fine" in reads[0].content
    assert reads[1].content == "No new messages"
    assert all("## Messages" not in c.content for c in contexts[1:])
    assert not InboxMessage.objects.filter(read_at__isnull=True).exists()


def test_the_hook_names_a_single_sender(integrator):
    trace = make_trace(integrator)
    assert inbox_context_hook(trace, None) is None
    InboxMessage.objects.create(to_trace=trace, from_agent_id="bot", content={"x": 1})
    assert (
        inbox_context_hook(trace, None)
        == "## Messages\n\n1 new message from bot (use the check_messages tool to read it)"
    )

"""A reasoning model's thinking (seed 003 Step `reasoning`): kept, shown folded, counted, never sent back."""

from __future__ import annotations

from typing import Any

import pytest

from tests.scripted_llm import Reply, ToolCall, estimate_tokens
from traces.llm_request import request_messages
from traces.models import Message, Trace
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db

THINKING = "The user wants notes. I should **write** the file first, then answer."


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def sent_text(request: Any) -> str:
    return repr(request.messages)


@pytest.mark.parametrize("stream", [True, False])
def test_reasoning_is_stored_counted_and_never_sent_back(runner, llm, stream):
    llm.script(
        "scripted",
        [
            Reply(reasoning=THINKING, tool_calls=[ToolCall("write", {"path": "n.txt", "content": "x"})]),
            Reply(text="done", reasoning="All written."),
        ],
    )

    result = runner.run_result(user("write notes"), RunConfig(stream=stream))

    replies = list(
        Message.objects.filter(trace_id=result.trace_id, role="assistant", kind="").order_by("sequence")
    )
    assert [m.reasoning for m in replies] == [THINKING, "All written."]
    assert replies[0].reasoning_tokens == estimate_tokens(THINKING)
    # the completion tokens are the provider's, reasoning included
    assert replies[0].completion_tokens >= estimate_tokens(THINKING) + 1
    second = llm.requests_for("scripted")[1]
    assert THINKING not in sent_text(second)
    assert all("reasoning_content" not in m for m in second.messages)
    assert replies[0].to_llm_dict().keys() == {"role", "content", "tool_calls"}


def test_reasoning_arrives_from_anthropic_thinking_blocks(runner, llm, settings):
    settings.AGENT_MODEL = "anthropic/scripted"
    settings.AGENT_API_BASE = llm.root
    llm.script("scripted", [Reply(text="fine", reasoning="Thinking in a block.")])

    result = runner.run_result(user("hello"), RunConfig(stream=True))

    reply = Message.objects.filter(trace_id=result.trace_id, role="assistant", kind="").get()
    assert reply.reasoning == "Thinking in a block."
    assert "Thinking in a block." not in sent_text(llm.requests_for("scripted")[0])


def test_reasoning_keys_are_left_out_of_every_request():
    assistant = {"role": "assistant", "content": "hi", "reasoning_content": "secret", "thinking_blocks": []}
    history = [{"role": "user", "content": "q"}, assistant]

    sent = request_messages(history, "deepseek/deepseek-reasoner")

    assert sent[1] == {"role": "assistant", "content": "hi"}
    assert assistant["reasoning_content"] == "secret"  # the caller's dict is left as it was


def test_the_message_event_and_api_carry_the_reasoning(runner, llm, api_client, expert):
    llm.script("scripted", [Reply(text="ok", reasoning="why not")])
    result = runner.run_result(user("hi"), RunConfig())
    Trace.objects.filter(pk=result.trace_id).update(owner=expert)

    body = api_client(expert).get(f"/api/traces/{result.trace_id}/messages").json()

    rows = body["results"] if isinstance(body, dict) else body
    reply = [m for m in rows if m["role"] == "assistant" and m["kind"] == ""][-1]
    assert reply["reasoning"] == "why not" and reply["reasoning_tokens"] == estimate_tokens("why not")


def test_the_portal_folds_the_reasoning_and_sanitises_it(runner, llm, client, expert):
    llm.script("scripted", [Reply(text="ok", reasoning="<script>alert(1)</script> think *hard*")])
    result = runner.run_result(user("hi"), RunConfig())
    client.force_login(expert)

    html = client.get(f"/traces/{result.trace_id}/").content.decode()

    assert '<details class="reasoning">' in html
    assert "<em>hard</em>" in html
    assert "<script>alert(1)</script>" not in html

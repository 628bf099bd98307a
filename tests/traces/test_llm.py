"""The litellm wrapper (L1-L4) through the real litellm client and the scripted server."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import pytest

from tests.scripted_llm import Reply, ScriptedLLM, ToolCall, estimate_tokens
from traces.llm import (
    LLMClient,
    LLMError,
    ModelNotConfigured,
    ModelSettings,
    agent_model,
    normalize_tool_call_ids,
    register_model_prices,
    utility_model,
)

USER = [{"role": "user", "content": "Read a.txt and tell me what it says, please."}]
READ_TOOL = {
    "type": "function",
    "function": {
        "name": "read",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}
PRICES = (
    '{"openai/priced": {"input_cost_per_token": 0.000001, "output_cost_per_token": 0.000002, '
    '"litellm_provider": "openai", "mode": "chat"}}'
)
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def history_with_tool_calls(*ids: str) -> list[dict[str, Any]]:
    """An OpenAI-format history: one assistant turn calling `read` once per id, then the results."""
    calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": "read", "arguments": json.dumps({"path": f"{n}.txt"})},
        }
        for n, call_id in enumerate(ids)
    ]
    results = [
        {"role": "tool", "tool_call_id": call_id, "content": f"contents {n}"} for n, call_id in enumerate(ids)
    ]
    return [*USER, {"role": "assistant", "content": None, "tool_calls": calls}, *results]


# --- plain calls ------------------------------------------------------------------


def test_plain_reply_maps_usage_to_tokens(llm: ScriptedLLM) -> None:
    llm.script("scripted", [Reply(text="It says hello.")])

    response = LLMClient()(USER, model=agent_model())

    assert response.content == "It says hello."
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert response.streamed is False
    (request,) = llm.requests
    assert request.path == "/v1/chat/completions"
    assert request.model == "scripted"
    assert request.headers["authorization"] == "Bearer sk-test-not-a-secret"
    assert request.messages == USER
    assert response.prompt_tokens == request.prompt_tokens == estimate_tokens(USER[0]["content"])
    assert response.completion_tokens == request.completion_tokens == estimate_tokens("It says hello.")
    assert response.message_dict() == {"role": "assistant", "content": "It says hello."}


def test_empty_queue_answers_with_default_reply(llm: ScriptedLLM) -> None:
    response = LLMClient()(USER, model=agent_model())

    assert response.content == "done"
    assert llm.pending() == 0


def test_tool_call_reply_is_parsed_into_openai_tool_calls(llm: ScriptedLLM) -> None:
    llm.script("scripted", [Reply(tool_calls=[ToolCall("read", {"path": "a.txt"})])])

    response = LLMClient()(USER, model=agent_model(), tools=[READ_TOOL])

    assert response.finish_reason == "tool_calls"
    (call,) = response.tool_calls
    assert re.fullmatch(r"call_[A-Za-z0-9]{24}", call["id"])
    assert call["type"] == "function"
    assert call["function"]["name"] == "read"
    assert json.loads(call["function"]["arguments"]) == {"path": "a.txt"}
    assert response.message_dict()["tool_calls"] == response.tool_calls
    assert llm.requests[0]["tools"] == [READ_TOOL]


def test_utility_model_answers_from_its_own_queue(llm: ScriptedLLM) -> None:
    llm.script("utility", [Reply(text="Reading a file")])
    llm.script("scripted", [Reply(text="main reply")])

    response = LLMClient()(USER, model=utility_model())

    assert response.content == "Reading a file"
    assert [request.model for request in llm.requests] == ["utility"]
    assert llm.pending("scripted") == 1


# --- streaming --------------------------------------------------------------------


def test_streaming_reply_matches_plain_call_and_feeds_tokens_in_order(llm: ScriptedLLM) -> None:
    pieces = ["It ", "says ", "hel", "lo."]
    llm.script("scripted", [Reply(text="It says hello."), Reply(text="It says hello.", chunks=pieces)])
    client = LLMClient()
    tokens: list[str] = []

    plain = client(USER, model=agent_model())
    streamed = client(USER, model=agent_model(), stream=True, on_token=tokens.append)

    assert tokens == pieces
    assert streamed.streamed is True
    assert (streamed.content, streamed.finish_reason, streamed.tool_calls) == (
        plain.content,
        plain.finish_reason,
        plain.tool_calls,
    )
    assert (streamed.prompt_tokens, streamed.completion_tokens) == (
        plain.prompt_tokens,
        plain.completion_tokens,
    )
    stream_request = llm.requests[1]
    assert stream_request.stream is True
    assert stream_request["stream_options"] == {"include_usage": True}


def test_streamed_tool_calls_are_assembled(llm: ScriptedLLM) -> None:
    calls = [
        ToolCall("read", {"path": "a.txt"}, id="call_first"),
        ToolCall("read", {"path": "dir/with a longer name/b.txt", "limit": 200}, id="call_second"),
    ]
    llm.script("scripted", [Reply(text="Reading both.", tool_calls=calls)])
    tokens: list[str] = []

    response = LLMClient()(USER, model=agent_model(), tools=[READ_TOOL], stream=True, on_token=tokens.append)

    assert "".join(tokens) == response.content == "Reading both."
    assert response.finish_reason == "tool_calls"
    assert [call["id"] for call in response.tool_calls] == ["call_first", "call_second"]
    assert [json.loads(call["function"]["arguments"]) for call in response.tool_calls] == [
        {"path": "a.txt"},
        {"path": "dir/with a longer name/b.txt", "limit": 200},
    ]
    assert response.completion_tokens == llm.requests[0].completion_tokens


# --- errors, retries, timeouts ------------------------------------------------------


def test_rate_limit_is_retried_then_succeeds(llm: ScriptedLLM, settings: Any) -> None:
    settings.AGENT_LLM_RETRIES = 1
    llm.script("scripted", [Reply(status=429, error="Rate limit reached"), Reply(text="after the wait")])

    response = LLMClient()(USER, model=agent_model())

    assert response.content == "after the wait"
    assert [request.status for request in llm.requests] == [429, 200]


NO_WAIT = {"retry-after": "0"}


@pytest.mark.parametrize(
    ("model_name", "queue", "status", "stream"),
    [
        ("openai/scripted", "scripted", 500, False),
        ("openai/scripted", "scripted", 529, False),
        ("openai/scripted", "scripted", 429, True),
        ("anthropic/scripted-claude", "scripted-claude", 429, False),
        ("anthropic/scripted-claude", "scripted-claude", 529, True),
    ],
)
def test_transient_errors_are_retried_for_every_provider(
    llm: ScriptedLLM, model_name: str, queue: str, status: int, stream: bool
) -> None:
    llm.script(queue, [Reply(status=status, headers=NO_WAIT), Reply(text="recovered")])
    base = llm.root if model_name.startswith("anthropic/") else llm.url
    model = ModelSettings(model_name, base, "sk-test-not-a-secret")

    response = LLMClient(retries=1)(USER, model=model, stream=stream)

    assert response.content == "recovered"
    assert response.streamed is stream
    assert [request.status for request in llm.requests] == [status, 200]


def test_rate_limit_that_persists_fails_after_the_retries(llm: ScriptedLLM) -> None:
    llm.script("scripted", [Reply(status=429, error="Rate limit reached", headers=NO_WAIT)] * 3)

    with pytest.raises(LLMError, match="RateLimitError.*Rate limit reached"):
        LLMClient(retries=2)(USER, model=agent_model())

    assert len(llm.requests) == 3


def test_bad_request_raises_readable_llm_error_without_retrying(llm: ScriptedLLM, settings: Any) -> None:
    settings.AGENT_LLM_RETRIES = 2
    llm.script("scripted", [Reply(status=400, error="Invalid 'messages[1].content': expected a string.")])

    with pytest.raises(LLMError) as caught:
        LLMClient()(USER, model=agent_model())

    message = str(caught.value)
    assert message.startswith("openai/scripted: BadRequestError")
    assert "Invalid 'messages[1].content': expected a string." in message
    assert "\n" not in message
    assert len(llm.requests) == 1


def test_stream_refused_before_first_chunk_falls_back_to_plain_call(llm: ScriptedLLM) -> None:
    llm.script("scripted", [Reply(status=400, error="stream is not supported"), Reply(text="plain answer")])
    tokens: list[str] = []

    response = LLMClient()(USER, model=agent_model(), stream=True, on_token=tokens.append)

    assert response.content == "plain answer"
    assert response.streamed is False
    assert tokens == []
    assert [(request.stream, request.status) for request in llm.requests] == [(True, 400), (False, 200)]


def test_slow_reply_times_out_as_llm_error(llm: ScriptedLLM) -> None:
    llm.script("scripted", [Reply(text="too late", delay=3)])

    started = time.monotonic()
    with pytest.raises(LLMError, match="openai/scripted: .*Timeout"):
        LLMClient(retries=0, timeout=0.5)(USER, model=agent_model())

    assert time.monotonic() - started < 2.5


def test_delayed_reply_does_not_block_other_requests(llm: ScriptedLLM) -> None:
    llm.script("slow", [Reply(text="slow", delay=1.5)])
    llm.script("scripted", [Reply(text="fast")])
    client = LLMClient(retries=0)
    finished: list[str] = []
    slow_model = ModelSettings("openai/slow", llm.url, "sk-test-not-a-secret")
    slow = threading.Thread(target=lambda: finished.append(client(USER, model=slow_model).content or ""))

    slow.start()
    llm.wait_for_requests(1)
    finished.append(client(USER, model=agent_model()).content or "")
    slow.join(timeout=5)

    assert finished == ["fast", "slow"]


# --- cost -----------------------------------------------------------------------


def test_unpriced_model_has_unknown_cost(llm: ScriptedLLM) -> None:
    assert LLMClient()(USER, model=agent_model()).cost is None


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_registered_price_gives_cost(llm: ScriptedLLM, settings: Any, stream: bool) -> None:
    settings.AGENT_MODEL_PRICES = PRICES
    register_model_prices()
    llm.script("priced", [Reply(text="A priced answer of some length.")])

    response = LLMClient()(USER, model=agent_model("openai/priced"), stream=stream)

    (request,) = llm.requests
    assert response.cost == pytest.approx(
        request.prompt_tokens * 0.000001 + request.completion_tokens * 0.000002
    )


def test_agent_model_without_configuration_names_the_setting(settings: Any) -> None:
    settings.AGENT_MODEL = ""

    with pytest.raises(ModelNotConfigured, match="AGENT_MODEL"):
        agent_model()
    assert agent_model("openai/per-run").model == "openai/per-run"


# --- L2: tool_call_id normalisation ------------------------------------------------


def test_same_format_history_is_returned_unchanged() -> None:
    history = history_with_tool_calls("call_Ab3dEf6hIj9kLm2nOp5qRs8t", "call_Zy1xWv4uTs7rQp0oNm3lKj6i")

    assert normalize_tool_call_ids(history, "openai/scripted") is history
    assert normalize_tool_call_ids(history, "anthropic/scripted-claude") is history


def test_valid_anthropic_ids_pass_to_openai_untouched() -> None:
    history = history_with_tool_calls("toolu_01A09q90qw90lq917835lq9", "toolu_01Bx7Y2zT4kM9pQ3rW6sV8nJ")

    assert normalize_tool_call_ids(history, "openai/scripted") is history


def test_overlong_id_is_rewritten_consistently_in_call_and_result() -> None:
    long_id = "call_" + "x" * 60
    history = history_with_tool_calls(long_id, "call_short")
    original = json.dumps(history)

    sent = normalize_tool_call_ids(history, "openai/scripted")

    new_id = sent[1]["tool_calls"][0]["id"]
    assert new_id != long_id and len(new_id) <= 40
    assert sent[2]["tool_call_id"] == new_id
    assert sent[1]["tool_calls"][1]["id"] == sent[3]["tool_call_id"] == "call_short"
    assert normalize_tool_call_ids(history, "openai/scripted")[2]["tool_call_id"] == new_id
    assert json.dumps(history) == original  # stored history is never changed


def test_anthropic_call_gets_rewritten_paired_ids(llm: ScriptedLLM) -> None:
    odd_ids = ("call:abc.1", "call:abc.2")
    history = history_with_tool_calls(*odd_ids)
    original = json.dumps(history)
    llm.script(
        "scripted-claude", [Reply(text="Both read.", tool_calls=[ToolCall("read", {"path": "c.txt"})])]
    )
    claude = ModelSettings("anthropic/scripted-claude", llm.root, "sk-test-not-a-secret")

    response = LLMClient()(history, model=claude, tools=[READ_TOOL])

    (request,) = llm.requests
    assert request.path == "/v1/messages"
    assert request.model == "scripted-claude"
    assert request.headers["x-api-key"] == "sk-test-not-a-secret"
    assistant, results = request.messages[1], request.messages[2]
    uses = [block for block in assistant["content"] if block["type"] == "tool_use"]
    assert results["role"] == "user"
    assert [block["type"] for block in results["content"]] == ["tool_result", "tool_result"]
    use_ids = [block["id"] for block in uses]
    assert [block["tool_use_id"] for block in results["content"]] == use_ids
    assert all(ANTHROPIC_ID.match(use_id) for use_id in use_ids)
    normalized = normalize_tool_call_ids(history, claude.model)
    assert use_ids == [
        call["id"] for call in normalized[1]["tool_calls"]
    ]  # ours, not litellm's own sanitising
    assert set(use_ids).isdisjoint(odd_ids) and len(set(use_ids)) == 2
    assert json.dumps(history) == original
    assert response.content == "Both read."
    assert response.finish_reason == "tool_calls"
    (call,) = response.tool_calls
    assert call["id"].startswith("toolu_01")
    assert json.loads(call["function"]["arguments"]) == {"path": "c.txt"}
    assert (response.prompt_tokens, response.completion_tokens) == (
        request.prompt_tokens,
        request.completion_tokens,
    )


def test_anthropic_valid_ids_arrive_unchanged_and_streaming_works(llm: ScriptedLLM) -> None:
    ids = ("call_Ab3dEf6hIj9kLm2nOp5qRs8t",)
    llm.script("scripted-claude", [Reply(text="All read now.", chunks=["All ", "read ", "now."])])
    claude = ModelSettings("anthropic/scripted-claude", llm.root, "sk-test-not-a-secret")
    tokens: list[str] = []

    response = LLMClient()(history_with_tool_calls(*ids), model=claude, stream=True, on_token=tokens.append)

    (request,) = llm.requests
    assert request.stream is True
    assert [block["id"] for block in request.messages[1]["content"] if block["type"] == "tool_use"] == list(
        ids
    )
    assert request.messages[2]["content"][0]["tool_use_id"] == ids[0]
    assert tokens == ["All ", "read ", "now."]
    assert response.content == "All read now."
    assert response.completion_tokens == request.completion_tokens


def test_a_cost_that_is_not_a_finite_number_is_unknown() -> None:
    from traces.llm import _known

    assert _known(float("nan")) is None
    assert _known(float("inf")) is None
    assert _known("not a number") is None
    assert _known(0) is None  # zero means no price known, as litellm reports it
    assert _known(0.0125) == 0.0125


# --- litellm's own HTTP handler for OpenAI-compatible endpoints (issue 18, tuned) --------


def test_litellms_direct_http_handler_gives_the_same_replies(llm: ScriptedLLM, monkeypatch: Any) -> None:
    """EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER (litellm's switch, documented in the README's
    density section as a tuning) skips the OpenAI SDK: plain, streamed and tool-call replies
    and a retried rate limit come out as through the SDK."""
    calls = [ToolCall("read", {"path": "a.txt"}, id="call_a")]
    replies = [Reply(text="It says hello.", tool_calls=calls)]

    def ask(stream: bool) -> Any:
        llm.script("scripted", [Reply(status=429, headers={"retry-after": "0"}), *replies])
        return LLMClient(retries=1)(USER, model=agent_model(), tools=[READ_TOOL], stream=stream)

    through_sdk = [ask(False), ask(True)]
    monkeypatch.setenv("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER", "true")
    direct = [ask(False), ask(True)]

    for sdk, own in zip(through_sdk, direct, strict=True):
        assert (own.content, own.tool_calls, own.finish_reason, own.streamed) == (
            sdk.content,
            sdk.tool_calls,
            sdk.finish_reason,
            sdk.streamed,
        )
        assert (own.prompt_tokens, own.completion_tokens) == (sdk.prompt_tokens, sdk.completion_tokens)
    assert [request.status for request in llm.requests] == [429, 200] * 4
    # the first four went through the OpenAI SDK, the last four did not
    stainless = ["x-stainless-lang" in request.headers for request in llm.requests]
    assert stainless == [True] * 4 + [False] * 4


def test_a_stream_without_the_providers_usage_still_counts_tokens(llm: ScriptedLLM) -> None:
    """A server that ignores stream_options.include_usage: litellm's stream wrapper counts the
    tokens itself, and the folded reply (traces/llm_stream.py) keeps its count."""
    llm.script("scripted", [Reply(text="It says hello there.", stream_usage=False)])

    response = LLMClient()(USER, model=agent_model(), stream=True)

    assert response.content == "It says hello there."
    assert response.prompt_tokens > 0 and response.completion_tokens > 0

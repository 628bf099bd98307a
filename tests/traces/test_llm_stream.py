"""Folding a streamed reply (traces/llm_stream.py) from litellm's own chunk objects; the
wire-level streams (OpenAI and Anthropic formats through litellm) are in test_llm.py."""

from __future__ import annotations

from litellm.types.utils import Delta, ModelResponseStream, StreamingChoices, Usage

from traces.llm_stream import StreamedReply, price


def chunk(
    delta: dict | None = None, finish: str | None = None, usage: Usage | None = None
) -> ModelResponseStream:
    choices = [] if delta is None else [StreamingChoices(index=0, delta=Delta(**delta), finish_reason=finish)]
    made = ModelResponseStream(model="m-1", choices=choices)
    if usage is not None:
        made.usage = usage
    return made


def test_text_reasoning_and_indexed_tool_call_pieces_are_joined_in_order():
    reply = StreamedReply()
    pieces = [
        chunk({"reasoning_content": "Think "}),
        chunk({"reasoning_content": "first."}),
        chunk({"content": "Reading "}),
        chunk({"content": "both."}),
        chunk({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "read", "arguments": '{"p'}}]}),
        chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "list", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '": 1}'}}]}),
        chunk({}, finish="tool_calls"),
        chunk(None, usage=Usage(prompt_tokens=7, completion_tokens=5)),
    ]
    seen = [reply.add(piece) for piece in pieces]

    assert [text for text, _ in seen[2:4]] == ["Reading ", "both."]
    assert [alive for _, alive in seen] == [True, True, False, False, True, True, True, False, False]
    assert (reply.content, reply.reasoning_content, reply.finish_reason) == (
        "Reading both.",
        "Think first.",
        "tool_calls",
    )
    assert reply.tool_calls == [
        {"id": "a", "type": "function", "function": {"name": "list", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "read", "arguments": '{"p": 1}'}},
    ]
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (7, 5)
    assert (reply.model, reply.chunks) == ("m-1", 9)


def test_whole_calls_without_an_index_each_start_a_call():
    reply = StreamedReply()
    reply.add(chunk({"tool_calls": [{"id": "x", "function": {"name": "a", "arguments": "{}"}}]}))
    reply.add(chunk({"tool_calls": [{"id": "y", "function": {"name": "b", "arguments": '{"k": 2}'}}]}))

    assert [(c["id"], c["function"]["name"]) for c in reply.tool_calls] == [("x", "a"), ("y", "b")]
    assert reply.content is None and reply.usage is None


def test_a_model_without_a_price_costs_nothing_known_and_a_priced_one_is_priced():
    usage = Usage(prompt_tokens=1000, completion_tokens=100)
    assert price("openai/not-a-model-anyone-prices", usage) is None
    assert price("openai/not-a-model-anyone-prices", usage) is None  # remembered, not looked up again
    assert (price("openai/gpt-4o-mini", usage) or 0) > 0
    assert price("openai/gpt-4o-mini", None) is None

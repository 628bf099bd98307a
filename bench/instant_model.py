"""An instant, scripted model for the benchmarks: no network, no thinking time.

The script reads the conversation: the last user message asks for "N tool steps";
the model calls the `note` tool until N tool results follow that message, then
answers in text. The same script drives three fronts:

- `instant_llm_call`: a plain `llm_call` for `AgentRunner` (no litellm at all);
- `InstantProvider`: a litellm custom provider (`litellm.custom_provider_map`), so
  the real `traces.llm.LLMClient` runs its whole path minus the HTTP hop;
- the LangGraph fake chat model in `bench/vs_langgraph.py`.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

PROVIDER = "agentsite-bench"
MODEL = f"{PROVIDER}/instant"
TOOL_NAME = "note"
_STEPS = re.compile(r"(\d+) tool steps")


def task_message(steps: int) -> str:
    return f"Run {steps} tool steps with the note tool, then answer in one line."


def steps_requested(text: str) -> int:
    match = _STEPS.search(text or "")
    return int(match.group(1)) if match else 0


def next_move(roles_and_text: list[tuple[str, str]]) -> tuple[str | None, dict[str, Any] | None]:
    """(text, None) for the final answer or (None, tool_call) for the next step.

    `roles_and_text` is the conversation as (role, text) pairs; only its tail
    after the last user message is read, so the cost does not grow with history.
    """
    done = 0
    steps = 0
    for role, text in reversed(roles_and_text):
        if role == "user":
            steps = steps_requested(text)
            break
        if role == "tool":
            done += 1
    if done >= steps:
        return f"Done: {done} tool steps.", None
    call = {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": TOOL_NAME, "arguments": json.dumps({"text": f"step {done + 1}"})},
    }
    return None, call


def _openai_pairs(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    # Walk back only to the last user message: the script never needs more.
    tail: list[tuple[str, str]] = []
    for message in reversed(messages):
        content = message.get("content")
        tail.append((message.get("role", ""), content if isinstance(content, str) else ""))
        if message.get("role") == "user":
            break
    tail.reverse()
    return tail


def instant_llm_call(
    messages: list[dict[str, Any]],
    *,
    model: Any,
    tools: list[dict[str, Any]] | None = None,
    params: dict[str, Any] | None = None,
    stream: bool = False,
    on_token: Callable[[str], None] | None = None,
) -> Any:
    """An `llm_call` for AgentRunner that answers at once, without litellm."""
    from traces.llm import LLMResponse

    text, call = next_move(_openai_pairs(messages))
    return LLMResponse(
        content=text,
        tool_calls=[call] if call else [],
        finish_reason="tool_calls" if call else "stop",
        prompt_tokens=20,
        completion_tokens=5,
        model=MODEL,
    )


def register_litellm_provider() -> None:
    """Make `agentsite-bench/<anything>` answer through `InstantProvider`."""
    import litellm

    handler = _provider_class()()
    litellm.custom_provider_map = [
        *(p for p in litellm.custom_provider_map if p["provider"] != PROVIDER),
        {"provider": PROVIDER, "custom_handler": handler},
    ]


def _provider_class() -> type:
    import litellm
    from litellm.types.utils import ChatCompletionMessageToolCall, Choices, Function, Usage
    from litellm.types.utils import Message as LiteLLMMessage

    class InstantProvider(litellm.CustomLLM):
        """litellm custom provider returning the scripted reply as a ModelResponse."""

        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:
            text, call = next_move(_openai_pairs(messages))
            tool_calls = None
            if call is not None:
                function = Function(name=call["function"]["name"], arguments=call["function"]["arguments"])
                tool_calls = [
                    ChatCompletionMessageToolCall(id=call["id"], type="function", function=function)
                ]
            response = kwargs["model_response"]
            response.choices = [
                Choices(
                    index=0,
                    finish_reason="tool_calls" if call else "stop",
                    message=LiteLLMMessage(role="assistant", content=text, tool_calls=tool_calls),
                )
            ]
            response.model = model
            response.usage = Usage(prompt_tokens=20, completion_tokens=5, total_tokens=25)
            return response

    return InstantProvider

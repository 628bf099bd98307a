"""Messages of a run: new ones, healed tool calls (R6), and sanitised histories (G2)."""

from __future__ import annotations

from typing import Any

import traces.runner.compaction as compaction
from traces import prompts
from traces.llm import LLMResponse
from traces.models import Message, MessageKind
from traces.runner.compaction import PathInfo
from traces.runner.extensions import extensions
from traces.runner.state import RunState
from traces.runner.tool_call import ToolCall


def describe_assistant(response: LLMResponse) -> str:
    if response.tool_calls:
        return "calls " + ", ".join(c["function"]["name"] or "?" for c in response.tool_calls)
    return " ".join((response.content or "").split())[:200]


def heal_message(call: dict[str, Any], run: RunState) -> Message:
    """R6: a persisted synthetic result for a tool call that never got one."""
    name = ToolCall.of(call).name
    healed = next((text for healer in extensions.healers if (text := healer(run.trace, call))), None)
    return new_message(
        run,
        role="tool",
        tool_call_id=call.get("id"),
        name=name or None,
        content=healed or prompts.INTERRUPTED_TOOL_RESULT,
        kind=MessageKind.HEALED,
        description=f"healed: {name} was interrupted",
        goal_id=run.trace.current_goal_id,
    )


def new_message(run: RunState, **fields: Any) -> Message:
    """An unsaved message taking the trace's next sequence."""
    sequence = run.store.next_sequence()
    return Message(
        message_id=Message.make_id(run.trace.trace_id, sequence),
        trace_id=run.trace.trace_id,
        sequence=sequence,
        **fields,
    )


def sanitize_history_with_infos(
    pairs: list[tuple[dict[str, Any], PathInfo]],
) -> tuple[list[dict[str, Any]], list[PathInfo]]:
    """`sanitize_history` keeping each message's PathInfo beside it."""
    messages = [data for data, _ in pairs]
    by_id = {id(data): info for data, info in pairs}
    clean = sanitize_history(messages)
    infos = [
        by_id.get(id(data)) or PathInfo(None, None, "placeholder", compaction.estimate_tokens(data))
        for data in clean
    ]
    return clean, infos


def sanitize_history(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """G2 at load: drop tool rows with no matching call; placeholder results for
    calls left unanswered in the middle of the path (the tail is healed for real)."""
    out: list[dict[str, Any]] = []
    open_ids: dict[str, str] = {}
    for message in messages:
        if message["role"] == "tool":
            if message.get("tool_call_id") not in open_ids:
                continue
            open_ids.pop(message["tool_call_id"])
        else:
            if open_ids and message["role"] != "tool":
                for call_id, name in open_ids.items():
                    out.append(
                        {
                            "role": "tool",
                            "tool_call_id": call_id,
                            "name": name,
                            "content": prompts.INTERRUPTED_TOOL_RESULT,
                        }
                    )
                open_ids = {}
            for call in message.get("tool_calls") or ():
                open_ids[call.get("id")] = ToolCall.name_of(call)
        out.append(message)
    return out

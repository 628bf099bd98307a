"""The conversation of a page of a path: tool results folded under their call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from traces.models import Message

MARKED_KINDS = {"context", "healed", "summary", "loop_warning", "reflect", "tool_error"}


@dataclass
class ToolCallView:
    id: str
    name: str
    arguments: Any
    result: Message | None = None


@dataclass
class Entry:
    """One row of the conversation: a message, with its tool calls and their results."""

    message: Message
    calls: list[ToolCallView] = field(default_factory=list)

    @property
    def injected(self) -> bool:
        return (
            self.message.role == "system" and self.message.sequence > 1 or self.message.kind in MARKED_KINDS
        )


def conversation(path: list[Message]) -> list[Entry]:
    """The main path as a conversation: tool results folded under the call that asked for them."""
    entries: list[Entry] = []
    open_calls: dict[str, ToolCallView] = {}
    for message in path:
        if message.role == "tool" and message.tool_call_id in open_calls:
            open_calls.pop(message.tool_call_id).result = message
            continue
        entry = Entry(message)
        for call in message.tool_calls or []:
            function = call.get("function") or {}
            view = ToolCallView(
                id=str(call.get("id") or ""),
                name=str(function.get("name") or "?"),
                arguments=function.get("arguments"),
            )
            entry.calls.append(view)
            open_calls[view.id] = view
        entries.append(entry)
    return entries

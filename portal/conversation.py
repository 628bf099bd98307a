"""Reads that shape a trace for its page: the conversation and the message tree."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from portal.templatetags.portal import gist
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


@dataclass
class TreeRow:
    sequence: int
    role: str
    kind: str
    gist: str
    depth: int
    on_path: bool
    is_head: bool
    fork: bool


def message_tree(messages: list[Message], path_sequences: set[int], head: int) -> list[TreeRow]:
    """Every message in tree order; depth grows only where the tree forks, so linear runs stay flat."""

    children: dict[int | None, list[Message]] = defaultdict(list)
    known = {m.sequence for m in messages}
    for message in messages:
        parent = message.parent_sequence if message.parent_sequence in known else None
        children[parent].append(message)
    rows: list[TreeRow] = []
    stack: list[tuple[Message, int]] = [(m, 0) for m in reversed(children[None])]
    while stack:
        message, depth = stack.pop()
        kids = children.get(message.sequence, [])
        rows.append(
            TreeRow(
                sequence=message.sequence,
                role=message.role,
                kind=message.kind,
                gist=gist(message.content if message.content else message.description, 70),
                depth=depth,
                on_path=message.sequence in path_sequences,
                is_head=message.sequence == head,
                fork=len(kids) > 1,
            )
        )
        child_depth = depth + 1 if len(kids) > 1 else depth
        stack.extend((kid, child_depth) for kid in reversed(kids))
    return rows


def branch_tips(messages: list[Message], head: int) -> list[Message]:
    """The head and every message nothing hangs from (the end of each branch), newest first."""
    parents = {m.parent_sequence for m in messages}
    tips = [m for m in messages if m.sequence not in parents or m.sequence == head]
    return sorted(tips, key=lambda m: (m.sequence != head, -m.sequence))

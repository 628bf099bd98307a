"""The `check_messages` tool (S4): read messages other agents sent to this trace."""

from __future__ import annotations

import json

from tools.registry import tool
from traces.collaboration.inbox import inbox_take_unread
from traces.runner.tool_api import ToolContext, ToolResult


@tool(inline=True)
def check_messages(ctx: ToolContext) -> ToolResult:
    """Read the new messages other agents sent you (each is shown once, then marked read).

    Reply through your own tools or in your answer; the sender and conversation
    id tell you who wrote and in which exchange.
    """
    messages = inbox_take_unread(trace_id=ctx.trace.trace_id)
    if not messages:
        return ToolResult(title="No new messages")
    lines = []
    for index, message in enumerate(messages, start=1):
        content = message.content if isinstance(message.content, str) else json.dumps(message.content)
        conversation = f" (conversation {message.conversation_id})" if message.conversation_id else ""
        lines.append(
            f"{index}. From {message.from_agent_id}{conversation}, {message.created_at:%Y-%m-%d %H:%M} UTC:"
        )
        lines.append(f"   {content}")
    return ToolResult(
        title=f"{len(messages)} new message{'s' if len(messages) != 1 else ''}",
        output="\n".join(lines),
        metadata={"message_ids": [m.pk for m in messages]},
    )

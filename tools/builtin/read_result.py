"""The `read_result` tool (seed 001 layer 2): a tool result of this trace that a stub stands for."""

from __future__ import annotations

import json

from tools.registry import tool
from traces.models import MessageKind
from traces.runner.tool_api import ToolContext, ToolError, ToolResult
from traces.selectors import trace_messages


@tool(inline=True)
def read_result(ctx: ToolContext, sequence: int) -> ToolResult:
    """Show again an earlier tool result that was stubbed to save context.

    A stub reads "[stubbed to save context: ... (message N); read_result(sequence=N) ...]".
    The result is shown once: afterwards it is a stub again, so read it when you need it
    and note what matters.

    Args:
        sequence: The message number the stub names.
    """
    message = (
        trace_messages(trace_id=ctx.trace.trace_id)
        .filter(sequence=sequence, role="tool")
        .only("sequence", "name", "kind", "content", "description")
        .first()
    )
    if message is None:
        raise ToolError(f"message {sequence} is not a tool result of this trace")
    if message.kind == MessageKind.ONCE:
        # C3: an output meant to be seen once is not shown again, only what it left behind
        return ToolResult(
            title=f"Result {sequence}", output=f"That output was shown once; it left: {message.description}"
        )
    content = message.content if isinstance(message.content, str) else json.dumps(message.content)
    tool_name = message.name or "tool"
    return ToolResult(
        title=f"Result {sequence} ({tool_name})",
        output=content,
        long_term_memory=f"read_result showed message {sequence} ({tool_name}, {len(content):,} characters)",
        include_output_only_once=True,
    )

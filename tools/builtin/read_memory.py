"""The `read_memory` tool: a memory note's full body, on demand (M8)."""

from __future__ import annotations

from memory.entries.selectors import Scope, memory_entries_find
from tools.registry import tool
from traces.runner.tool_api import ToolContext, ToolError, ToolResult


@tool(inline=True, risk="safe", read_only=True)
def read_memory(ctx: ToolContext, ref: str) -> ToolResult:
    """Read the full body of one of your memory notes, by the id or the name the memory index shows.

    Args:
        ref: The note's id (like 12 or #12) or its name (any case).
    """
    if not ref.strip():
        raise ToolError("give the id or the name of a note from the memory index")
    found = memory_entries_find(Scope.of_trace(ctx.trace), ref)
    if not found:
        raise ToolError(f"no memory note has the id or name {ref.strip()!r}; the memory index lists them")
    bodies = [
        f"#{e.pk} {e.type}/{e.name} (saved {e.saved_at:%Y-%m-%d})"
        + (f"\n{e.description}" if e.description else "")
        + f"\n\n{e.content}"
        for e in found
    ]
    return ToolResult(
        title=f"Memory #{found[0].pk}" if len(found) == 1 else f"{len(found)} memory notes",
        output="\n\n---\n\n".join(bodies),
    )

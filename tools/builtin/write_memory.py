"""The `write_memory` tool: the agent saves a note about its user or project (M8)."""

from __future__ import annotations

from memory.entries.gate import Draft, MemoryRefused
from memory.entries.selectors import Scope
from memory.entries.services import memory_entry_write
from tools.registry import tool
from traces.runner.tool_api import ToolContext, ToolError, ToolResult


@tool(inline=True, risk="safe", read_only=False)
def write_memory(
    ctx: ToolContext,
    type: str,
    name: str,
    content: str,
    description: str = "",
    keywords: list[str] | None = None,
) -> ToolResult:
    """Save a note for your future runs with this user: who they are, what they corrected, project decisions.

    Only what cannot be found again by reading the workspace: no code, no file paths, no git
    commands. Writing the same type and name again replaces that note (the name is matched
    ignoring case). The memory index lists every note's name and description in each request.

    Args:
        type: "user" (their role, preferences, environment), "feedback" (a correction or a lesson),
            "project" (a fact or decision about the project) or "reference" (where to look something up).
        name: A short, unique name for the note, e.g. "prefers terse answers".
        content: The note itself. Feedback and project notes need three lines, "Rule: ...",
            "Why: ..." and "How to apply: ..."; project notes give absolute dates (2026-03-01), never
            "yesterday" or "last week".
        description: One line saying when the note is relevant; it is what the index shows.
        keywords: A few words to find the note by.
    """
    draft = Draft(type=type, name=name, description=description, keywords=keywords or [], content=content)
    try:
        entry, created = memory_entry_write(
            scope=Scope.of_trace(ctx.trace), draft=draft, trace_id=ctx.trace_id
        )
    except MemoryRefused as refused:
        raise ToolError(f"memory not saved: {refused}") from None
    action = "Saved" if created else "Replaced"
    return ToolResult(
        title=f"{action} memory #{entry.pk}",
        output=f"{action} the {entry.type} note {entry.name!r} (#{entry.pk}, saved {entry.saved_at:%Y-%m-%d}).",
    )

"""The `skill` tool: load a skill's instructions on demand (M6)."""

from __future__ import annotations

from memory.skills import UnknownSkill, get_skill
from tools.registry import tool
from traces.runner.tool_api import ToolError, ToolResult


@tool()
def skill(name: str) -> ToolResult:
    """Load a skill: instructions for a kind of work (e.g. "files", "shell", "research").

    Call it when a listed skill fits what you are about to do, then follow what it says.

    Args:
        name: The skill's name, as listed in your instructions.
    """
    try:
        found = get_skill(name.strip())
    except UnknownSkill as exc:
        raise ToolError(str(exc)) from None
    return ToolResult(
        title=f"Skill: {found.name}",
        output=found.as_prompt(),
        long_term_memory=f"Loaded skill {found.name}: {found.description}",
    )

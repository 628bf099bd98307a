"""The `skill` tool: load a skill's instructions on demand (M6)."""

from __future__ import annotations

from pathlib import Path

from memory.skills import UnknownSkill, get_skill, project_skill_dirs
from tools.registry import tool
from traces.projects import place
from traces.runner.tool_api import ToolContext, ToolError, ToolResult


@tool()
def skill(ctx: ToolContext, name: str) -> ToolResult:
    """Load a skill: instructions for a kind of work (e.g. "files", "shell", "research").

    Call it when a listed skill fits what you are about to do, then follow what it says.

    Args:
        name: The skill's name, as listed in your instructions.
    """
    try:
        found = get_skill(name.strip(), _workspace_dirs(ctx))
    except UnknownSkill as exc:
        raise ToolError(str(exc)) from None
    return ToolResult(
        title=f"Skill: {found.name}",
        output=found.as_prompt(),
        long_term_memory=f"Loaded skill {found.name}: {found.description}",
    )


def _workspace_dirs(ctx: ToolContext) -> list[Path]:
    """The run's project skill folders (none for a run in its own trace workspace)."""
    if ctx.project is None:
        return []
    try:
        placement = place(ctx.project)
    except ValueError:  # the project was removed or broke since the run started
        return []
    return project_skill_dirs(placement.root, placement.workspace)

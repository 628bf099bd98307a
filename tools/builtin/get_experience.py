"""The `get_experience` tool: lessons from earlier runs, on demand (M4)."""

from __future__ import annotations

from memory.retrieval import experience_search
from memory.services import note_retrieved
from tools.registry import tool
from traces.runner.tool_api import ToolContext, ToolError, ToolResult


@tool(inline=True)
def get_experience(ctx: ToolContext, intent: str = "", state: str = "") -> ToolResult:
    """Look up expert-approved lessons from earlier runs that match what you want and where you are.

    Use it when a task looks familiar, when results are not what you expected, or when an
    approach keeps failing. Cite the id of each lesson you apply, like [ex_001].

    Args:
        intent: What you are trying to achieve, in a few words (e.g. "optimization", "debug flaky test").
        state: The situation or problem you are in (e.g. "docker build slow", "permission denied").
    """
    if not intent.strip() and not state.strip():
        raise ToolError("give an intent, a state, or both")
    found = experience_search(
        tags={"intent": [intent], "state": [state]},
        text=f"{intent} {state}",
        agent_type=ctx.trace.agent_type,
        user_id=ctx.trace.owner_id,
    )
    if not found:
        return ToolResult(title="No matching experiences", output="Nothing approved matches; go on without.")
    lines = [scored.experience.prompt_line() for scored in found]
    note_retrieved(ctx.trace, [scored.experience.code for scored in found])
    codes = ", ".join(scored.experience.code for scored in found)
    return ToolResult(
        title=f"{len(found)} experience(s)",
        output="\n".join(lines),
        long_term_memory=f"get_experience returned {codes}",
    )

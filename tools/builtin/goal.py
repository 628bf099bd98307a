"""The `goal` tool: the agent's own plan (seed 004 "Goal 操作")."""

from __future__ import annotations

from typing import Literal

from tools.registry import tool
from traces.goal_tree import GoalError
from traces.runner.tool_api import ToolContext, ToolError, ToolResult


@tool(inline=True)
def goal(
    action: Literal["add", "under", "after", "focus", "done", "abandon"],
    ctx: ToolContext,
    description: str = "",
    target: str = "",
    reason: str = "",
    summary: str = "",
) -> ToolResult:
    """Manage your plan: a tree of goals. Keep it current as you work.

    Actions:
    - add: add a top-level goal (`description`, optional `reason`); it is focused if nothing is.
    - under: add a sub-goal under `target` (default: the current goal).
    - after: add a goal right after `target` (default: the current goal), at the same level.
    - focus: make `target` the goal you are working on.
    - done: mark `target` (default: the current goal) completed with a `summary` of the result.
    - abandon: give up `target` (default: the current goal), with the `reason` in `summary`.
    Goals are named by the ids shown in the plan ("1", "2.1").

    Args:
        action: add, under, after, focus, done or abandon.
        description: What the new goal is (add, under, after).
        target: Id of the goal to act on, e.g. "2.1"; empty means the current goal.
        reason: Why the goal is needed (add, under, after).
        summary: Outcome of a finished goal (done) or why it was given up (abandon).
    """
    tree = ctx.goal_tree
    if tree is None:
        raise ToolError("this run has no goal tree")
    try:
        if action == "add":
            new = tree.add(description, reason=reason)
            if tree.current is None:
                tree.focus(new)
        elif action in ("under", "after"):
            anchor = tree.resolve(target)
            new = (
                tree.add(description, reason=reason, parent=anchor)
                if action == "under"
                else tree.add(description, reason=reason, after=anchor)
            )
            if tree.current is None:
                tree.focus(new)
        elif action == "focus":
            tree.focus(tree.resolve(target))
        elif action == "done":
            if not summary:
                raise ToolError("done needs a summary of what was achieved")
            tree.complete(tree.resolve(target), summary)
        elif action == "abandon":
            if not summary and not reason:
                raise ToolError("abandon needs the reason in summary")
            tree.abandon(tree.resolve(target), summary or reason)
        else:
            raise ToolError(f"unknown action {action!r}")
    except GoalError as exc:
        raise ToolError(str(exc)) from None
    current = tree.current
    focus = f"current goal: {tree.display_ids()[current.goal_id]}" if current else "no goal in focus"
    return ToolResult(title=f"goal {action}: ok ({focus})", output=tree.to_prompt())

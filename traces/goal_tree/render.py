"""How a goal tree reads: to the model (`plan_prompt`, the plan in its context) and
to the API, events and portal (`goal_dict`). `GoalTree.to_prompt` and
`GoalTree.goal_dict` call these."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traces.goal_tree.stats import goal_stats
from traces.models import CLOSED_GOAL_STATUSES, Goal, GoalStatus

if TYPE_CHECKING:
    from traces.goal_tree.tree import GoalTree

STATUS_MARK: dict[str, str] = {
    GoalStatus.PENDING: "pending",
    GoalStatus.IN_PROGRESS: "in_progress",
    GoalStatus.COMPLETED: "completed",
    GoalStatus.ABANDONED: "abandoned",
}


def goal_dict(tree: GoalTree, goal: Goal) -> dict[str, Any]:
    """The goal as the API, its events and the portal show it."""
    return {
        "id": goal.goal_id,
        "display_id": tree.display_ids().get(goal.goal_id),
        "description": goal.description,
        "reason": goal.reason,
        "parent_id": goal.parent_id,
        "type": goal.type,
        "status": goal.status,
        # How the last run ended while this goal was open (None: not left open).
        "left_open": goal.left_open or None,
        "summary": goal.summary,
        "sub_trace_ids": goal.sub_trace_ids,
        "sub_trace_metadata": goal.sub_trace_metadata,
        "agent_call_mode": goal.agent_call_mode,
        "self_stats": goal_stats(goal.self_stats),
        "cumulative_stats": goal_stats(goal.cumulative_stats),
        "created_at": goal.created_at.isoformat(),
    }


def plan_prompt(tree: GoalTree, *, include_summary: bool = False) -> str:
    """The plan as the model reads it.

    The compact view (default) shows every goal with its status and the
    current focus; `include_summary=True` adds the summaries of closed goals
    (used when compacting context).
    """
    lines = []
    if tree.trace.task:
        lines.append(f"Mission: {tree.trace.task.strip().splitlines()[0][:300]}")
    for display, goal in tree.walk():
        depth = display.count(".")
        marker = "  <- current" if goal.goal_id == tree.current_id else ""
        lines.append(f"{'  ' * depth}{display}. [{STATUS_MARK[goal.status]}] {goal.description}{marker}")
        if include_summary and goal.summary and goal.status in CLOSED_GOAL_STATUSES:
            lines.append(f"{'  ' * (depth + 1)}summary: {goal.summary}")
    if not tree.goals:
        lines.append("(no goals yet)")
    elif tree.current is None:
        lines.append("No goal is in focus: use goal(action='focus', target=...) or add one.")
    return "\n".join(lines)

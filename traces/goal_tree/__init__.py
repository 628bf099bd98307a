"""The goal tree: the agent's plan (`tree.py:GoalTree`), its figures (`stats.py`)
and how it reads to the model and the API (`render.py`)."""

from __future__ import annotations

from traces.goal_tree.render import STATUS_MARK
from traces.goal_tree.stats import EMPTY_STATS
from traces.goal_tree.tree import CLOSED, FLUSHED_FIELDS, STATS_FLUSH_SECONDS, Emit, GoalError, GoalTree

__all__ = [
    "CLOSED",
    "EMPTY_STATS",
    "FLUSHED_FIELDS",
    "STATS_FLUSH_SECONDS",
    "STATUS_MARK",
    "Emit",
    "GoalError",
    "GoalTree",
]

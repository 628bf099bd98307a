"""Strategies (R11): Router, Planner with synthesis, Reflexion; the loop calls into them.

select.py     Strategies._answer: the run's strategy (react, routed, plan_execute)
router.py     classify (one utility-model call), Router._route / _direct
planner.py    parse_plan, Planner._make_plan / _execute_plan / _synthesize
reflexion.py  Reflexion._self_critique (called by loop.py:_react after a failed call)
"""

from __future__ import annotations

from traces.runner.strategies.reflexion import MAX_LESSONS, Lesson, lessons_section
from traces.runner.strategies.router import ROUTES
from traces.runner.strategies.select import PLAN_EXECUTE, REACT, ROUTED, STRATEGIES, Strategies

__all__ = [
    "MAX_LESSONS",
    "PLAN_EXECUTE",
    "REACT",
    "ROUTED",
    "ROUTES",
    "STRATEGIES",
    "Lesson",
    "Strategies",
    "lessons_section",
]

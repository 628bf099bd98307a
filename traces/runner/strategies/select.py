"""Which strategy answers a run's request (R11), chosen by the run's stored settings.

`react` (the default) is the ReAct loop; `routed` asks the Router (router.py)
whether to answer directly, run the loop or plan; `plan_execute` always plans
(planner.py). A run with no new request (a resume after an approval, a rewind
into a plan) takes up the trace's open plan, else runs the loop. Reflexion
(reflexion.py) is a flag any of them may use.
"""

from __future__ import annotations

from collections.abc import Generator

from traces.models import Message
from traces.runner.prepare import text_of
from traces.runner.run_settings import STRATEGIES
from traces.runner.state import RunState, StepEnd
from traces.runner.strategies.planner import Planner
from traces.runner.strategies.reflexion import Reflexion
from traces.runner.strategies.router import DIRECT, PLAN_REQUIRED, Router

REACT, ROUTED, PLAN_EXECUTE = STRATEGIES


def new_request(run: RunState) -> str | None:
    """The user's request this run answers: the last user message when no assistant
    reply follows it on the path; None for a run that goes on with older work."""
    for data in reversed(run.llm_messages):
        if data["role"] == "assistant":
            return None
        if data["role"] == "user":
            return text_of(data.get("content"))
    return None


class Strategies(Router, Planner, Reflexion):
    """AgentRunner's strategies (a mixin; `self` is the AgentRunner)."""

    def _answer(self, run: RunState) -> Generator[Message, None, StepEnd]:
        """Answer the run's request with its strategy; how that ended (loop.py:_end acts on it)."""
        chosen = run.trace.run_settings or {}
        run.strategy = chosen.get("strategy") or REACT
        run.reflexion = bool(chosen.get("reflexion"))
        if run.strategy == REACT:
            return (yield from self._react(run, run.max_iterations))
        request = new_request(run)
        if request is None:
            plan = self._open_plan(run)
            if plan is not None:
                return (yield from self._execute_plan(run, plan))
            return (yield from self._react(run, run.max_iterations))
        route = PLAN_REQUIRED if run.strategy == PLAN_EXECUTE else self._route(run, request)
        if route == DIRECT:
            return (yield from self._direct(run))
        if route == PLAN_REQUIRED:
            return (yield from self._plan_and_execute(run, request))
        return (yield from self._react(run, run.max_iterations))

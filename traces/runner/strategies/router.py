"""The Router (R11, seed 001's family I): one utility-model call classifies a request.

DIRECT is answered by one model call offered no tool, SIMPLE_TOOL runs the ReAct
loop, PLAN_REQUIRED the Planner (planner.py). A failed call or an unusable answer
falls back to SIMPLE_TOOL, and the decision's reason says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from traces.llm import LLMError, LLMResponse, ModelNotConfigured, utility_model
from traces.models import Message
from traces.runner.base import RunnerBase
from traces.runner.state import RunState, StepEnd
from traces.runner.strategies.parsing import json_object
from traces.runner.strategies.prompts import ROUTE_PROMPT
from traces.storable import without_nul

logger = logging.getLogger(__name__)

DIRECT, SIMPLE_TOOL, PLAN_REQUIRED = "DIRECT", "SIMPLE_TOOL", "PLAN_REQUIRED"
ROUTES = (DIRECT, SIMPLE_TOOL, PLAN_REQUIRED)


class _RouteAnswer(BaseModel):
    route: Literal["DIRECT", "SIMPLE_TOOL", "PLAN_REQUIRED"]
    reason: str = ""


@dataclass(frozen=True)
class RouteDecision:
    route: str
    reason: str
    fallback: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"route": self.route, "reason": self.reason, "fallback": self.fallback}


def classify(call: Callable[..., LLMResponse], request: str, tools: list[str]) -> RouteDecision:
    """The route for `request`, from one utility-model call; SIMPLE_TOOL when it fails."""
    prompt = ROUTE_PROMPT.format(tools=", ".join(tools) or "none", request=request[:4000])
    try:
        response = call(
            [{"role": "user", "content": prompt}], model=utility_model(), params={"max_tokens": 200}
        )
    except (LLMError, ModelNotConfigured) as exc:
        logger.info("routing failed: %s", exc)
        return RouteDecision(SIMPLE_TOOL, f"router call failed ({exc}); fell back to SIMPLE_TOOL", True)
    try:
        answer = _RouteAnswer.model_validate(json_object(response.content))
    except (ValueError, ValidationError) as exc:
        gist = " ".join(str(exc).split())[:200]
        return RouteDecision(SIMPLE_TOOL, f"router answer unusable ({gist}); fell back to SIMPLE_TOOL", True)
    return RouteDecision(answer.route, without_nul(answer.reason.strip())[:500] or "(no reason given)")


class Router(RunnerBase):
    """AgentRunner's routing steps (a mixin; `self` is the AgentRunner)."""

    def _route(self, run: RunState, request: str) -> str:
        """Classify `request`: a `route_decided` event, noted on the trace for the portal."""
        decision = classify(self.utility_llm_call, request, [t.name for t in run.tools])
        run.store.emit("route_decided", decision.as_dict())
        run.trace.context["route"] = decision.as_dict()
        run.store.commit()
        return decision.route

    def _direct(self, run: RunState) -> Generator[Message, None, StepEnd]:
        """DIRECT: one model call offered no tool; its text is the answer."""
        run.iterations += 1
        run.store.emit("round_start", {"iteration": 0, "round": 1, "max_rounds": 1, "route": DIRECT})
        try:
            response = self._call_model(run, self._request(run), offer_tools=False)
        except LLMError as exc:
            return StepEnd("error", str(exc))
        if response is None:
            return StepEnd("stopped")
        yield self._persist_assistant(run, replace(response, tool_calls=[]))
        if not (response.content or "").strip():
            return (yield from self._react(run, run.max_iterations))  # nothing said: the tools may help
        return StepEnd("answered", response.content or "")

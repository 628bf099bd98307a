"""The Planner (R11, seed 001's family D): plan, run each step focused on its goal, synthesize.

One model call makes an ordered plan (JSON, validated; one retry, then the run
falls back to ReAct). The plan becomes goals: a parent goal for the request and
one child per step, so the plan is visible, rewindable (R4) and its stats roll up.
Each step runs the ReAct loop bounded by `STEP_ITERATIONS`, focused on its goal; a
step that fails is abandoned with "[STEP i FAILED] ..." and the run goes on. A
final call, offered no tool, answers the request from the steps' results.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from traces.goal_tree import CLOSED
from traces.llm import LLMError
from traces.models import Goal, GoalStatus, Message, MessageKind
from traces.runner.base import RunnerBase
from traces.runner.state import RunState, StepEnd
from traces.runner.strategies import prompts
from traces.runner.strategies.parsing import json_object

MAX_STEPS = 8
STEP_ITERATIONS = 10  # ReAct iterations one plan step may take (at most the run's max_iterations)
FAILED_MARK = "[STEP FAILED]"


class PlanStep(BaseModel):
    description: str = Field(min_length=1, max_length=1000)


class Plan(BaseModel):
    steps: list[PlanStep] = Field(min_length=1, max_length=MAX_STEPS)


def parse_plan(text: str | None) -> Plan:
    """The plan in a model's answer; ValueError naming what is wrong."""
    try:
        plan = Plan.model_validate(json_object(text))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise ValueError(problems) from None
    if not all(step.description.strip() for step in plan.steps):
        raise ValueError("a step has an empty description")
    return plan


def step_failure(end: StepEnd, limit: int) -> str | None:
    """Why a step that ended as `end` failed; None when it succeeded."""
    if end.kind == "answered":
        text = end.text.strip()
        return (
            text[len(FAILED_MARK) :].strip() or "the agent gave up" if text.startswith(FAILED_MARK) else None
        )
    if end.kind == "limit":
        return f"no answer within {limit} iterations"
    if end.kind == "gave_up":
        return end.text
    return f"model call failed: {end.text}"


class Planner(RunnerBase):
    """AgentRunner's plan-and-execute steps (a mixin; `self` is the AgentRunner)."""

    def _plan_and_execute(self, run: RunState, request: str) -> Generator[Message, None, StepEnd]:
        record = yield from self._make_plan(run, request)
        if record is None:
            return (yield from self._react(run, run.max_iterations))
        return (yield from self._execute_plan(run, record))

    def _make_plan(self, run: RunState, request: str) -> Generator[Message, None, dict[str, Any] | None]:
        """Ask for a plan (one retry); its goals, or None when the run falls back to ReAct."""
        yield self._note(
            run,
            prompts.PLAN_PROMPT.format(limit=MAX_STEPS),
            kind=MessageKind.GUARD,
            description="plan: asking for a plan",
        )
        error = ""
        for attempt in (1, 2):
            run.iterations += 1
            try:
                response = self._call_model(run, self._request(run), offer_tools=False)
            except LLMError as exc:
                error = str(exc)
                break
            if response is None:
                return None  # stopped: the loop's first check ends the run
            response = replace(response, tool_calls=[])
            try:
                plan = parse_plan(response.content)
            except ValueError as exc:
                error = str(exc)
                yield self._persist_assistant(run, response)
                if attempt == 1:
                    retry = prompts.PLAN_RETRY.format(error=error)
                    yield self._note(run, retry, kind=MessageKind.GUARD, description="plan: malformed, retry")
                continue
            # The goals first: a rewind to the plan's message keeps them (R4 keeps goals made before the cut).
            record = self._plan_goals(run, plan, request, attempt)
            yield self._persist_assistant(run, response)
            return record
        run.store.emit("plan_failed", {"error": error, "fallback": "react"})
        yield self._note(
            run,
            f"No usable plan ({error}); work on the request directly.",
            kind=MessageKind.GUARD,
            description="plan failed: falling back to ReAct",
        )
        return None

    def _plan_goals(self, run: RunState, plan: Plan, request: str, attempts: int) -> dict[str, Any]:
        tree = run.goal_tree
        for goal in self._plan_steps(run):  # an earlier request's plan left open
            if goal.status not in CLOSED:
                tree.abandon(goal, "superseded by the plan of a new request")
        total = len(plan.steps)
        parent = tree.add(" ".join(request.split())[:300] or "The request", reason=f"plan of {total} steps")
        steps = [
            tree.add(step.description, reason=f"plan step {index} of {total}", parent=parent)
            for index, step in enumerate(plan.steps, 1)
        ]
        tree.focus(parent)
        record = {"goal_id": parent.goal_id, "steps": [g.goal_id for g in steps], "request": request[:4000]}
        run.trace.context["plan"] = record
        run.store.emit(
            "plan_made",
            {"goal_id": parent.goal_id, "steps": [s.description for s in plan.steps], "attempts": attempts},
        )
        return record

    def _plan_steps(self, run: RunState) -> list[Goal]:
        """The step goals of the trace's plan that still exist (a rewind may have dropped some)."""
        record = (run.trace.context or {}).get("plan") or {}
        return [run.goal_tree.goals[g] for g in record.get("steps", []) if g in run.goal_tree.goals]

    def _open_plan(self, run: RunState) -> dict[str, Any] | None:
        """The trace's plan when some of its steps are still open (a resumed or rewound run)."""
        if any(goal.status not in CLOSED for goal in self._plan_steps(run)):
            return dict(run.trace.context["plan"])
        return None

    def _execute_plan(self, run: RunState, record: dict[str, Any]) -> Generator[Message, None, StepEnd]:
        tree = run.goal_tree
        steps = self._plan_steps(run)
        limit = min(run.max_iterations, STEP_ITERATIONS)
        resumed = tree.current_id  # a run resumed inside a step (after an approval) goes on with it
        for index, goal in enumerate(steps, 1):
            if goal.status in CLOSED:
                continue
            if goal.goal_id != resumed:
                tree.focus(goal)
                run.step_lessons = 0
                description = f"plan step {index}/{len(steps)}: {goal.description}"[:200]
                text = prompts.STEP_PROMPT.format(index=index, total=len(steps), description=goal.description)
                yield self._note(run, text, kind=MessageKind.GUARD, description=description)
            resumed = None
            end = yield from self._react(run, limit)
            if end.kind in ("stopped", "ended"):
                return end
            self._close_step(run, goal, index, step_failure(end, limit), end.text)
        return (yield from self._synthesize(run, record, steps))

    def _close_step(self, run: RunState, goal: Goal, index: int, failure: str | None, answer: str) -> None:
        # The closing belongs to the step's last message: a rewind to exactly it keeps the step closed.
        last = run.trace.head_sequence
        if goal.status not in CLOSED:  # the agent may have closed it itself (the goal tool)
            if failure is None:
                run.goal_tree.complete(goal, answer.strip()[:2000] or "done", at_sequence=last)
            else:
                run.goal_tree.abandon(goal, f"[STEP {index} FAILED] {failure}"[:2000], at_sequence=last)
        run.store.emit(
            "plan_step_ended",
            {"index": index, "goal_id": goal.goal_id, "status": goal.status, "summary": goal.summary},
        )
        run.store.commit()

    def _synthesize(
        self, run: RunState, record: dict[str, Any], steps: list[Goal]
    ) -> Generator[Message, None, StepEnd]:
        """The final answer from the steps' results, failed steps marked [STEP i FAILED]."""
        lines = []
        for index, goal in enumerate(steps, 1):
            summary = goal.summary or ""
            if goal.status == GoalStatus.ABANDONED:
                mark = (
                    summary
                    if summary.startswith(f"[STEP {index} FAILED]")
                    else f"[STEP {index} FAILED] {summary}"
                )
                lines.append(f"{mark} (step: {goal.description})")
            else:
                lines.append(f"Step {index} ({goal.description}): {summary}")
        parent = run.goal_tree.goals.get(record.get("goal_id", ""))
        if parent is not None and parent.status not in CLOSED:
            run.goal_tree.focus(parent)
        text = prompts.SYNTHESIS_PROMPT.format(results="\n".join(lines), request=record.get("request", ""))
        yield self._note(run, text, kind=MessageKind.GUARD, description="plan: synthesis")
        run.iterations += 1
        try:
            response = self._call_model(run, self._request(run), offer_tools=False)
        except LLMError as exc:
            return StepEnd("error", str(exc))
        if response is None:
            return StepEnd("stopped")
        yield self._persist_assistant(run, replace(response, tool_calls=[]))
        failed = sum(goal.status == GoalStatus.ABANDONED for goal in steps)
        if parent is not None and parent.status not in CLOSED:
            summary = f"{len(steps) - failed} of {len(steps)} steps done"
            run.goal_tree.complete(parent, summary, at_sequence=run.trace.head_sequence)
        return StepEnd("answered", response.content or "")

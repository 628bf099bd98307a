"""Reflexion (R11, seed 001's family E): a self-critique and a retry after a failed tool call.

When a step's tool call fails, one model call (offered no tool) critiques it as
{what_went_wrong, lesson, retry_plan}; the exchange is a side branch of the trace
(kind `reflect`, off the main path), the lesson a note on the main path that the
loop's next iteration (the retry) reads, and it stays in every later context
injection of the run (context.py). Each lesson is handed to the `on_lesson`
extensions (memory saves it as a draft experience with the failing call as
evidence), deferred into the run's next fenced commit. A step gets
`MAX_LESSONS`; the next failure gives it up.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from django.utils import timezone
from pydantic import BaseModel, Field, ValidationError

from traces.llm import LLMError, LLMResponse
from traces.models import Message, MessageKind
from traces.runner.base import RunnerBase
from traces.runner.extensions import extensions
from traces.runner.history import new_message
from traces.runner.state import RunState
from traces.runner.strategies import prompts
from traces.runner.strategies.parsing import json_object

MAX_LESSONS = 3  # per step


class Critique(BaseModel):
    what_went_wrong: str = Field(min_length=1, max_length=2000)
    lesson: str = Field(min_length=1, max_length=1000)
    retry_plan: str = Field(default="", max_length=2000)


@dataclass(frozen=True)
class Lesson:
    """A lesson as the `on_lesson` extensions get it."""

    critique: Critique
    tool: str
    evidence: dict[str, Any]  # {"trace_id", "messages": [{"sequence", "message_id"}], "reflexion": {...}}


def lessons_section(lessons: list[str]) -> str:
    """The lessons of a run as a part of its context injection."""
    return prompts.LESSONS_SECTION.format(lessons="\n".join(f"- {lesson}" for lesson in lessons))


class Reflexion(RunnerBase):
    """AgentRunner's self-critique step (a mixin; `self` is the AgentRunner)."""

    def _self_critique(
        self, run: RunState, assistant: Message, errors: list[Message]
    ) -> Generator[Message, None, str | None]:
        """Critique the failed calls and note the lesson; why the step gives up, or None to retry."""
        failing = errors[-1]
        if run.step_lessons >= MAX_LESSONS:
            return (
                f"gave up after {MAX_LESSONS} Reflexion lessons; last error from {failing.name}: "
                + (" ".join((failing.content or "").split())[:300])
            )
        run.step_lessons += 1
        failures = "\n".join(f"- {m.name}: {' '.join((m.content or '').split())[:1000]}" for m in errors)
        prompt = prompts.CRITIQUE_PROMPT.format(failures=failures)
        question = self._side_message(run, role="user", content=prompt, parent=run.trace.head_sequence)
        try:
            response = self._call_model(
                run, [*self._request(run), {"role": "user", "content": prompt}], offer_tools=False
            )
        except LLMError as exc:
            run.store.emit("reflexion_failed", {"error": str(exc), "count": run.step_lessons})
            run.store.commit()
            return None  # the loop retries without a lesson
        if response is None:
            return None  # stopped: the loop's next check ends the run
        answer = self._side_message(
            run, role="assistant", content=response.content, parent=question.sequence, response=response
        )
        critique = _critique_of(response.content, failures)
        lesson = Lesson(
            critique=critique,
            tool=failing.name or "",
            evidence={
                "trace_id": run.trace.trace_id,
                "messages": [
                    {"sequence": m.sequence, "message_id": m.message_id} for m in (assistant, *errors)
                ],
                "reflexion": {"message_id": answer.message_id, "count": run.step_lessons},
            },
        )
        run.lessons.append(critique.lesson)
        run.store.emit(
            "reflexion_lesson",
            {
                **critique.model_dump(),
                "tool": lesson.tool,
                "count": run.step_lessons,
                "limit": MAX_LESSONS,
                "failed_sequence": failing.sequence,
                "critique_message_id": answer.message_id,
            },
        )
        for save in extensions.on_lesson:  # memory: a draft experience (memory/extensions.py)
            save(run.trace, lesson, run.store.defer)
        note = prompts.LESSON_NOTE.format(
            count=run.step_lessons, limit=MAX_LESSONS, tool=lesson.tool, **critique.model_dump()
        )
        yield self._note(
            run, note, kind=MessageKind.GUARD, description=f"reflexion lesson: {critique.lesson}"[:200]
        )
        return None

    def _side_message(
        self,
        run: RunState,
        *,
        role: str,
        content: str | None,
        parent: int,
        response: LLMResponse | None = None,
    ) -> Message:
        """A message of the critique's side branch: stored and counted, off the main path."""
        message = new_message(
            run,
            role=role,
            content=content,
            parent_sequence=parent or None,
            kind=MessageKind.REFLECT,
            description="reflexion: self-critique",
            goal_id=run.trace.current_goal_id,
        )
        message.created_at = timezone.now()
        if response is not None:
            message.prompt_tokens, message.completion_tokens = (
                response.prompt_tokens,
                response.completion_tokens,
            )
            message.cost, message.duration_ms = response.cost, response.duration_ms
            message.finish_reason = response.finish_reason
        run.store.add_message(message, move_head=False)
        if response is not None:
            self._model_replied(run, response, message)
        return message


def _critique_of(text: str | None, failures: str) -> Critique:
    """The critique in the answer; an unstructured answer becomes the lesson as it stands."""
    try:
        return Critique.model_validate(json_object(text))
    except (ValueError, ValidationError):
        gist = " ".join((text or "").split())[:1000] or "retry the call with corrected arguments"
        return Critique(what_went_wrong=failures[:2000], lesson=gist, retry_plan="")

"""Reflection (M3, C2): a side branch off a trace's head that extracts experiences.

The reflection prompt is stored as a user message whose parent is the head, the
model's answer hangs from it (and a retry request and second answer, if the
first answer was unusable). None of them moves `head_sequence`, so the main path
is unchanged and a later continue runs as if the reflection never happened; the
branch stays visible in `messages?mode=all` and the admin.

The answer must be JSON (`prompts.REFLECT_PROMPT`); each experience is checked
(category, tags, condition, rule, evidence sequences on the main path). An
unusable answer is retried once, then reported as an `error` event. The draft
experiences are saved in the same transaction as the final branch message and
the `experiences_extracted` event: all or nothing.

The reflection holds the trace's run lease (it writes messages, so it must not
interleave with a run) and gives the trace back in the status it had.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from django.db import transaction
from django.utils import timezone
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
)

from memory import prompts
from memory.models import Experience, ExperienceSource, normalize_tags
from memory.retrieval import parse_json_object
from memory.services import experience_create
from traces.llm import LLMClient, LLMError, LLMResponse, ModelNotConfigured, agent_model
from traces.models import Message, MessageKind
from traces.runner.config import InvalidRun
from traces.runner.history import sanitize_history
from traces.runner.prepare import load_trace, text_of
from traces.runner.store import RunStore, trace_claim, worker_identity
from traces.selectors import trace_main_path

logger = logging.getLogger(__name__)

MAX_EXPERIENCES = 5


class ReflectionInvalid(ValueError):
    """The model's reflection answer cannot be used; the reason is shown to it on retry."""


@dataclass
class ReflectResult:
    trace_id: str
    status: str  # completed | failed
    codes: list[str] = field(default_factory=list)
    error: str | None = None
    messages: list[int] = field(default_factory=list)  # side-branch sequences

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class ReflectedTags(BaseModel):
    state: list[StrictStr] = []
    intent: list[StrictStr] = []


def _category_word(value: Any) -> str:
    return str(value or "").strip().lower()


class ReflectedExperience(BaseModel):
    """One experience as the reflection prompt asks for it (`prompts.REFLECT_PROMPT`);
    other keys are ignored. Fields are checked in this order, the first fault reported."""

    category: Annotated[
        str, BeforeValidator(_category_word), StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,49}$")
    ]
    rule: Annotated[StrictStr, AfterValidator(str.strip), StringConstraints(min_length=1)]
    condition: Annotated[StrictStr, AfterValidator(str.strip)] = ""
    tags: ReflectedTags
    evidence: list[StrictInt] = []  # main-path sequences

    def as_draft(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "tags": normalize_tags(self.tags.model_dump()),
            "condition": self.condition,
            "rule": self.rule,
            "evidence": list(dict.fromkeys(self.evidence)),
        }


class ReflectionAnswer(BaseModel):
    experiences: Annotated[list[Any], Field(max_length=MAX_EXPERIENCES)]  # each a ReflectedExperience


FAULTS = {  # what the model is told, by the field at fault
    "category": "category must be a snake_case word like tool_usage",
    "rule": "rule must be a non-empty string",
    "condition": "condition must be a string",
    "tags": 'tags must be {"state": [words], "intent": [words]}',
    "evidence": "evidence must be a list of message sequence numbers",
}


def validate_reflection(content: str | None, main_path: dict[int, Message]) -> list[dict[str, Any]]:
    """The experiences of a reflection answer, checked; ReflectionInvalid naming the fault."""
    data = parse_json_object(content or "")
    try:
        answer = ReflectionAnswer.model_validate({"experiences": data} if isinstance(data, list) else data)
    except ValidationError as exc:
        fault = exc.errors()[0]
        if fault["type"] == "too_long":
            got = fault["ctx"]["actual_length"]
            raise ReflectionInvalid(f"at most {MAX_EXPERIENCES} experiences, got {got}") from None
        raise ReflectionInvalid('expected a JSON object {"experiences": [...]}') from None
    clean = []
    for number, item in enumerate(answer.experiences, start=1):
        where = f"experience {number}"
        try:
            experience = ReflectedExperience.model_validate(item)
        except ValidationError as exc:
            at = exc.errors()[0]["loc"]
            raise ReflectionInvalid(
                f"{where}: {FAULTS[str(at[0])]}" if at else f"{where} is not an object"
            ) from None
        off_path = [s for s in experience.evidence if s not in main_path]
        if off_path:
            raise ReflectionInvalid(
                f"{where}: evidence {off_path} are not messages of this run (use the #N numbers listed)"
            )
        clean.append(experience.as_draft())
    return clean


def message_index(path: list[Message]) -> str:
    """One line per main-path message, `#N role: gist`, so the model can cite evidence."""
    lines = []
    for message in path:
        if message.role == "assistant" and message.tool_calls:
            names = ", ".join((c.get("function") or {}).get("name") or "?" for c in message.tool_calls)
            gist = f"calls {names}"
            text = text_of(message.content)
            if text:
                gist = f"{' '.join(text.split())[:80]} / {gist}"
        else:
            gist = " ".join(text_of(message.content).split())[:100]
        lines.append(f"#{message.sequence} {message.role}: {gist}")
    return "\n".join(lines)


class Reflection:
    """One reflection on one trace. `run()` does it all and returns the result."""

    def __init__(
        self,
        trace_id: str,
        *,
        focus: str = "",
        reserved_token: int | None = None,
        reserved_from: str | None = None,
        llm_call: Callable[..., LLMResponse] | None = None,
    ) -> None:
        self.trace_id = trace_id
        self.focus = (focus or "").strip()
        self.reserved_token = reserved_token
        self.reserved_from = reserved_from
        self.llm_call = llm_call or LLMClient()

    def run(self) -> ReflectResult:
        previous = load_trace(self.trace_id)
        trace = trace_claim(
            trace_id=self.trace_id, owner=worker_identity(), reserved_token=self.reserved_token
        )
        store = RunStore(trace)
        result = ReflectResult(trace_id=self.trace_id, status="failed")
        try:
            self._reflect(store, result)
        finally:
            trace.status = self.reserved_from or previous.status
            trace.error_message = previous.error_message
            trace.completed_at = previous.completed_at
            store.commit(release=True)
        return result

    def run_with_store(self, store: RunStore) -> ReflectResult:
        """Reflect inside a run that already holds the lease (C2, before a compaction).

        The caller's store buffers the branch; everything is committed here.
        """
        result = ReflectResult(trace_id=store.trace.trace_id, status="failed")
        self._reflect(store, result)
        return result

    def _reflect(self, store: RunStore, result: ReflectResult) -> None:
        trace = store.trace
        path = trace_main_path(trace_id=trace.trace_id, head_sequence=trace.head_sequence)
        if not path:
            self._fail(store, result, "the trace has no messages to reflect on")
            return
        try:
            model = agent_model(trace.model)
        except ModelNotConfigured as exc:
            self._fail(store, result, str(exc))
            return
        on_path = {m.sequence: m for m in path}
        store.emit("reflect_started", {"focus": self.focus, "head_sequence": trace.head_sequence})
        prompt = prompts.REFLECT_PROMPT.format(
            focus=prompts.REFLECT_FOCUS.format(focus=self.focus) if self.focus else "",
            limit=MAX_EXPERIENCES,
            index=message_index(path),
        )
        parent = self._add(store, result, role="user", content=prompt, parent=trace.head_sequence)
        store.commit()
        history = [m.to_llm_dict() for m in path] + [{"role": "user", "content": prompt}]
        reason = ""
        for attempt in range(2):
            try:
                response = self.llm_call(sanitize_history(history), model=model)
            except LLMError as exc:
                self._fail(store, result, f"reflection model call failed: {exc}")
                return
            answer = self._add(
                store,
                result,
                role="assistant",
                content=response.content,
                parent=parent.sequence,
                response=response,
            )
            history.append({"role": "assistant", "content": response.content or ""})
            try:
                found = validate_reflection(response.content, on_path)
            except ReflectionInvalid as exc:
                reason = str(exc)
                if attempt == 0:
                    retry = prompts.REFLECT_RETRY.format(reason=reason)
                    parent = self._add(store, result, role="user", content=retry, parent=answer.sequence)
                    history.append({"role": "user", "content": retry})
                    store.commit()
                continue
            self._save(store, result, found, on_path, answer)
            return
        self._fail(store, result, f"the reflection answer was invalid twice: {reason}")

    def _add(
        self,
        store: RunStore,
        result: ReflectResult,
        *,
        role: str,
        content: str | None,
        parent: int,
        response: LLMResponse | None = None,
    ) -> Message:
        sequence = store.next_sequence()
        message = Message(
            message_id=Message.make_id(store.trace.trace_id, sequence),
            trace_id=store.trace.trace_id,
            sequence=sequence,
            parent_sequence=parent,
            role=role,
            content=content,
            kind=MessageKind.REFLECT,
            description=f"reflection{': ' + self.focus if self.focus else ''}"[:200],
            created_at=timezone.now(),
        )
        if response is not None:
            message.prompt_tokens = response.prompt_tokens
            message.completion_tokens = response.completion_tokens
            message.cost = response.cost
            message.duration_ms = response.duration_ms
            message.finish_reason = response.finish_reason
        store.add_message(message, move_head=False)
        result.messages.append(sequence)
        return message

    def _save(
        self,
        store: RunStore,
        result: ReflectResult,
        found: list[dict[str, Any]],
        on_path: dict[int, Message],
        answer: Message,
    ) -> None:
        trace = store.trace
        with transaction.atomic():
            created: list[Experience] = []
            for item in found:
                evidence = {
                    "trace_id": trace.trace_id,
                    "messages": [
                        {"sequence": s, "message_id": on_path[s].message_id} for s in item["evidence"]
                    ],
                    "reflection": {"message_id": answer.message_id, "focus": self.focus},
                }
                created.append(
                    experience_create(
                        rule=item["rule"],
                        condition=item["condition"],
                        category=item["category"],
                        tags=item["tags"],
                        evidence=evidence,
                        trace=trace,
                        source=ExperienceSource.EXECUTION,
                        helpful=1,
                        confidence=0.5,
                    )
                )
            result.codes = [e.code for e in created]
            result.status = "completed"
            store.emit(
                "experiences_extracted",
                {"codes": result.codes, "focus": self.focus, "reflection_message_id": answer.message_id},
            )
            store.commit()

    def _fail(self, store: RunStore, result: ReflectResult, reason: str) -> None:
        logger.warning("reflection on %s failed: %s", store.trace.trace_id, reason)
        result.status, result.error = "failed", reason
        store.emit("error", {"stage": "reflect", "error": reason, "status": store.trace.status})
        store.commit()


def reflect_on_trace(
    *,
    trace_id: str,
    focus: str = "",
    reserved_token: int | None = None,
    reserved_from: str | None = None,
    llm_call: Callable[..., LLMResponse] | None = None,
) -> ReflectResult:
    """Reflect on `trace_id` now (in this process); see the module docstring."""
    if not isinstance(focus, str):
        raise InvalidRun("focus must be a string")
    return Reflection(
        trace_id, focus=focus, reserved_token=reserved_token, reserved_from=reserved_from, llm_call=llm_call
    ).run()

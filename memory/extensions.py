"""What the memory app plugs into every run (traces/runner/extensions.py): presets,
skills in the system prompt (M6), experiences for a new run (M4), citations and
outcomes (M4, M5), the reflection before a compaction (C2), the memory index and
recall in every model request (M8). Imported by the app's
ready(), when models may be imported."""

from __future__ import annotations

from typing import Any

from memory.entries.requests import forget, with_memory
from memory.injection import system_prompt_for, with_experiences
from memory.models import ExperienceSource, normalize_tag
from memory.presets import get_preset
from memory.reflect import Reflection
from memory.services import experience_create, experience_record_citations, experience_record_outcome
from traces.models import Trace
from traces.runner.extensions import Defer, RunExtensions
from traces.runner.strategies import Lesson


def register(extensions: RunExtensions) -> None:
    extensions.preset = get_preset
    extensions.add("system_prompt", system_prompt_for)
    extensions.add("first_messages", with_experiences)
    extensions.add("on_reply", _count_citations)
    extensions.add("on_end", _count_outcome)
    extensions.add("before_compaction", _reflect_before_compaction)
    extensions.add("before_model", with_memory)
    extensions.add("after_end", forget)
    extensions.add("on_lesson", _save_lesson)


def _count_citations(trace: Trace, text: str | None, defer: Defer) -> None:
    experience_record_citations(trace=trace, text=text, write=defer)


def _count_outcome(trace: Trace, status: str, defer: Defer) -> None:
    experience_record_outcome(trace=trace, status=status, write=defer)


def _save_lesson(trace: Trace, lesson: Lesson, defer: Defer) -> None:
    """R11: a Reflexion lesson becomes a draft experience, the failing call its evidence."""
    critique = lesson.critique

    def save() -> None:
        experience_create(
            rule=critique.lesson,
            condition=f"when calling {lesson.tool}: {critique.what_went_wrong}"[:2000],
            category="tool_usage",
            tags={"state": [normalize_tag(lesson.tool)] if lesson.tool else [], "intent": ["reflexion"]},
            evidence=lesson.evidence,
            trace=trace,
            source=ExperienceSource.EXECUTION,
        )

    defer(save)


def _reflect_before_compaction(store: Any, llm_call: Any) -> None:
    Reflection(store.trace.trace_id, focus="before context compaction", llm_call=llm_call).run_with_store(
        store
    )

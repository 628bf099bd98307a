"""Retrieval for a new trace: tag the task with the utility model, search, format the block."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from agentsite.kept import Kept
from memory import prompts
from memory.models import Experience, ExperienceStatus
from memory.retrieval.embeddings import embed_task
from memory.retrieval.search import Scored, experience_search
from memory.selectors import tag_counts
from memory.tags import normalize_tags
from traces.llm import LLMError, ModelNotConfigured, utility_model

logger = logging.getLogger(__name__)

KNOWN_TAGS_OFFERED = 40  # per kind, most used first


def task_tags(task: str, utility_call: Callable[..., Any]) -> dict[str, list[str]]:
    """The utility model's {state, intent} tags for a task, chosen preferably from the
    approved experiences' own tags (offered in the prompt); {} when it fails (the run goes on)."""
    prompt = prompts.TAG_PROMPT.format(task=task[:4000], known=_known_tags())
    try:
        response = utility_call(
            [{"role": "user", "content": prompt}],
            model=utility_model(),
            params={"max_tokens": 120},
        )
    except (LLMError, ModelNotConfigured) as exc:
        logger.info("tagging the task failed: %s", exc)
        return {}
    data = parse_json_object(response.content or "")
    if not isinstance(data, dict) or not (data.get("state") or data.get("intent")):
        logger.info("tagging the task gave no usable JSON: %r", (response.content or "")[:200])
        return {}
    try:
        return normalize_tags(data)
    except (TypeError, ValueError):
        return {}


def _known_tags() -> str:
    """The most used tags of approved experiences, one line per kind, for the tagging prompt."""
    known = tag_counts(statuses=(ExperienceStatus.APPROVED,))
    lines = []
    for kind in ("state", "intent"):
        top = [tag for tag, _ in known[kind].most_common(KNOWN_TAGS_OFFERED)]
        lines.append(f"- {kind}: {', '.join(top) if top else '(none yet)'}")
    return "\n".join(lines)


def parse_json_object(text: str) -> Any:
    """The JSON object in a model's answer (bare, or in a ```json fence); None if there is none."""
    text = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fenced:
        text = fenced.group(1).strip()
    if not text.startswith("{"):
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            return None
        text = text[start : end + 1]
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


@dataclass
class Retrieval:
    tags: dict[str, list[str]]
    found: list[Scored] = field(default_factory=list)

    @property
    def experiences(self) -> list[Experience]:
        return [s.experience for s in self.found]

    def as_context(self) -> dict[str, Any]:
        """What the trace and its `experiences_retrieved` event record: the task's tags, the
        codes, and why each was chosen (score, relevance parts, matched tags and words)."""
        return {
            "tags": self.tags,
            "retrieved": [e.code for e in self.experiences],
            "why": [s.why() for s in self.found],
            "floor": settings.AGENT_EXPERIENCE_MIN_SCORE,
        }


def _read_any_approved(codes: tuple[str, ...] | None) -> bool:
    approved = Experience.objects.filter(status=ExperienceStatus.APPROVED)
    if codes is not None:
        approved = approved.filter(code__in=codes)
    return approved.exists()


# Every new run asks: at most once a second per process (agentsite/kept.py; an approval
# made here shows at once, one made in the portal within the second).
_any_approved: Kept[tuple[str, ...] | None, bool] = Kept(
    "approved experiences", _read_any_approved, changed_by=("memory.Experience",)
)


def retrieve_for_task(
    task: str,
    *,
    utility_call: Callable[..., Any],
    agent_type: str | None,
    user_id: int | None = None,
    codes: list[str] | None = None,
) -> Retrieval | None:
    """M4 for a new trace: tag the task, then search. None when there is nothing to search.

    When tagging fails, only full-text matches at or above the floor come back."""
    chosen = None if codes is None else tuple(sorted(codes))  # the run's chosen experience set
    if settings.AGENT_EXPERIENCE_TOP_K <= 0 or not _any_approved.get(chosen):
        return None  # no model call when there is nothing to find
    tags = task_tags(task, utility_call)
    found = experience_search(
        tags=tags,
        text=task,
        agent_type=agent_type,
        user_id=user_id,
        codes=codes,
        query_embedding=embed_task(task, tags),
        explain=True,
    )
    return Retrieval(tags=tags, found=found)


def format_experiences(experiences: list[Experience]) -> str:
    """The block appended to the first user message."""
    lines = [prompts.EXPERIENCES_HEADING, "", prompts.EXPERIENCES_INTRO, ""]
    lines += [e.prompt_line() for e in experiences]
    return "\n".join(lines)

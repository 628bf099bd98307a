"""Recall (M8, seed 001 `Recaller`): the utility model picks the entries relevant to a
run by name and description only (it never sees bodies), then two local filters:

- dedup: an entry whose full body is already in the request (a `read_memory` result,
  text the user pasted) is not recalled again;
- tool usage (seed `filter_tool_usage`): a reference entry that is a manual for a tool
  the run is already using successfully ("how to use", "usage", "使用说明", "用法") is
  left out, unless it warns of a caveat or a bug: the model does not need the manual
  of a tool it is driving well, but it does need the known gotchas.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from memory.models import MemoryEntry, MemoryType
from memory.retrieval import parse_json_object
from traces.llm import LLMError, ModelNotConfigured, utility_model

logger = logging.getLogger(__name__)

MAX_CANDIDATES = 300
RECALL_PROMPT = """You choose which of a user's memory notes are clearly relevant to the task below.
Answer with JSON only: {{"ids": [<id>, ...]}}. Be conservative: only notes that clearly matter for
this task; {{"ids": []}} when none does.

Task:
{task}

Notes (id, type/name: description):
{notes}"""
HEADING = "Recalled from memory (your notes from earlier runs that look relevant to this task):"
USAGE_WORDS = ("how to use", "usage", "使用说明", "用法")
CAVEAT_WORDS = ("caveat", "bug", "gotcha", "pitfall", "careful", "warning", "beware", "注意", "坑", "陷阱")
_ERROR_TITLES = ("Error", "Denied", "Blocked")


@dataclass(frozen=True)
class Candidate:
    """What the utility model sees of an entry."""

    id: int
    type: str
    name: str
    description: str

    def line(self) -> str:
        return f"{self.id}, {self.type}/{self.name}: {self.description or '(no description)'}"


def candidates(entries: Iterable[MemoryEntry]) -> list[Candidate]:
    return [Candidate(e.pk, e.type, e.name, e.description) for e in entries]


def recall_ids(task: str, found: list[Candidate], utility_call: Callable[..., Any]) -> list[int]:
    """The ids the utility model picks among `found`; [] when it fails (the run goes on).

    Runs in a helper thread: no database access here.
    """
    if not found or not task.strip():
        return []
    prompt = RECALL_PROMPT.format(task=task[:4000], notes="\n".join(c.line() for c in found))
    try:
        response = utility_call(
            [{"role": "user", "content": prompt}], model=utility_model(), params={"max_tokens": 200}
        )
    except (LLMError, ModelNotConfigured) as exc:
        logger.info("memory recall failed: %s", exc)
        return []
    data = parse_json_object(response.content or "")
    ids = data.get("ids") if isinstance(data, dict) else None
    known = {c.id for c in found}
    picked = [_as_id(i) for i in ids] if isinstance(ids, list) else []
    return list(dict.fromkeys(i for i in picked if i in known))


def _as_id(value: Any) -> int | None:
    text = str(value).strip().lstrip("#")
    return int(text) if text.isdigit() else None


def survivors(
    entries: list[MemoryEntry], messages: list[dict[str, Any]]
) -> tuple[list[MemoryEntry], dict[str, int]]:
    """`entries` less those whose body is in `messages` and the manuals of tools in use,
    and how many each filter dropped ({"dedup": n, "tool_usage": n})."""
    texts = [_text(m.get("content")) for m in messages]
    in_use = tools_in_use(messages)
    kept: list[MemoryEntry] = []
    dropped = {"dedup": 0, "tool_usage": 0}
    for entry in entries:
        if any(entry.content.strip() in text for text in texts):
            dropped["dedup"] += 1
        elif is_manual_for(entry, in_use):
            dropped["tool_usage"] += 1
        else:
            kept.append(entry)
    return kept, dropped


def recalled_event(kept: list[MemoryEntry], dropped: dict[str, int]) -> dict[str, Any]:
    """The `memory_recalled` event's payload: what a run was given, what the filters left out."""
    return {
        "entries": [
            {"id": e.pk, "name": e.name, "type": e.type, "saved_at": e.saved_at.isoformat()} for e in kept
        ],
        "dropped": dropped,
    }


def tools_in_use(messages: list[dict[str, Any]]) -> set[str]:
    """Names of the tools whose calls in `messages` returned a result that is not an error."""
    names: dict[str, str] = {}
    for m in messages:
        for call in m.get("tool_calls") or [] if m.get("role") == "assistant" else []:
            name = (call.get("function") or {}).get("name")
            if call.get("id") and name:
                names[call["id"]] = name
    used: set[str] = set()
    for m in messages:
        name = names.get(m.get("tool_call_id") or "") if m.get("role") == "tool" else None
        if name and not _text(m.get("content")).startswith(_ERROR_TITLES):
            used.add(name)
    return used


def is_manual_for(entry: MemoryEntry, tools: set[str]) -> bool:
    """A reference entry that explains how to use one of `tools` and warns of nothing."""
    if entry.type != MemoryType.REFERENCE or not tools:
        return False
    about = " ".join([entry.name, entry.description, *entry.keywords]).lower()
    if not any(re.search(rf"(?<![\w-]){re.escape(t.lower())}(?![\w-])", about) for t in tools):
        return False
    description = entry.description.lower()
    if any(word in description for word in CAVEAT_WORDS):
        return False
    return any(word in description for word in USAGE_WORDS)


def recalled_message(entries: list[MemoryEntry], *, now: datetime | None = None) -> str | None:
    if not entries:
        return None
    now = now or timezone.now()
    blocks = [HEADING]
    for e in entries:
        body = "\n".join(f"  {line}" for line in e.content.splitlines())
        blocks.append(
            f"- #{e.pk} {e.type}/{e.name} ({e.saved_at:%Y-%m-%d}: {staleness(e.saved_at, now)})\n{body}"
        )
    return "\n".join(blocks)


def staleness(saved_at: datetime, now: datetime) -> str:
    """How old a note is, and a reminder to check an old one against the present."""
    days = (now - saved_at).days
    if days < 1:
        return "saved today"
    age = "1 day" if days == 1 else f"{days} days"
    return f"saved {age} ago; verify before relying on it"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return json.dumps(content) if content is not None else ""

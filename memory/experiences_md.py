"""experiences.md (M2): the seed's markdown block format, parsed and rendered.

One block per experience: a front matter between `---` lines, then the body (the
rule), e.g.

    ---
    id: ex_001
    trace_id: 3f1c…
    category: tool_usage
    tags: {state: ["large_file"], intent: ["batch_edit"]}
    metrics: {helpful: 12, harmful: 0, usage_count: 3, runs: 4, successes: 3}
    created_at: "2026-02-12T15:30:00+00:00"
    condition: "editing a file over 10 MB"
    ...
    ---
    Use `edit` with a unique anchor instead of rewriting the file.

The front matter is YAML (the seed writes flow mappings); values are rendered as
JSON scalars, which YAML reads back unchanged. A body line that is exactly `---`
would end the block, so it is written `\\---` (and every further backslash kept):
`render` then `parse` gives back the same experiences, and `render` again the
same text. The embedding is not part of the file (it is recomputed).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from memory.models import CODE_RE, ExperienceSource, ExperienceStatus, normalize_tags

DELIMITER = "---"
_ESCAPED = re.compile(r"^(\\*)---$")
_CATEGORY = re.compile(r"^[a-z][a-z0-9_]*$")
KNOWN_KEYS = {
    "id",
    "trace_id",
    "category",
    "tags",
    "metrics",
    "created_at",
    "updated_at",
    "status",
    "scope",
    "source",
    "confidence",
    "condition",
    "evidence",
}


class ExperiencesFileError(ValueError):
    """A malformed experiences.md; `line` is 1-based."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


@dataclass
class ExperienceData:
    """One experience as the file holds it (the fields `memory.services` writes)."""

    code: str
    rule: str
    category: str = "logic_flow"
    tags: dict[str, list[str]] = field(default_factory=lambda: {"state": [], "intent": []})
    condition: str = ""
    scope: str = ""
    source: str = ExperienceSource.MANUAL
    status: str = ExperienceStatus.DRAFT
    confidence: float = 0.5
    helpful: int = 0
    harmful: int = 0
    usage_count: int = 0
    outcome_runs: int = 0
    outcome_successes: int = 0
    evidence: dict[str, Any] = field(default_factory=dict)
    created_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None
    line: int = 0  # where its block starts in the parsed file

    @classmethod
    def from_model(cls, experience: Any) -> ExperienceData:
        evidence = dict(experience.evidence or {})
        if experience.trace_id and not evidence.get("trace_id"):
            evidence["trace_id"] = experience.trace_id
        return cls(
            code=experience.code,
            rule=experience.rule,
            category=experience.category,
            tags=normalize_tags(experience.tags),
            condition=experience.condition,
            scope=experience.scope,
            source=experience.source,
            status=experience.status,
            confidence=experience.confidence,
            helpful=experience.helpful,
            harmful=experience.harmful,
            usage_count=experience.usage_count,
            outcome_runs=experience.outcome_runs,
            outcome_successes=experience.outcome_successes,
            evidence=evidence,
            created_at=experience.created_at,
            updated_at=experience.updated_at,
        )

    def comparable(self) -> dict[str, Any]:
        """Every field but the parse position (for round-trip checks)."""
        return {k: v for k, v in self.__dict__.items() if k != "line"}


# --- rendering -------------------------------------------------------------------


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _flow(mapping: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{key}: {_json(value)}" for key, value in mapping.items()) + "}"


def _escape_body(text: str) -> str:
    return "\n".join("\\" + line if _ESCAPED.match(line) else line for line in text.split("\n"))


def render_one(data: ExperienceData) -> str:
    evidence = dict(data.evidence)
    trace_id = evidence.pop("trace_id", None)
    lines = [DELIMITER, f"id: {data.code}"]
    if trace_id:
        lines.append(f"trace_id: {_json(trace_id)}")
    lines += [
        f"category: {data.category}",
        f"tags: {_flow({'state': data.tags.get('state', []), 'intent': data.tags.get('intent', [])})}",
        "metrics: "
        + _flow(
            {
                "helpful": data.helpful,
                "harmful": data.harmful,
                "usage_count": data.usage_count,
                "runs": data.outcome_runs,
                "successes": data.outcome_successes,
            }
        ),
    ]
    if data.created_at:
        lines.append(f"created_at: {_json(data.created_at.isoformat())}")
    if data.updated_at:
        lines.append(f"updated_at: {_json(data.updated_at.isoformat())}")
    lines += [
        f"status: {data.status}",
        f"source: {data.source}",
        f"confidence: {_json(data.confidence)}",
    ]
    if data.scope:
        lines.append(f"scope: {_json(data.scope)}")
    if data.condition:
        lines.append(f"condition: {_json(data.condition)}")
    if evidence:
        lines.append(f"evidence: {_json(evidence)}")
    lines += [DELIMITER, _escape_body(data.rule)]
    return "\n".join(lines) + "\n"


def render(experiences: list[ExperienceData]) -> str:
    """The experiences.md text: blocks separated by a blank line."""
    return "\n".join(render_one(e) for e in experiences)


# --- parsing ---------------------------------------------------------------------


def parse(text: str) -> list[ExperienceData]:
    """Every block of an experiences.md; ExperiencesFileError at the first fault."""
    lines = text.replace("\r\n", "\n").split("\n")
    index = 0
    while index < len(lines) and not lines[index].strip():
        index += 1
    found: list[ExperienceData] = []
    seen: dict[str, int] = {}
    while index < len(lines):
        start = index
        if lines[index] != DELIMITER:
            raise ExperiencesFileError(
                index + 1, f"expected '---' to open an experience block, got {lines[index]!r}"
            )
        index += 1
        header_start = index
        while index < len(lines) and lines[index] != DELIMITER:
            index += 1
        if index >= len(lines):
            raise ExperiencesFileError(start + 1, "the front matter opened here is never closed with '---'")
        header = "\n".join(lines[header_start:index])
        index += 1
        body_start = index
        while index < len(lines) and lines[index] != DELIMITER:
            index += 1
        body = "\n".join(
            line[1:] if _ESCAPED.match(line) else line for line in lines[body_start:index]
        ).strip("\n")
        data = _block(header, body, start + 1, header_start + 1)
        if data.code in seen:
            raise ExperiencesFileError(start + 1, f"{data.code} is also defined at line {seen[data.code]}")
        seen[data.code] = start + 1
        found.append(data)
    return found


def _block(header: str, body: str, line: int, header_line: int) -> ExperienceData:
    try:
        meta = yaml.safe_load(header) if header.strip() else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = header_line + mark.line if mark is not None else line
        problem = getattr(exc, "problem", None) or str(exc)
        raise ExperiencesFileError(where, f"front matter is not valid YAML: {problem}") from None
    if not isinstance(meta, dict):
        raise ExperiencesFileError(line, "front matter must be 'key: value' lines")

    def fail(reason: str) -> ExperiencesFileError:
        return ExperiencesFileError(line, f"{meta.get('id') or 'block'}: {reason}")

    unknown = set(map(str, meta)) - KNOWN_KEYS
    if unknown:
        raise fail(f"unknown key(s) {', '.join(sorted(unknown))}")
    code = str(meta.get("id") or "")
    if not CODE_RE.match(code):
        raise ExperiencesFileError(line, f"id must look like ex_001 (got {meta.get('id')!r})")
    if not body.strip():
        raise fail("no body: the rule goes after the closing '---'")
    category = str(meta.get("category") or "logic_flow")
    if not _CATEGORY.match(category):
        raise fail(f"category must be a lowercase word like tool_usage (got {category!r})")
    tags = meta.get("tags") or {}
    if not isinstance(tags, dict) or set(tags) - {"state", "intent"}:
        raise fail("tags must be {state: [...], intent: [...]}")
    for key, values in tags.items():
        if not isinstance(values, list | str):
            raise fail(f"tags.{key} must be a list of words")
    metrics = meta.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise fail("metrics must be {helpful: N, harmful: N, ...}")
    counts = {}
    for key in ("helpful", "harmful", "usage_count", "runs", "successes"):
        value = metrics.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise fail(f"metrics.{key} must be a whole number >= 0 (got {value!r})")
        counts[key] = value
    status = str(meta.get("status") or ExperienceStatus.DRAFT)
    if status not in ExperienceStatus.values:
        raise fail(f"status must be one of {', '.join(ExperienceStatus.values)} (got {status!r})")
    source = str(meta.get("source") or ExperienceSource.MANUAL)
    if source not in ExperienceSource.values:
        raise fail(f"source must be one of {', '.join(ExperienceSource.values)} (got {source!r})")
    confidence = meta.get("confidence", 0.5)
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
        raise fail(f"confidence must be a number between 0 and 1 (got {confidence!r})")
    evidence = meta.get("evidence") or {}
    if not isinstance(evidence, dict):
        raise fail("evidence must be a mapping like {messages: [{sequence: 5}]}")
    if meta.get("trace_id"):
        evidence = {"trace_id": str(meta["trace_id"]), **evidence}
    return ExperienceData(
        code=code,
        rule=body,
        category=category,
        tags=normalize_tags(tags),
        condition=str(meta.get("condition") or ""),
        scope=str(meta.get("scope") or ""),
        source=source,
        status=status,
        confidence=float(confidence),
        helpful=counts["helpful"],
        harmful=counts["harmful"],
        usage_count=counts["usage_count"],
        outcome_runs=counts["runs"],
        outcome_successes=counts["successes"],
        evidence=evidence,
        created_at=_timestamp(meta.get("created_at"), fail),
        updated_at=_timestamp(meta.get("updated_at"), fail),
        line=line,
    )


def _timestamp(value: Any, fail: Any) -> dt.datetime | None:
    """ISO timestamps, or the seed's "2026-02-12 15:30"; naive ones are UTC."""
    if value in (None, ""):
        return None
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, dt.date):
        parsed = dt.datetime(value.year, value.month, value.day)
    else:
        try:
            parsed = dt.datetime.fromisoformat(str(value).strip())
        except ValueError:
            raise fail(f"timestamp {value!r} is not like 2026-02-12 15:30 or ISO 8601") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)

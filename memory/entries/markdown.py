"""memory.md: memory entries as Markdown, one block per entry (M8).

    ---
    type: "feedback"
    name: "Language"
    description: "reply language"
    keywords: ["french"]
    project: ""
    saved_at: "2026-11-23T08:00:00+00:00"
    ---
    Rule: answer in French.
    ...

Front-matter values are JSON (valid YAML too), so any name or description survives;
a body line that reads like a delimiter (`---`, or `\\---` and so on) gets one more
backslash. `parse(render(entries)) == entries` and `render(parse(text)) == text` for
a rendered file: a lossless round trip.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

DELIMITER = "---"
FIELDS = ("type", "name", "description", "keywords", "project", "saved_at")
_ESCAPED = re.compile(r"^\\*---$")


@dataclass(frozen=True)
class EntryData:
    type: str
    name: str
    content: str
    description: str = ""
    keywords: list[str] = field(default_factory=list)
    project: str = ""
    saved_at: datetime | None = None


class MemoryFileError(ValueError):
    def __init__(self, message: str, line: int) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}")


def render(entries: list[EntryData]) -> str:
    blocks = []
    for entry in entries:
        values: dict[str, Any] = {
            "type": entry.type,
            "name": entry.name,
            "description": entry.description,
            "keywords": entry.keywords,
            "project": entry.project,
            "saved_at": entry.saved_at.isoformat() if entry.saved_at else None,
        }
        head = [f"{key}: {json.dumps(values[key], ensure_ascii=False)}" for key in FIELDS]
        body = ["\\" + line if _ESCAPED.match(line) else line for line in entry.content.split("\n")]
        blocks.append("\n".join([DELIMITER, *head, DELIMITER, *body]))
    return "\n".join(blocks) + ("\n" if blocks else "")


def parse(text: str) -> list[EntryData]:
    """The entries of a memory.md text; MemoryFileError names the first bad line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    entries: list[EntryData] = []
    i = 0
    while i < len(lines):
        if lines[i] != DELIMITER:
            raise MemoryFileError(f"expected '{DELIMITER}' to start an entry, found {lines[i][:40]!r}", i + 1)
        start = i + 1
        values: dict[str, Any] = {}
        i += 1
        while i < len(lines) and lines[i] != DELIMITER:
            values.update(_field(lines[i], i + 1))
            i += 1
        if i == len(lines):
            raise MemoryFileError("the entry's front matter is not closed by '---'", start)
        i += 1
        body = []
        while i < len(lines) and lines[i] != DELIMITER:
            line = lines[i]
            body.append(line[1:] if _ESCAPED.match(line[1:]) and line.startswith("\\") else line)
            i += 1
        entries.append(_entry(values, "\n".join(body), start))
    return entries


def _field(line: str, number: int) -> dict[str, Any]:
    key, sep, raw = line.partition(": ")
    if not sep or key not in FIELDS:
        raise MemoryFileError(
            f"expected one of {', '.join(FIELDS)} as 'key: value', found {line[:40]!r}", number
        )
    try:
        return {key: json.loads(raw)}
    except json.JSONDecodeError as exc:
        raise MemoryFileError(f"{key}'s value is not JSON ({exc.msg})", number) from None


def _entry(values: dict[str, Any], content: str, line: int) -> EntryData:
    strings = {k: values.get(k, "") for k in ("type", "name", "description", "project")}
    keywords = values.get("keywords", [])
    if not all(isinstance(v, str) for v in strings.values()):
        raise MemoryFileError("type, name, description and project must be strings", line)
    if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
        raise MemoryFileError("keywords must be a list of strings", line)
    saved = values.get("saved_at")
    try:
        saved_at = datetime.fromisoformat(saved) if isinstance(saved, str) else None
    except ValueError:
        raise MemoryFileError(f"saved_at {saved!r} is not an ISO date and time", line) from None
    return EntryData(content=content, keywords=keywords, saved_at=saved_at, **strings)

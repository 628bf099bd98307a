"""The write gate of memory entries (M8, seed 001 `_looks_like_code_or_path`).

Memory holds what cannot be found again by reading the workspace: who the user is,
what they corrected, decisions and their reasons. Code, file paths and git commands
are findable, so they are refused; feedback and project entries must say the rule,
why, and how to apply it; project entries must date things absolutely, since a
"yesterday" is wrong the day after. Each refusal says exactly what to change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

from memory.models import MemoryType

TYPES: tuple[str, ...] = tuple(MemoryType.values)
STRUCTURED = (MemoryType.FEEDBACK, MemoryType.PROJECT)
MARKERS = {
    "Rule": re.compile(r"\brule\s*[:：]", re.IGNORECASE),
    "Why": re.compile(r"\bwhy\s*[:：]", re.IGNORECASE),
    "How to apply": re.compile(r"\bhow to apply\s*[:：]", re.IGNORECASE),
}

_FENCE = re.compile(r"^\s*(```|~~~)", re.MULTILINE)
_STATEMENT = re.compile(
    r"^\s*(?:"
    r"(?:async\s+)?def\s+\w+\s*\("  # def f(
    r"|class\s+\w+\s*[(:]"  # class A: / class A(B)
    r"|import\s+[\w.]+"  # import os
    r"|from\s+[\w.]+\s+import\s"  # from a import b
    r"|(?:const|let|var)\s+\w+\s*="  # JavaScript
    r"|function\s+\w+\s*\("
    r"|#include\s*[<\"]"
    r"|[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*(?:[-+*/%|&]|//|\*\*)?=(?!=)\s*\S"  # x = 1, a.b += 2
    r")",
    re.MULTILINE,
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
_EXTENSIONS = (
    "py|pyi|js|mjs|ts|tsx|jsx|java|kt|go|rs|rb|php|c|h|cc|cpp|hpp|cs|swift|scala|sh|bash|zsh|ps1"
    "|json|yaml|yml|toml|ini|cfg|conf|env|lock|md|rst|txt|csv|tsv|sql|html|htm|css|scss|xml|log"
)
_PATH = re.compile(
    r"(?:^|[\s(\"'`])(?:~|\.{1,2})?/[\w.@-]+/[\w.@/-]*"  # /etc/hosts, ./src/app, ~/x/y
    r"|\b[A-Za-z]:\\"  # C:\
    rf"|\b[a-z0-9_][\w-]*(?:/[\w.-]+)*\.(?:{_EXTENSIONS})\b"  # settings.py, docs/API.md
)
_GIT = re.compile(
    r"\bgit\s+(?:add|am|apply|bisect|blame|branch|checkout|cherry-pick|clean|clone|commit|diff|fetch"
    r"|init|log|merge|mv|pull|push|rebase|reflog|remote|reset|restore|revert|rm|show|stash|status"
    r"|switch|tag|worktree)\b",
    re.IGNORECASE,
)
_RELATIVE_EN = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|recently|nowadays"
    r"|(?:last|next|this|past|coming)\s+(?:week|weekend|month|year|quarter|sprint|monday|tuesday"
    r"|wednesday|thursday|friday|saturday|sunday|night|time)"
    r"|(?:a|an|one|two|three|few|several|couple\s+of|\d+)\s+(?:minutes?|hours?|days?|weeks?|months?|years?)"
    r"\s+(?:ago|from\s+now|later|earlier)"
    r"|in\s+(?:a|an|\d+|a\s+few)\s+(?:days?|weeks?|months?|years?)"
    r"|the\s+day\s+(?:before|after)"
    r")\b",
    re.IGNORECASE,
)
_RELATIVE_ZH = re.compile(
    r"(?:昨天|昨日|前天|今天|今日|明天|明日|后天|今晚|昨晚|明晚|刚才|最近|近期"
    r"|(?:上|下|这|本)(?:个)?(?:周|星期|礼拜|月)|(?:去|今|明|前)年"
    r"|[0-9一二三四五六七八九十几两半]+\s*(?:个)?(?:分钟|小时|天|日|周|星期|礼拜|月|年)(?:前|后|以前|以后|之前|之后))"
)


@dataclass(frozen=True)
class Draft:
    """A memory entry as a writer gives it, before the gate."""

    type: str
    name: str
    description: str
    keywords: list[str]
    content: str


class MemoryRefused(ValueError):
    """The write gate refused an entry; the message says every reason."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__("; ".join(reasons))


def check(draft: Draft, *, today: date | None = None) -> Draft:
    """The entry, trimmed, if the gate lets it through; else MemoryRefused naming each fault."""
    draft = Draft(
        type=draft.type.strip().lower(),
        name=" ".join(draft.name.split()),
        description=" ".join(draft.description.split()),
        keywords=[k for k in (" ".join(str(k).split()) for k in draft.keywords) if k],
        content=draft.content.strip(),
    )
    reasons = list(_faults(draft, today or date.today()))
    if reasons:
        raise MemoryRefused(reasons)
    return draft


def _faults(draft: Draft, today: date) -> Iterable[str]:
    if draft.type not in TYPES:
        yield f"type must be one of {', '.join(TYPES)} (got {draft.type!r})"
    if not draft.name:
        yield "name is empty: give the entry a short name"
    elif len(draft.name) > 200:
        yield f"name is {len(draft.name)} characters long; keep it under 200"
    if len(draft.description) > 500:
        yield f"description is {len(draft.description)} characters long; keep it under 500"
    if not draft.content:
        yield "content is empty: write what should be remembered"
    text = "\n".join([draft.name, draft.description, " ".join(draft.keywords), draft.content])
    yield from _findable(text)
    if draft.type in STRUCTURED:
        missing = [label for label, marker in MARKERS.items() if not marker.search(draft.content)]
        if missing:
            yield (
                f"a {draft.type} entry's content must have the lines 'Rule:', 'Why:' and 'How to apply:'; "
                f"missing: {', '.join(repr(m + ':') for m in missing)}"
            )
    if draft.type == MemoryType.PROJECT:
        relative = _relative_dates(text)
        if relative:
            yield (
                f"a project entry needs absolute dates, not relative ones ({', '.join(relative)}); "
                f"today is {today.isoformat()}: write the date itself, like {today.isoformat()}"
            )


def _findable(text: str) -> Iterable[str]:
    if _FENCE.search(text):
        yield "it contains a fenced code block: code is in the workspace, remember why it matters instead"
    statement = _STATEMENT.search(text)
    if statement:
        yield (
            f"it contains a code statement ({_quote(statement.group(0))}): code is findable, "
            "remember the decision or the lesson in words"
        )
    path = _PATH.search(_URL.sub(" ", text))
    if path:
        yield (
            f"it contains a file path ({_quote(path.group(0))}): paths are findable in the workspace, "
            "describe the thing instead"
        )
    git = _GIT.search(text)
    if git:
        yield (
            f"it contains a git command ({_quote(git.group(0))}): the repository's history is findable, "
            "remember the reason instead"
        )


def _relative_dates(text: str) -> list[str]:
    found = [m.group(0) for m in _RELATIVE_EN.finditer(text)] + [
        m.group(0) for m in _RELATIVE_ZH.finditer(text)
    ]
    return [repr(f) for f in dict.fromkeys(found)]


def _quote(fragment: str) -> str:
    fragment = " ".join(fragment.split())
    return repr(fragment if len(fragment) <= 60 else fragment[:57] + "...")

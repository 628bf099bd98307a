"""What a case checks in the trace a replay made, and how each check is judged.

Checks are plain JSON on the case (`Case.checks`), read through pydantic models so a
bad one is a 400 naming the field. Every kind but `rubric` is judged from what the
trace stored: its main path and its workspace. `rubric` checks are judged together
by a reviewer run with the `evaluate` tool's prompt (suites/services.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from traces.models import Message, Trace
from traces.runner import InvalidRun
from traces.runner.prepare import text_of
from traces.runner.tool_api import workspace_path
from traces.selectors import trace_main_path

MAX_CHECKS = 20


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class AnswerContains(_Check):
    kind: Literal["answer_contains"]
    text: str = Field(min_length=1, max_length=2000)


class AnswerMatches(_Check):
    kind: Literal["answer_matches"]
    pattern: str = Field(min_length=1, max_length=2000)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return value


class FileExists(_Check):
    kind: Literal["file_exists"]
    path: str = Field(min_length=1, max_length=500)
    contains: str = Field(default="", max_length=2000)

    @field_validator("path")
    @classmethod
    def _inside(cls, value: str) -> str:
        if value.startswith("/") or ".." in value.split("/"):
            raise ValueError("a path inside the workspace, relative, without '..'")
        return value


class ToolCalled(_Check):
    kind: Literal["tool_called", "tool_not_called"]
    tool: str = Field(min_length=1, max_length=200)


class Rubric(_Check):
    kind: Literal["rubric"]
    rubric: str = Field(min_length=1, max_length=4000)


Check = Annotated[
    AnswerContains | AnswerMatches | FileExists | ToolCalled | Rubric, Field(discriminator="kind")
]
_CHECKS: TypeAdapter[list[Check]] = TypeAdapter(list[Check])


def clean_checks(checks: Any) -> list[dict[str, Any]]:
    """The checks as stored, or InvalidRun naming the first bad field (checks[1].pattern: ...)."""
    if not isinstance(checks, list) or not checks:
        raise InvalidRun("checks: a list of at least one check")
    if len(checks) > MAX_CHECKS:
        raise InvalidRun(f"checks: at most {MAX_CHECKS}")
    try:
        parsed = _CHECKS.validate_python(checks)
    except ValidationError as exc:
        error = exc.errors()[0]
        kinds = {
            "answer_contains",
            "answer_matches",
            "file_exists",
            "tool_called",
            "tool_not_called",
            "rubric",
        }
        path = [p for p in error["loc"] if p not in kinds]  # the union's tag is not a field
        where = "checks" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
        message = str(error["msg"]).removeprefix("Value error, ")
        raise InvalidRun(f"{where}: {message}") from None
    return [c.model_dump(exclude_defaults=False) for c in parsed]


@dataclass(frozen=True)
class Evidence:
    """What the checks look at, read once per case run."""

    answer: str
    tools: frozenset[str]
    trace_id: str

    @classmethod
    def of(cls, trace: Trace) -> Evidence:
        path = trace_main_path(trace_id=trace.trace_id)
        return cls(answer=final_answer(path), tools=frozenset(tools_called(path)), trace_id=trace.trace_id)


def final_answer(path: list[Message]) -> str:
    for message in reversed(path):
        if message.role == "assistant" and not message.tool_calls:
            text = text_of(message.content)
            if text.strip():
                return text
    return ""


def tools_called(path: list[Message]) -> list[str]:
    return [m.name for m in path if m.role == "tool" and m.name]


def judge(check: dict[str, Any], evidence: Evidence) -> tuple[bool, str]:
    """(passed, what was found) for one non-rubric check."""
    kind = check["kind"]
    if kind == "answer_contains":
        found = check["text"].casefold() in evidence.answer.casefold()
        return found, "the answer contains it" if found else "not in the answer"
    if kind == "answer_matches":
        found = re.search(check["pattern"], evidence.answer) is not None
        return found, "the answer matches" if found else "the answer does not match"
    if kind in ("tool_called", "tool_not_called"):
        called = check["tool"] in evidence.tools
        want = kind == "tool_called"
        return called == want, "called" if called else "not called"
    if kind == "file_exists":
        return _file_check(evidence.trace_id, check["path"], check.get("contains", ""))
    raise ValueError(f"no judge for check kind {kind!r}")  # rubric: judged by a reviewer run


def _file_check(trace_id: str, relative: str, contains: str) -> tuple[bool, str]:
    root = workspace_path(trace_id).resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        return False, "no such file in the workspace"
    if not contains:
        return True, f"{target.stat().st_size} bytes"
    text = target.read_bytes()[:1_000_000].decode("utf-8", errors="replace")
    return (True, "the file contains it") if contains in text else (False, "the file lacks it")

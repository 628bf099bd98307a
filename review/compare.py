"""Branch comparison (X6): two branches of a trace, or two traces of the same task, side by
side from their common ancestor.

A branch is the path from the root to one message (`trace_main_path` with that message as
head). In one trace the common ancestor is the last message both paths share; across two
traces it is the longest prefix of messages that say the same (role, text, tool names and
arguments; call ids differ between runs). After it, the two tails are aligned with
difflib's SequenceMatcher on each message's gist, so an inserted step shows as one
message on one side only, and messages paired in a changed block get a word diff of
their text and a diff of their tool calls' arguments. Each side has its outcome and its
figures (tokens, cost, duration) over the whole branch and after the ancestor.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from traces.models import Message, Trace
from traces.runner import InvalidRun
from traces.runner.prepare import text_of
from traces.selectors import trace_main_path
from traces.totals import cost_text

DIFF_LIMIT = 20_000  # characters of a text diffed word by word; longer ones are marked changed
WORDS = re.compile(r"(\s+)")


class InvalidComparison(InvalidRun):
    """Branches that cannot be compared (400, code `invalid_comparison`)."""


@dataclass
class Side:
    trace: Trace
    head: int
    path: list[Message]
    tail: list[Message] = field(default_factory=list)

    @property
    def is_main(self) -> bool:
        return self.head == self.trace.head_sequence

    def outcome(self) -> dict[str, Any]:
        """The trace's status when the branch is its main path ('side branch' otherwise),
        and the branch's answer when it ends in one."""
        last = self.path[-1] if self.path else None
        answer = None
        if last is not None and last.role == "assistant" and not last.tool_calls:
            answer = text_of(last.content)
        return {
            "status": self.trace.status if self.is_main else "side branch",
            "error": self.trace.error_message if self.is_main else None,
            "answer": answer,
            "ends_with": last.role if last is not None else None,
        }

    def figures(self, messages: list[Message] | None = None) -> dict[str, Any]:
        chosen = self.path if messages is None else messages
        prompt = sum(m.prompt_tokens or 0 for m in chosen)
        completion = sum(m.completion_tokens or 0 for m in chosen)
        cost = round(sum(m.cost or 0.0 for m in chosen), 10)
        unpriced = sum(1 for m in chosen if m.cost is None and m.is_model_reply)
        return {
            "messages": len(chosen),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "total_cost": cost,
            "unpriced_calls": unpriced,
            "cost_text": cost_text(cost, unpriced),
            "duration_ms": sum(m.duration_ms or 0 for m in chosen),
            "tools_called": [name for m in chosen for name in _call_names(m)],
        }


@dataclass
class Row:
    """One aligned step: a message on each side, or on one side only."""

    status: str  # same, changed, only_a, only_b
    a: Message | None
    b: Message | None
    changes: list[str] = field(default_factory=list)
    text_diff: list[tuple[str, str]] = field(default_factory=list)
    call_diffs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Comparison:
    a: Side
    b: Side
    common: int  # how many messages both branches share from the root
    rows: list[Row]

    @property
    def ancestor(self) -> Message | None:
        return self.a.path[self.common - 1] if self.common else None

    @property
    def ancestor_b(self) -> Message | None:
        return self.b.path[self.common - 1] if self.common else None


def branches_compare(*, trace: Trace, a: int, b: int | None = None) -> Comparison:
    """Compare the branch ending at message `a` with the one ending at `b` (default: the head)."""
    heads = (a, trace.head_sequence if b is None else b)
    known = set(Message.objects.filter(trace=trace, sequence__in=heads).values_list("sequence", flat=True))
    for name, head in zip(("a", "b"), heads, strict=True):
        if head not in known:
            raise InvalidComparison(f"{name}: trace {trace.trace_id} has no message {head}")
    sides = [
        Side(trace, head, trace_main_path(trace_id=trace.trace_id, head_sequence=head)) for head in heads
    ]
    return _compare(sides[0], sides[1], same_trace=True)


def traces_compare(*, a: Trace, b: Trace) -> Comparison:
    """Compare two traces' main paths; they must have been given the same task."""
    if (a.task or "").strip() != (b.task or "").strip():
        raise InvalidComparison("b: the traces were given different tasks; compare traces of the same task")
    sides = [Side(t, t.head_sequence, trace_main_path(trace_id=t.trace_id)) for t in (a, b)]
    return _compare(sides[0], sides[1], same_trace=False)


def _compare(a: Side, b: Side, *, same_trace: bool) -> Comparison:
    common = 0
    for left, right in zip(a.path, b.path, strict=False):
        same = left.sequence == right.sequence if same_trace else _gist(left) == _gist(right)
        if not same:
            break
        common += 1
    a.tail, b.tail = a.path[common:], b.path[common:]
    return Comparison(a=a, b=b, common=common, rows=_align(a.tail, b.tail))


def _align(left: list[Message], right: list[Message]) -> list[Row]:
    matcher = difflib.SequenceMatcher(
        a=[_shape(m) for m in left], b=[_shape(m) for m in right], autojunk=False
    )
    rows: list[Row] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        lefts, rights = left[i1:i2], right[j1:j2]
        if tag == "equal":
            rows += [_pair(x, y) for x, y in zip(lefts, rights, strict=True)]
            continue
        paired = min(len(lefts), len(rights))
        rows += [_pair(x, y) for x, y in zip(lefts[:paired], rights[:paired], strict=True)]
        rows += [Row("only_a", x, None) for x in lefts[paired:]]
        rows += [Row("only_b", None, y) for y in rights[paired:]]
    return rows


def _pair(a: Message, b: Message) -> Row:
    changes = []
    if a.role != b.role:
        changes.append("role")
    if text_of(a.content) != text_of(b.content):
        changes.append("content")
    call_diffs = _call_diffs(a.tool_calls or [], b.tool_calls or [])
    if any(d["changed"] for d in call_diffs):
        changes.append("tool_calls")
    text_diff = word_diff(text_of(a.content), text_of(b.content)) if "content" in changes else []
    return Row("changed" if changes else "same", a, b, changes, text_diff, call_diffs)


def word_diff(a: str, b: str) -> list[tuple[str, str]]:
    """(op, text) runs: equal / delete / insert, word by word; one delete and one insert
    when the texts are too long to diff."""
    if len(a) > DIFF_LIMIT or len(b) > DIFF_LIMIT:
        return [("delete", a), ("insert", b)]
    left, right = WORDS.split(a), WORDS.split(b)
    runs: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=left, b=right, autojunk=False).get_opcodes():
        if tag == "equal":
            runs.append(("equal", "".join(left[i1:i2])))
            continue
        if i2 > i1:
            runs.append(("delete", "".join(left[i1:i2])))
        if j2 > j1:
            runs.append(("insert", "".join(right[j1:j2])))
    return runs


def _call_diffs(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per call position: the names and arguments on each side and which argument keys differ."""
    diffs = []
    for index in range(max(len(a), len(b))):
        left = _call(a[index]) if index < len(a) else None
        right = _call(b[index]) if index < len(b) else None
        keys: list[str] = []
        if left and right and isinstance(left["arguments"], dict) and isinstance(right["arguments"], dict):
            names = sorted(set(left["arguments"]) | set(right["arguments"]))
            keys = [k for k in names if left["arguments"].get(k) != right["arguments"].get(k)]
        if left is None or right is None:
            changed = True
        else:
            changed = left["name"] != right["name"] or left["arguments"] != right["arguments"]
        diffs.append({"a": left, "b": right, "changed": changed, "changed_arguments": keys})
    return diffs


def _call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    raw = function.get("arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        arguments = raw
    return {"id": call.get("id"), "name": function.get("name"), "arguments": arguments}


def _call_names(message: Message) -> list[str]:
    return [str((c.get("function") or {}).get("name")) for c in message.tool_calls or []]


def _shape(message: Message) -> tuple[Any, ...]:
    """What aligns two messages: role, tool names, and the text (so equal steps pair up)."""
    return (message.role, tuple(_call_names(message)), message.name, text_of(message.content))


def _gist(message: Message) -> tuple[Any, ...]:
    """What makes two traces' messages the same: role, text, tool names and arguments."""
    calls = tuple(
        (c["name"], json.dumps(c["arguments"], sort_keys=True)) for c in map(_call, message.tool_calls or [])
    )
    return (message.role, message.name, text_of(message.content), calls)

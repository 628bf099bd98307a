"""Microcompact (seed 001 layer 2): older tool results become one-line stubs in the request.

Once the request is above AGENT_MICROCOMPACT_THRESHOLD of the model's context
(default half of it), every tool result older than the newest `keep` results
(AGENT_MICROCOMPACT_KEEP or the run setting `microcompact_keep`, default 5; 0
turns it off) is replaced in the run's in-memory history by a stub naming the
tool, the call's arguments, the size and how to see it again
(`read_result(sequence=N)`, or the same call again when that tool is not
offered). The stored messages are untouched: only requests change, as with the
shown-once results (C3), and a later run of the trace starts from the originals.

Rules:
- Only the content changes: role, tool_call_id and name stay, so every call
  keeps its result and the provider's pairing check passes.
- One step's results are never split: the boundary moves back to the start of
  the step holding the keep-th newest result, so the newest step (the focused
  goal's latest work, and the tail a summary carries) stays whole.
- Shown-once results (C3) are left alone: they already are their long-term
  memory, and a stub pointing at the original would undo "once".
- Results shorter than STUB_MIN_CHARS cost about what their stub would: kept.

Cost: a stub is made once per result; `start` is where the last pass stopped, so
a step looks only at the results that left the newest `keep` since then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings

from traces.models import MessageKind
from traces.runner.compaction import PathInfo, estimate_tokens
from traces.runner.tool_call import ToolCall

if TYPE_CHECKING:
    from traces.runner.state import RunState

READ_BACK_TOOL = "read_result"  # tools/builtin/read_result.py
STUB_PREFIX = "[stubbed to save context:"
STUB_MIN_CHARS = 500
ARGUMENTS_GIST_CHARS = 80


@dataclass
class Stubbing:
    """What one pass stubbed: the `compaction` event's payload (level "microcompact")."""

    sequences: list[int] = field(default_factory=list)
    tools: dict[str, int] = field(default_factory=dict)
    chars_saved: int = 0
    tokens_saved: int = 0

    def payload(self, keep: int, tokens_before: int) -> dict[str, Any]:
        return {
            "level": "microcompact",
            "stubbed_count": len(self.sequences),
            "chars_saved": self.chars_saved,
            "tools": self.tools,
            "tokens_before": tokens_before,
            "tokens_after": tokens_before - self.tokens_saved,
            "keep": keep,
            "stubbed_sequences": self.sequences,
        }


def trigger_tokens(limit: int) -> int:
    """Microcompact starts above this many request tokens: AGENT_MICROCOMPACT_THRESHOLD of
    the model's context `limit` (0: always, as the seed's layer 2)."""
    return int(limit * settings.AGENT_MICROCOMPACT_THRESHOLD)


def microcompact(run: RunState) -> dict[str, Any] | None:
    """Stub what left the newest `keep` results since the last pass; the event payload,
    or None when nothing new was stubbed. The caller checked the trigger."""
    start = min(run.microcompact_done, len(run.llm_messages))
    end = keep_from(run.llm_messages, run.microcompact_keep, start)
    if end <= start:
        return None
    tokens_before = run.token_total
    done = stub_results(run.llm_messages, run.infos, start, end, readable=READ_BACK_TOOL in run.offered)
    run.microcompact_done = end
    if not done.sequences:
        return None
    run.token_total -= done.tokens_saved
    return done.payload(run.microcompact_keep, tokens_before)


def keep_from(messages: list[dict[str, Any]], keep: int, floor: int) -> int:
    """Index of the first message the pass must leave whole (>= floor).

    The keep-th newest tool result, moved back to the first result of its step.
    The scan stops at `floor`, where the previous pass ended: what lies below
    it was handled already, so a step costs the distance to the keep-th result.
    """
    seen = 0
    index = len(messages)
    while index > floor:
        index -= 1
        if messages[index]["role"] == "tool":
            seen += 1
            if seen == keep:
                break
    if seen < keep:
        return floor
    while index > floor and messages[index - 1]["role"] == "tool":
        index -= 1
    return index


def stub_results(
    messages: list[dict[str, Any]], infos: list[PathInfo], start: int, end: int, *, readable: bool
) -> Stubbing:
    """Replace, in place, the stubbable tool results in messages[start:end] by stubs.

    The cheap tests come first: a first pass over a loaded 10,000-message path
    looks at every message once and builds nothing for results it keeps."""
    done = Stubbing()
    once = str(MessageKind.ONCE)  # an enum member's lookup costs more than the comparison
    caller = _caller_of(messages, start)
    for index in range(start, end):
        data = messages[index]
        role = data["role"]
        if role != "tool":
            if role == "assistant":
                caller = index
            continue
        content = data.get("content")
        if not isinstance(content, str) or len(content) < STUB_MIN_CHARS or content.startswith(STUB_PREFIX):
            continue
        info = infos[index]
        if info.sequence is None or info.kind == once:
            continue
        call = ToolCall.of(_call(messages, caller, data.get("tool_call_id")))
        tool = str(data.get("name") or call.name or "tool")
        stubbed = {**data, "content": stub(tool, call.arguments, content, info.sequence, readable)}
        messages[index] = stubbed
        tokens = estimate_tokens(stubbed)
        done.sequences.append(info.sequence)
        done.tools[tool] = done.tools.get(tool, 0) + 1
        done.chars_saved += len(content) - len(stubbed["content"])
        done.tokens_saved += info.tokens - tokens
        info.tokens = tokens
    return done


def stub(tool: str, arguments: Any, content: str, sequence: int, readable: bool) -> str:
    """The one line a result becomes: what was called, how big it was, how to see it again."""
    gist = " ".join(str(arguments or "")[: 4 * ARGUMENTS_GIST_CHARS].split())
    if len(gist) > ARGUMENTS_GIST_CHARS:
        gist = gist[: ARGUMENTS_GIST_CHARS - 1] + "…"
    again = (
        f"{READ_BACK_TOOL}(sequence={sequence}) shows it again"
        if readable
        else "call the tool again if you need it"
    )
    return f"{STUB_PREFIX} {tool}({gist}) returned {len(content):,} characters (message {sequence}); {again}]"


def _caller_of(messages: list[dict[str, Any]], index: int) -> int:
    """Index of the assistant message whose results messages[index:] continue (-1: none)."""
    while index > 0 and messages[index - 1]["role"] == "tool":
        index -= 1
    return index - 1


def _call(messages: list[dict[str, Any]], caller: int, call_id: Any) -> dict[str, Any]:
    """The call `call_id` of the assistant message at `caller`, or {}."""
    calls = messages[caller].get("tool_calls") or () if caller >= 0 else ()
    return next((c for c in calls if isinstance(c, dict) and c.get("id") == call_id), {})

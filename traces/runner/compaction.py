"""Context management (C1-C5): keep every model request inside the model's context.

The runner keeps the main path in memory as OpenAI dicts plus one `PathInfo` per
dict (sequence, goal, kind, estimated tokens) and a running token total, so the
check before each model call costs nothing while the history fits.

Over the threshold (0.8 x the model's context, from litellm's model info or
AGENT_CONTEXT_TOKENS):

- Level 1 (deterministic, not persisted): messages of completed or abandoned goals
  are left out of the request (their summaries are in the plan, which is added in
  their place), as are stale context injections; the system prompt, every user
  message and the open goals' messages stay.
- Level 2 (persisted): if the request is still too big, a reflection side branch
  first extracts experiences (memory/reflect.py), then the model writes a
  9-section summary. The summary is stored as a message whose parent is the first
  user message, so it skips the compressed range; the unanswered tail (the last
  tool round, or new user input) is carried after it. The originals stay stored:
  rewinding into the range brings them back.
- Circuit breaker: after 3 failed summaries in a row the trace stops trying.
  Recursion guard: nothing is compacted twice with nothing new in between, and the
  summary request itself never goes through compaction.
- Fallback (not persisted): when no summary helps (it failed, the breaker is open,
  or there is nothing left to compress) the request is truncated deterministically
  (`truncate`: the system prompt, the first user message, the plan, and the newest
  messages that fit), so no request goes over the threshold (seed 002).

Every compaction is a `compaction` event with what was dropped (C5).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

from traces.goal_tree import CLOSED
from traces.llm import LLMError
from traces.media.parts import IMAGE_TOKENS, media_placeholders
from traces.models import MessageKind
from traces.runner.extensions import extensions

if TYPE_CHECKING:
    from traces.models import Message
    from traces.selectors import PathMessage

logger = logging.getLogger(__name__)

FAILURE_LIMIT = 3
SUMMARY_MARKER = "[COMPACT]"
SUMMARY_PROMPT = """[COMPACT REQUEST] The conversation is too long for the model's context. Write a
handoff summary that lets you continue the task without the messages above. Use exactly
these sections, each a short Markdown list:

1. Primary request and intent
2. Key technical concepts
3. Files and code sections (paths, what was read or changed)
4. Errors and fixes
5. Problem solving so far
6. All user messages (each, briefly)
7. Pending tasks
8. Current work (file and function level)
9. Next step

The plan, with the summaries of finished goals:

{plan}

Answer with the summary only."""


@dataclass(slots=True)
class PathInfo:
    """What the runner knows of one request message beyond its OpenAI dict."""

    sequence: int | None  # None for a placeholder that is not stored
    goal_id: str | None
    kind: str
    tokens: int


def estimate_tokens(message: dict[str, Any]) -> int:
    """~4 characters a token, no tokenizer: cheap enough for every message; an image or
    other non-text part counts IMAGE_TOKENS whatever its size."""
    content = message.get("content")
    if isinstance(content, list):
        size = sum(len(part.get("text", "")) if isinstance(part, dict) else 0 for part in content)
        size += (
            4
            * IMAGE_TOKENS
            * sum(1 for part in content if isinstance(part, dict) and part.get("type") != "text")
        )
    else:
        size = len(content or "")
    for call in message.get("tool_calls") or ():
        size += _tool_call_chars(call)
    return size // 4 + 4


def _tool_call_chars(call: Any) -> int:
    """About len(json.dumps(call)) without serialising it: the envelope's ~73
    characters plus the id, name and arguments."""
    if not isinstance(call, dict):
        return len(str(call))
    function = call.get("function")
    if not isinstance(function, dict):
        return len(str(call))
    parts = (call.get("id"), function.get("name"), function.get("arguments"))
    return 73 + sum(len(part) if isinstance(part, str) else len(str(part or "")) for part in parts)


def info_for(message: Message | PathMessage, data: dict[str, Any]) -> PathInfo:
    return PathInfo(message.sequence, message.goal_id, message.kind, estimate_tokens(data))


def context_limit(model: str) -> int:
    """The model's input context in tokens: AGENT_CONTEXT_TOKENS, litellm's model info, or 128k."""
    if settings.AGENT_CONTEXT_TOKENS:
        return settings.AGENT_CONTEXT_TOKENS
    import litellm

    litellm.suppress_debug_info = True  # no "Provider List" banner for models it does not know
    try:
        info = litellm.get_model_info(model)
    except Exception:
        return 128_000
    return int(info.get("max_input_tokens") or info.get("max_tokens") or 128_000)


def context_threshold(model: str) -> int:
    return int(context_limit(model) * settings.AGENT_COMPACTION_THRESHOLD)


# --- level 1 -------------------------------------------------------------------


def level_one(
    messages: list[dict[str, Any]], infos: list[PathInfo], goal_tree: Any
) -> tuple[list[dict[str, Any]], list[int], int]:
    """The request without closed goals' messages, the sequences left out, and the
    request's estimated tokens (each kept message's from its PathInfo, which holds
    `estimate_tokens` of the message as it is now: nothing is estimated again)."""
    closed = {gid for gid, goal in goal_tree.goals.items() if goal.status in CLOSED}
    latest_context = max((i for i, info in enumerate(infos) if info.kind == MessageKind.CONTEXT), default=-1)
    out: list[dict[str, Any]] = []
    dropped: list[int] = []
    tokens = 0
    first_user = next((i for i, m in enumerate(messages) if m["role"] == "user"), -1)
    skipping = False
    for index, (message, info) in enumerate(zip(messages, infos, strict=True)):
        role = message["role"]
        if index == 0 or role == "user":
            skipping = False
            keep = True
        elif info.kind == MessageKind.CONTEXT:
            keep = index == latest_context
        elif role == "assistant":
            skipping = info.goal_id in closed
            keep = not skipping
        elif role == "tool":
            keep = not skipping
        else:
            keep = info.goal_id not in closed
        if keep:
            out.append(message)
            tokens += info.tokens
            if index == first_user and closed:
                plan = {
                    "role": "system",
                    "content": "## Plan so far (finished goals are summarised here)\n\n"
                    + goal_tree.to_prompt(include_summary=True),
                }
                out.append(plan)
                tokens += estimate_tokens(plan)
        elif info.sequence is not None:
            dropped.append(info.sequence)
    return out, dropped, tokens


# --- level 2 -------------------------------------------------------------------


def carried_start(messages: list[dict[str, Any]], infos: list[PathInfo]) -> int:
    """Index where the tail the model has not answered yet begins (kept verbatim)."""
    index = len(messages)
    while (
        index > 0
        and messages[index - 1]["role"] in ("tool", "user")
        and infos[index - 1].kind != MessageKind.SUMMARY
    ):
        index -= 1
    if index > 0 and index < len(messages) and messages[index - 1].get("tool_calls"):
        index -= 1  # the assistant whose results are in the tail
    return max(index, 2)


def summary_request(
    messages: list[dict[str, Any]], infos: list[PathInfo], plan: str, budget: int
) -> list[dict[str, Any]]:
    """What the summarizer reads: head, as much recent history as fits, the prompt."""
    prompt = {"role": "user", "content": SUMMARY_PROMPT.format(plan=plan)}
    head = messages[:2]
    room = budget - sum(estimate_tokens(m) for m in head) - estimate_tokens(prompt)
    start = len(messages)
    while start > 2 and room - infos[start - 1].tokens > 0:
        start -= 1
        room -= infos[start].tokens
    while start < len(messages) and messages[start]["role"] == "tool":
        start += 1  # never open the window between a call and its results
    omitted = start - 2
    gap = (
        [{"role": "user", "content": f"[... {omitted} earlier messages omitted ...]"}] if omitted > 0 else []
    )
    return media_placeholders([*head, *gap, *messages[start:], prompt])  # the summary reads text


def truncate(
    messages: list[dict[str, Any]], infos: list[PathInfo], plan: str, budget: int
) -> tuple[list[dict[str, Any]], list[int]]:
    """The request cut to `budget` tokens, and the sequences left out.

    Keeps the system prompt, the first user message, the plan (as a system
    message) and the newest messages that fit; a cut never falls between a
    call and its results. The newest turn (a call and its results) is kept
    even when alone it does not fit (the spill keeps tool results small).
    """
    first_user = next((i for i, m in enumerate(messages) if m["role"] == "user"), 0)
    head = messages[: first_user + 1]
    note = {"role": "system", "content": f"## Plan so far (older messages were left out)\n\n{plan}"}
    room = budget - sum(info.tokens for info in infos[: first_user + 1]) - estimate_tokens(note)
    start = len(messages) - 1
    room -= infos[start].tokens
    while start > first_user + 1 and room - infos[start - 1].tokens >= 0:
        start -= 1
        room -= infos[start].tokens
    while start > first_user + 1 and messages[start]["role"] == "tool":
        start -= 1  # never open the window between a call and its results
    dropped = [info.sequence for info in infos[first_user + 1 : start] if info.sequence is not None]
    return [*head, note, *messages[start:]], dropped


def boundary(compressed: int, last_sequence: int | None, tokens_before: int) -> str:
    """The summary's first line (seed 001 Auto-Compact's boundary marker): a hand-off,
    with the tokens before compaction and the last message it covers."""
    last = f" up to message #{last_sequence}" if last_sequence is not None else ""
    return (
        f"{SUMMARY_MARKER} Session continuation, a hand-off and not a fresh start: {compressed} messages"
        f"{last} ({tokens_before:,} tokens before compaction) were compacted. "
        "Summary of the conversation so far:"
    )


def already_compacted(infos: list[PathInfo]) -> bool:
    """Recursion guard: the last summary has nothing but its re-attached context and
    carried tail after it."""
    for info in reversed(infos):
        if info.kind == MessageKind.SUMMARY:
            return True
        if info.kind not in (MessageKind.CARRIED, MessageKind.CONTEXT):
            return False
    return False


@dataclass
class SummaryOutcome:
    text: str | None
    error: str | None = None


def write_summary(llm_call: Any, model: Any, request: list[dict[str, Any]]) -> SummaryOutcome:
    try:
        response = llm_call(request, model=model, tools=None, params={}, stream=False, on_token=None)
    except LLMError as exc:
        return SummaryOutcome(None, str(exc))
    text = (response.content or "").strip()
    if not text:
        return SummaryOutcome(None, "the summary came back empty")
    return SummaryOutcome(text)


def reflect_before_compaction(store: Any, llm_call: Any) -> None:
    """C2 step 1: experiences from the history about to be compressed (the registered
    `before_compaction` extensions: memory's reflection side branch; best effort)."""
    if not settings.AGENT_COMPACTION_REFLECT:
        return
    for hook in extensions.before_compaction:
        try:
            hook(store, llm_call)
        except Exception:
            logger.exception("reflection before compaction failed for %s", store.trace.trace_id)


# --- C3: oversized results -------------------------------------------------------


def spill(workspace: Path, message_id: str, content: str) -> str:
    """Write an oversized tool result to the workspace; the model gets a preview and a path."""
    relative = Path(".agentsite") / "spill" / f"{message_id}.txt"
    target = workspace / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    preview = content[: settings.AGENT_TOOL_SPILL_PREVIEW]
    return (
        f"{preview}\n\n[output too large: {len(content):,} characters; the full text is in "
        f'{relative.as_posix()} — read it with read(path="{relative.as_posix()}", offset=..., limit=...)]'
    )


def cut(content: str) -> str:
    """An oversized tool result where nothing may be written (a read-only project): its start and a note."""
    preview = content[: settings.AGENT_TOOL_SPILL_PREVIEW]
    return (
        f"{preview}\n\n[output too large: {len(content):,} characters, only the first {len(preview):,} "
        "kept; the workspace is read-only, so the rest was not saved. Narrow the command or the read.]"
    )


def shown_once(description: str) -> str:
    return f"[output shown once; kept as] {description}"

"""What `traces/llm.py:LLMClient` sends: the messages made fit for the provider (L2, L5).

Two per-message transforms, both pure functions of one message and the model:

- L2, tool_call ids: an id the provider would reject is rewritten (a stable hash),
  in the call and in its result alike, so pairs stay matched.
- L5, images: a stored `media:` reference becomes inline data again
  (`traces/media/request.py`).

Each model call sends the whole history, so `request_messages` remembers per
message, by identity, what L2 made of it and whether it holds an image: a call
looks at the messages it has not seen before (the new tail of a run's history)
and finds the rest with C-level lookups. Stored history is never changed.

Precondition: a message dict's tool-call ids and content are not edited in
place once sent (the runner replaces a message with a new dict, as microcompact,
shown-once results and project context do). A rewind, a branch switch or a new
run loads new dicts, which are new to the memo, so nothing stale is served.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from dataclasses import dataclass, field
from itertools import compress, islice
from operator import not_
from typing import Any

from traces.media.parts import image_url
from traces.media.request import accepts_images, media_message

_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MEMO_LIMIT = 20_000  # messages remembered per provider; the oldest half goes past it


@functools.lru_cache(maxsize=256)
def _provider(model: str) -> str:
    """litellm's provider of `model` (remembered: a model string names one provider)."""
    import litellm

    try:
        return litellm.get_llm_provider(model)[1]
    except Exception:
        return model.split("/", 1)[0] if "/" in model else "openai"


def provider_name(model: str) -> str:
    """The provider litellm routes `model` to ("openai", "anthropic", ...)."""
    return _provider(model)


def _id_ok(tool_call_id: str, provider: str) -> bool:
    if provider in {"anthropic", "bedrock", "vertex_ai"}:
        return bool(_ANTHROPIC_ID.match(tool_call_id))
    if provider in {"gemini"}:
        return True  # Gemini pairs calls and results by function name
    return 0 < len(tool_call_id) <= 40


def _rewrite_id(tool_call_id: str) -> str:
    return "call_" + hashlib.sha1(tool_call_id.encode()).hexdigest()[:24]


# A reasoning model's thinking as litellm and the providers spell it on a message:
# DeepSeek answers 400 to a request that carries it back, so no request does.
REASONING_KEYS = frozenset({"reasoning_content", "thinking_blocks", "reasoning"})


def normalized_message(message: dict[str, Any], provider: str) -> dict[str, Any]:
    """`message` with the tool_call ids `provider` would reject rewritten and any
    reasoning left out; itself when nothing changes.

    An id's fate depends on the id alone, so a call and its result, rewritten
    apart, still match."""
    if not REASONING_KEYS.isdisjoint(message):
        message = {key: value for key, value in message.items() if key not in REASONING_KEYS}
    calls = message.get("tool_calls")
    if calls:
        if all(_id_ok(str(c.get("id", "")), provider) for c in calls):
            return message
        return {
            **message,
            "tool_calls": [
                c
                if _id_ok(str(c.get("id", "")), provider)
                else {**c, "id": _rewrite_id(str(c.get("id", "")))}
                for c in calls
            ],
        }
    if message.get("role") == "tool":
        call_id = str(message.get("tool_call_id", ""))
        if not _id_ok(call_id, provider):
            return {**message, "tool_call_id": _rewrite_id(call_id)}
    return message


def normalize_tool_call_ids(messages: list[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    """Rewrite tool_call ids the target provider would reject, keeping pairs matched.

    Returns `messages` itself when every id already fits. Looks at every message:
    the reference `request_messages` must agree with (tests/traces/test_llm_request.py)."""
    provider = _provider(model)
    out = [normalized_message(m, provider) for m in messages]
    return messages if all(a is b for a, b in zip(out, messages, strict=True)) else out


def _has_image(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(image_url(p) for p in content)


@dataclass
class _Memo:
    """One provider's remembered messages."""

    # id(message) -> (message, its L2 form); holding the message keeps its id its own
    entries: dict[int, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)
    rewritten: set[int] = field(default_factory=set)  # ids whose L2 form is a copy
    images: set[int] = field(default_factory=set)  # ids holding an image part


class RequestMemo:
    """Per-message L2 forms and image flags of recent requests, by message identity.

    Thread-safe: concurrent runs share one memo per provider (one lock; the work
    under it is C-level lookups plus the new messages)."""

    def __init__(self, limit: int = MEMO_LIMIT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._memos: dict[str, _Memo] = {}

    def prepare(self, messages: list[dict[str, Any]], model: str) -> list[dict[str, Any]]:
        """The request as the model gets it: `messages` itself when nothing changes."""
        provider = _provider(model)
        keys = list(map(id, messages))
        with self._lock:
            memo = self._memos.setdefault(provider, _Memo())
            entries = memo.entries
            for message in compress(messages, map(not_, map(entries.__contains__, keys))):
                self._remember(memo, message, provider)
            unchanged = memo.rewritten.isdisjoint(keys)
            with_images = not memo.images.isdisjoint(keys)
            out = messages if unchanged else [entries[k][1] for k in keys]
            image_at = [i for i, k in enumerate(keys) if k in memo.images] if with_images else []
            self._evict(memo)
        if not image_at:
            return out
        out = list(out)  # images: a new list, the caller's stays as it was
        vision = accepts_images(model)
        for index in image_at:
            out[index] = media_message(out[index], vision, model)
        return out

    def _remember(self, memo: _Memo, message: dict[str, Any], provider: str) -> None:
        key = id(message)
        normalized = normalized_message(message, provider)
        memo.entries[key] = (message, normalized)
        if normalized is not message:
            memo.rewritten.add(key)
        if _has_image(message):
            memo.images.add(key)

    def _evict(self, memo: _Memo) -> None:
        """Past the limit, forget the oldest half (by first sight); a run's history
        that was forgotten is looked at once more on its next call."""
        if len(memo.entries) <= self.limit:
            return
        for key in list(islice(memo.entries, len(memo.entries) - self.limit // 2)):
            del memo.entries[key]
            memo.rewritten.discard(key)
            memo.images.discard(key)


_memo = RequestMemo()


def request_messages(messages: list[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    """What LLMClient sends for `messages`: L5 images inline, L2 ids fitted; remembered per message."""
    return _memo.prepare(messages, model)


def wire_messages(messages: list[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    """`request_messages` without the memo: L2 ids fitted, then L5 images inline.

    For messages read back from storage ("what the model saw"): same result, and the
    process's memo is left to the runs."""
    fitted = normalize_tool_call_ids(messages, model)
    if not any(map(_has_image, fitted)):
        return fitted
    vision = accepts_images(model)
    return [media_message(m, vision, model) if _has_image(m) else m for m in fitted]

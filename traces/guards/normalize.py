"""Guards around one model call (G2, G3): what comes back is made safe to use.

- `normalize_response`: tool calls named "None", "null" or nothing are dropped;
  when a model without native tool calls writes a call into its text
  (`<tool_call>{"name": …, "arguments": …}</tool_call>`, or a JSON object that is
  the whole reply or a fenced block), and it names a tool offered to the run, it
  becomes a real tool call.
- `TokenWatch`: collects streamed deltas from the model thread and remembers when
  the stream last showed life, for the G3 heartbeat and first-feedback timeouts.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from traces.llm import LLMError, LLMResponse
from traces.storable import without_nul

INVALID_TOOL_NAMES = {"", "none", "null", "undefined"}
_TAGGED = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)


class ModelTimeout(LLMError):
    """A model call ran past one of the G3 timeouts and was abandoned."""


def _inline_call(raw: str, offered: set[str]) -> dict[str, Any] | None:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    name = data.get("name") or data.get("tool")
    arguments = data.get("arguments", data.get("parameters", data.get("args", {})))
    if not isinstance(name, str) or name not in offered or not isinstance(arguments, (dict, str)):
        return None
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments)
    call_id = "call_inline_" + hashlib.sha1(raw.encode()).hexdigest()[:16]
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def extract_inline_tool_calls(text: str, offered: set[str]) -> tuple[list[dict[str, Any]], str]:
    """Tool calls written into plain text, and the text that is left."""
    calls = []
    rest = text
    for pattern in (_TAGGED, _FENCED):
        for match in pattern.finditer(text):
            call = _inline_call(match.group(1), offered)
            if call is not None:
                calls.append(call)
                rest = rest.replace(match.group(0), "")
        if calls:
            return calls, rest.strip()
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        call = _inline_call(stripped, offered)
        if call is not None:
            return [call], ""
    return [], text


def normalize_response(response: LLMResponse, offered: set[str]) -> LLMResponse:
    # No NUL characters past this point (PostgreSQL stores none): the calls that
    # run, and the approvals that record them, are the calls as stored; the text
    # becomes the trace's result.
    response = replace(
        response,
        content=without_nul(response.content),
        tool_calls=without_nul(response.tool_calls),
        reasoning=without_nul(response.reasoning),
    )
    calls = [
        c
        for c in response.tool_calls
        if str(c["function"].get("name") or "").strip().lower() not in INVALID_TOOL_NAMES
    ]
    if calls or response.tool_calls:
        return response if len(calls) == len(response.tool_calls) else replace(response, tool_calls=calls)
    if response.content and offered:
        extracted, rest = extract_inline_tool_calls(response.content, offered)
        if extracted:
            return replace(response, tool_calls=extracted, content=rest or None, finish_reason="tool_calls")
    return response


class TokenWatch:
    """Thread-safe buffer of streamed text, with the time of the last chunk."""

    def __init__(self, forward: Callable[[str], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._parts: list[str] = []
        self._forward = forward
        self.first_at: float | None = None
        self.last_at: float | None = None

    def __call__(self, text: str) -> None:
        now = time.perf_counter()
        with self._lock:
            self.first_at = self.first_at or now
            self.last_at = now
            if text:
                self._parts.append(text)
        if text and self._forward is not None:
            self._forward(text)

    def drain(self) -> str:
        with self._lock:
            text, self._parts = "".join(self._parts), []
        return text

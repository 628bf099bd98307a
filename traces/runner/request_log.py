"""What each model call of a run was sent, recorded compactly ("what the model saw", issue 22).

`_call_model` hands `RequestLog.sent` the request exactly as it goes to
`LLMClient` (after compaction, microcompact, context and memory injection and the
lifecycle hooks); the assistant message the reply becomes calls `record`, which
adds the rows (`traces/observability/models.py`) to that step's fenced commit, in its
one statement on PostgreSQL (`traces/runner/fenced.py`).

The encoding is against the previous recorded request of this run, by object
identity: the runner's history keeps the same dicts from call to call and replaces
a dict it changes (microcompact, show-once, project context), so an unchanged
message is the same object. A step costs a digest per new dict and C-level identity
scans; an unchanged run of messages becomes one `[start, length]` slice.

L2 (tool_call ids) and L5 (images inline) are not applied here: they are pure
functions of a message and the model (`traces/llm_request.py:wire_messages`),
applied again on reading, so an image is stored once as its `media:` reference.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from itertools import compress, count, islice
from operator import is_not
from typing import TYPE_CHECKING, Any

from traces.observability.models import ModelRequest, RequestPart
from traces.storable import without_nul

if TYPE_CHECKING:
    from traces.runner.store import RunStore


STORED_CHECK = 16  # a run's first request with more new parts than this asks which are stored


def digest(value: Any) -> str:
    """The content address of a message dict or a tools list: its canonical JSON's sha256, 128 bits."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class _Sent:
    """A request sent and not yet recorded (its reply may never become a message)."""

    messages: list[dict[str, Any]]
    parts: list[str | list[int]]
    new: dict[str, Any]  # digest -> body not yet written by this run
    tools: str
    model: str
    parameters: dict[str, Any]


@dataclass
class RequestLog:
    """One run's recorder; owned by the run's thread (RunState.request_log)."""

    # id(dict) -> (the dict, its digest); holding the dict keeps its id its own
    _digests: dict[int, tuple[Any, str]] = field(default_factory=dict)
    _written: set[str] = field(default_factory=set)  # digests this run has written
    _base: tuple[int, list[dict[str, Any]]] | None = None  # (sequence, messages) of the last record
    _pending: _Sent | None = None

    def sent(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None,
        model: str,
        parameters: dict[str, Any],
    ) -> None:
        """Note the request `_call_model` sends now."""
        new: dict[str, Any] = {}
        tools_digest = self._digest_of(tools, new) if tools else ""
        parts = self._encode(messages, new)
        # a copy: the runner may send its live history list, which grows after the call
        self._pending = _Sent(list(messages), parts, new, tools_digest, model, parameters)

    def record(self, store: RunStore, sequence: int) -> None:
        """The reply became assistant message `sequence`: its request is written with that step."""
        sent, self._pending = self._pending, None
        if sent is None:
            return
        trace_id = store.trace.trace_id
        base = (
            self._base[0] if self._base is not None and any(isinstance(p, list) for p in sent.parts) else None
        )
        new = sent.new
        if not self._written and len(new) > STORED_CHECK:
            new = self._not_stored(trace_id, new)  # a continued trace: an earlier segment sent most
        parts = [RequestPart(trace_id=trace_id, digest=d, body=without_nul(b)) for d, b in new.items()]
        row = ModelRequest(
            trace_id=trace_id,
            sequence=sequence,
            base_sequence=base,
            parts=sent.parts,
            tools=sent.tools,
            model=sent.model,
            parameters=without_nul(sent.parameters),
        )
        store.insert(RequestPart, parts, keep_existing=True)  # another segment may have it
        store.insert(ModelRequest, [row])
        self._written.update(sent.new)
        self._base = (sequence, sent.messages)
        self._forget(sent.messages)

    def _not_stored(self, trace_id: str, new: dict[str, Any]) -> dict[str, Any]:
        """`new` without the parts the trace already has: one read of the trace's digests,
        a range of its unique (trace, digest) index (bench/step_overhead.py "again")."""
        stored = set(RequestPart.objects.filter(trace_id=trace_id).values_list("digest", flat=True))
        stored &= new.keys()
        self._written.update(stored)
        return {d: b for d, b in new.items() if d not in stored}

    # --- encoding ----------------------------------------------------------------

    def _digest_of(self, value: Any, new: dict[str, Any]) -> str:
        known = self._digests.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        found = digest(value)
        self._digests[id(value)] = (value, found)
        if found not in self._written:
            new[found] = value
        return found

    def _encode(self, messages: list[dict[str, Any]], new: dict[str, Any]) -> list[str | list[int]]:
        base = self._base[1] if self._base is not None else []
        parts: list[str | list[int]] = []
        where: dict[int, int] | None = None  # id -> index in base, built only when order changed
        expected = 0  # where in base the next message is if nothing moved
        at = 0
        while at < len(messages):
            message = messages[at]
            start: int | None = None
            if expected < len(base) and base[expected] is message:
                start = expected
            elif id(message) in self._digests and base:
                if where is None:
                    where = {id(m): i for i, m in enumerate(base)}
                start = where.get(id(message))
            if start is None:
                parts.append(self._digest_of(message, new))
                at += 1
                expected += 1
                continue
            length = _same_run(base, start, messages, at)
            parts.append([start, length])
            at += length
            expected = start + length
        return parts

    def _forget(self, keep: list[dict[str, Any]]) -> None:
        """Drop digests of dicts no longer sent once the memo is twice what a request holds."""
        if len(self._digests) <= 2 * len(keep) + 64:
            return
        ids = set(map(id, keep))
        self._digests = {k: v for k, v in self._digests.items() if k in ids}


def _same_run(base: list[Any], start: int, messages: list[Any], at: int) -> int:
    """How many items from base[start] and messages[at] on are the same objects (at least 1)."""
    differ = compress(count(), map(is_not, islice(base, start, None), islice(messages, at, None)))
    first = next(differ, None)
    return first if first is not None else min(len(base) - start, len(messages) - at)

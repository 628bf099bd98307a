"""A streamed reply folded chunk by chunk as it arrives (issue 18: CPU per model call).

litellm's `stream_chunk_builder` rebuilds a whole `ModelResponse` from the kept
chunks at the end of a stream and prices it (for a model litellm has no price
for, by raising and catching an exception); with the litellm logging's own
assembly that was ~10 % of a run's CPU. What a reply is to us is small: its text,
reasoning, tool calls, finish reason, usage and model. `StreamedReply` keeps just
that, folding each chunk's delta as the loop hands it on (it reads like a response
and its message: `content`, `tool_calls`, `reasoning_content`, `usage`, `model`), so nothing is kept or
rebuilt; the price is read from litellm's cost map once per model and usage
(`price`), and a model without a price is remembered as such.

Tool-call deltas are joined by their `index` (OpenAI's wire format: the first
piece carries the id and name, later ones append to the arguments); a piece
that carries a new id under an index already taken, or no index, starts a new
call (providers that send each call whole).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

_unpriced: set[str] = set()
_unpriced_lock = threading.Lock()


@dataclass
class _Call:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamedReply:
    """The parts of a streamed reply, folded as its chunks arrive."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Any = None
    model: str | None = None
    chunks: int = 0

    def add(self, chunk: Any) -> tuple[str | None, bool]:
        """Fold one chunk in; (its text, whether it carried a tool-call or reasoning piece)."""
        self.chunks += 1
        self.model = getattr(chunk, "model", None) or self.model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = usage
        choice = chunk.choices[0] if getattr(chunk, "choices", None) else None
        if choice is None:
            return None, False
        if getattr(choice, "finish_reason", None):
            self.finish_reason = choice.finish_reason
        delta = getattr(choice, "delta", None)
        if delta is None:
            return None, False
        text = getattr(delta, "content", None)
        if text:
            self.text.append(text)
        reasoning = getattr(delta, "reasoning_content", None)
        if isinstance(reasoning, str) and reasoning:
            self.reasoning.append(reasoning)
        pieces = getattr(delta, "tool_calls", None) or []
        for piece in pieces:
            self._add_call_piece(piece)
        return text, bool(pieces or reasoning)

    def _add_call_piece(self, piece: Any) -> None:
        index = _get(piece, "index")
        piece_id = _get(piece, "id")
        if not isinstance(index, int):
            index = len(self.calls) if piece_id or not self.calls else max(self.calls)
        elif piece_id and index in self.calls and self.calls[index].id not in (None, piece_id):
            index = max(self.calls) + 1  # another whole call under a reused index
        call = self.calls.setdefault(index, _Call())
        call.id = call.id or piece_id
        function = _get(piece, "function")
        if function is not None:
            call.name = call.name or (_get(function, "name") or "")
            arguments = _get(function, "arguments")
            if arguments:
                call.arguments.append(arguments)

    # --- the reply, as traces/llm.py reads it -------------------------------------

    @property
    def content(self) -> str | None:
        return "".join(self.text) if self.text else None

    @property
    def reasoning_content(self) -> str | None:
        return "".join(self.reasoning) if self.reasoning else None

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": "".join(call.arguments)},
            }
            for _, call in sorted(self.calls.items())
        ]


def price(model: str, usage: Any) -> float | None:
    """The reply's cost from litellm's cost map (cached and reasoning tokens as litellm
    counts them), or None when the model has no price; a model found unpriced once
    is not looked up again in this process."""
    if usage is None or model in _unpriced:
        return None
    import litellm

    litellm.suppress_debug_info = True  # no "Provider List" banner for unpriced models
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(model=model, usage_object=usage)
    except Exception:
        with _unpriced_lock:
            _unpriced.add(model)
        return None
    return float(prompt_cost) + float(completion_cost)


def forget_prices() -> None:
    """Look every model's price up again (after the price map changed: register_model_prices)."""
    with _unpriced_lock:
        _unpriced.clear()


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else getattr(value, key, None)

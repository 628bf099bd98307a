"""Reading back what a model call was sent ("what the model saw", issue 22)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traces.llm_request import wire_messages
from traces.models import Message
from traces.observability.models import ModelRequest, RequestPart
from traces.runner import RunError

CHUNK = 500  # digests per IN (...) query, under every database's parameter limit


class RequestNotFound(RunError):
    """No recorded request for that message (not an assistant message, or made before requests were recorded)."""

    status = 404


@dataclass(frozen=True)
class SeenRequest:
    """One model call's request as it reached litellm, L2 and L5 applied again."""

    sequence: int
    message_id: str
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    parameters: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence,
            "message_id": self.message_id,
            "model": self.model,
            "messages": self.messages,
            "tools": self.tools,
            "parameters": self.parameters,
        }


def model_request(*, trace_id: str, sequence: int) -> SeenRequest:
    """The request that produced assistant message `sequence` of `trace_id` (RequestNotFound if none).

    Three queries: the chain of records the request's slices copy from (one read of
    the trace's small rows up to it), then its parts, then the message id check."""
    rows = {
        row[0]: row
        for row in ModelRequest.objects.filter(trace_id=trace_id, sequence__lte=sequence)
        .order_by("sequence")
        .values_list("sequence", "base_sequence", "parts", "tools", "model", "parameters")
    }
    if sequence not in rows:
        raise RequestNotFound(f"message {sequence} of trace {trace_id!r} has no recorded model request")
    chain = []
    at: int | None = sequence
    while at is not None:
        row = rows[at]
        chain.append(row[2])
        at = row[1]
    digests = decode(list(reversed(chain)))
    _, _, _, tools, model, parameters = rows[sequence]
    bodies = _bodies(trace_id, {*digests, tools} - {""})
    message_id = Message.make_id(trace_id, sequence)
    return SeenRequest(
        sequence=sequence,
        message_id=message_id,
        model=model,
        messages=wire_messages([bodies[d] for d in digests], model),
        tools=bodies[tools] if tools else None,
        parameters=parameters,
    )


def decode(chain: list[list[Any]]) -> list[str]:
    """The digests of the last request of `chain` (each item one request's `parts`, oldest first)."""
    previous: list[str] = []
    for parts in chain:
        current: list[str] = []
        for part in parts:
            if isinstance(part, str):
                current.append(part)
            else:
                start, length = part
                current.extend(previous[start : start + length])
        previous = current
    return previous


def _bodies(trace_id: str, digests: set[str]) -> dict[str, Any]:
    wanted = sorted(digests)
    found: dict[str, Any] = {}
    for start in range(0, len(wanted), CHUNK):
        found.update(
            RequestPart.objects.filter(
                trace_id=trace_id, digest__in=wanted[start : start + CHUNK]
            ).values_list("digest", "body")
        )
    return found

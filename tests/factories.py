"""Factories for tests: named users and traces with messages."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from traces.models import Message, Trace, TraceStatus


def make_user(username: str, *, staff: bool = False) -> Any:
    return get_user_model().objects.create_user(username=username, password=f"{username}-pw", is_staff=staff)


def make_trace(owner: Any, *, messages: list[tuple[str, str]] = (), **fields: Any) -> Trace:
    """A trace owned by `owner` with a linear chain of (role, content) messages."""
    now = timezone.now()
    values: dict[str, Any] = {
        "trace_id": str(uuid.uuid4()),
        "name": "a trace",
        "task": "do something",
        "status": TraceStatus.COMPLETED,
        "owner": owner,
        "model": "openai/scripted",
        "created_at": now,
        "updated_at": now,
    }
    values.update(fields)
    trace = Trace.objects.create(**values)
    for sequence, (role, content) in enumerate(messages, start=1):
        Message.objects.create(
            message_id=Message.make_id(trace.trace_id, sequence),
            trace=trace,
            role=role,
            sequence=sequence,
            parent_sequence=sequence - 1 or None,
            content=content,
        )
    if messages:
        Trace.objects.filter(pk=trace.pk).update(last_sequence=len(messages), head_sequence=len(messages))
        trace.refresh_from_db()
    return trace

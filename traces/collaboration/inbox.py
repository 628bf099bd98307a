"""Agent-to-agent messages (S4): a per-trace inbox, filled by the A2A webhook.

`POST /webhook/a2a-messages` (traces/api/collaboration.py) stores an
InboxMessage for a trace the token's user may see; the `check_messages` tool
reads the unread ones and marks them read; `inbox_context_hook` (a default
context hook of every AgentRunner, R7) reminds the agent every context
injection: "N new messages, latest from X".
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from traces.goal_tree import GoalTree
from traces.models import InboxMessage, Trace
from traces.runner.config import InvalidRun
from traces.selectors import trace_visible_or_404

MAX_CONTENT_CHARS = 100_000


def inbox_receive(
    *, user: Any, to_trace_id: str, from_agent_id: str, content: Any, conversation_id: str = ""
) -> InboxMessage:
    """Deliver one message to a trace's inbox. TraceNotFound (404) for a trace `user` may not see."""
    if not isinstance(from_agent_id, str) or not from_agent_id.strip():
        raise InvalidRun("from_agent_id must be a non-empty string")
    if content in (None, "", [], {}):
        raise InvalidRun("content must not be empty")
    if len(str(content)) > MAX_CONTENT_CHARS:
        raise InvalidRun(f"content is longer than {MAX_CONTENT_CHARS} characters")
    trace = trace_visible_or_404(user=user, trace_id=to_trace_id)
    return InboxMessage.objects.create(
        to_trace=trace,
        from_agent_id=from_agent_id.strip()[:255],
        conversation_id=str(conversation_id or "")[:255],
        content=content,
        sender=user if getattr(user, "pk", None) else None,
    )


def inbox_take_unread(*, trace_id: str) -> list[InboxMessage]:
    """The unread messages of a trace, oldest first, marked read in the same transaction."""
    with transaction.atomic():
        unread = list(InboxMessage.objects.filter(to_trace_id=trace_id, read_at__isnull=True).order_by("pk"))
        if unread:
            InboxMessage.objects.filter(pk__in=[m.pk for m in unread], read_at__isnull=True).update(
                read_at=timezone.now()
            )
    return unread


def inbox_summary(trace_id: str) -> str | None:
    """ "N new messages, latest from X", or None when nothing is unread."""
    unread = InboxMessage.objects.filter(to_trace_id=trace_id, read_at__isnull=True)
    count = unread.count()
    if not count:
        return None
    latest = unread.order_by("-pk").values_list("from_agent_id", flat=True).first()
    if count == 1:
        return f"1 new message from {latest} (use the check_messages tool to read it)"
    return f"{count} new messages, latest from {latest} (use the check_messages tool to read them)"


def inbox_context_hook(trace: Trace, goal_tree: GoalTree | None) -> str | None:
    """R7 context hook: the inbox reminder."""
    summary = inbox_summary(trace.trace_id)
    return f"## Messages\n\n{summary}" if summary else None

"""The agent-to-agent inbox (S4): messages delivered to a trace by the A2A webhook.

A model of the `traces` app (re-exported by `traces/models.py`); written and read
by `traces/collaboration/inbox.py`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class InboxMessage(models.Model):
    """A message from another agent to a trace (S4), delivered by the A2A webhook.

    Unread until the trace's agent calls `check_messages` (`read_at` set then).
    """

    to_trace = models.ForeignKey("traces.Trace", on_delete=models.CASCADE, related_name="inbox")
    from_agent_id = models.CharField(max_length=255)
    conversation_id = models.CharField(max_length=255, blank=True, default="")
    content = models.JSONField(help_text="text, or any JSON the sender chose")
    sender = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="sent_inbox_messages",
        help_text="the token's user that delivered it",
    )
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(blank=True, null=True)

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["to_trace", "read_at"], name="inbox_trace_unread")]

    def __str__(self) -> str:
        return f"{self.from_agent_id} -> {self.to_trace_id}"

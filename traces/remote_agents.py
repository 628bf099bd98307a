"""RemoteAgentConfig: a remote agent the `agent` tool may call, with its API key (S5, X4).

Managed in the admin (traces/admin.py); AGENT_REMOTE_AGENTS in the settings adds
more (traces/collaboration/remote.py:configured_agents reads both). The key is
sent to that agent only and never written to a trace, an event or a log.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class RemoteAgentConfig(models.Model):
    url = models.URLField(
        max_length=500,
        unique=True,
        help_text="the agent's base URL (its card is at /.well-known/agent-card.json)",
    )
    name = models.CharField(max_length=200, blank=True, default="", help_text="shown to the model")
    api_key = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="sent as Authorization: Bearer <key>; never shown in traces",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "traces"
        ordering = ["url"]
        verbose_name = "remote agent"

    def __str__(self) -> str:
        return self.name or self.url

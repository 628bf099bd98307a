"""An MCP server declared in the admin (the operator's JSON file declares others: config.py)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models

from tools.mcp.config import RISKS, TRANSPORTS, ServerConfig, ServerConfigError, server_from_dict


class McpServer(models.Model):
    """A server whose tools runs may use, as `mcp__<name>__<tool>`."""

    name = models.SlugField(
        max_length=40,
        unique=True,
        help_text="Lower-case letters, digits, '_' and '-': part of each tool's name.",
    )
    transport = models.CharField(max_length=10, choices=[(t, t) for t in TRANSPORTS], default="stdio")
    enabled = models.BooleanField(default=True)
    command = models.CharField(
        max_length=500, blank=True, help_text="stdio: the executable, run in the sandbox."
    )
    args = models.JSONField(default=list, blank=True, help_text='stdio: a JSON list, e.g. ["dist/index.js"].')
    env = models.JSONField(
        default=dict, blank=True, help_text="stdio: the server's only environment variables (a JSON object)."
    )
    read_only_paths = models.JSONField(
        default=list,
        blank=True,
        help_text="stdio: host paths mounted read-only, e.g. where the server is installed.",
    )
    network = models.BooleanField(default=False, help_text="stdio: let the sandboxed server use the network.")
    url = models.CharField(max_length=500, blank=True, help_text="http: the streamable HTTP endpoint.")
    headers = models.JSONField(
        default=dict, blank=True, help_text="http: extra request headers (a JSON object)."
    )
    bearer_token = models.CharField(
        max_length=2000,
        blank=True,
        help_text="http: sent as 'Authorization: Bearer …'; never traced or logged.",
    )
    timeout_seconds = models.FloatField(default=60.0, help_text="Per call; a call over it is a tool error.")
    default_risk = models.CharField(
        max_length=10,
        choices=[(r, r) for r in RISKS],
        default="risky",
        help_text="For tools the policy does not name; 'risky' tools wait for an expert under ask-risky.",
    )
    tool_policy = models.JSONField(
        default=dict,
        blank=True,
        help_text='Per tool: {"<tool>": {"offered": false}} or {"<tool>": {"risk": "safe"}}.',
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "tools"
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name

    def declaration(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "transport": self.transport,
            "command": self.command,
            "args": self.args,
            "env": self.env,
            "read_only_paths": self.read_only_paths,
            "network": self.network,
            "url": self.url,
            "headers": self.headers,
            "bearer_token": self.bearer_token,
            "timeout": self.timeout_seconds,
            "default_risk": self.default_risk,
            "tools": self.tool_policy,
        }

    def config(self) -> ServerConfig:
        """The row as a run uses it; ServerConfigError when it cannot be used."""
        return server_from_dict(self.declaration(), source="admin")

    def clean(self) -> None:
        for name, kind in (("args", list), ("env", dict), ("read_only_paths", list), ("headers", dict)):
            if not isinstance(getattr(self, name), kind):
                raise ValidationError({name: f"must be a JSON {'list' if kind is list else 'object'}"})
        try:
            self.config()
        except ServerConfigError as exc:
            raise ValidationError(str(exc)) from None

"""The tools app in the admin: the MCP servers runs may use."""

from __future__ import annotations

from django import forms
from django.contrib import admin

from tools.mcp.models import McpServer


class McpServerForm(forms.ModelForm):
    class Meta:
        model = McpServer
        fields = [
            "name",
            "transport",
            "enabled",
            "timeout_seconds",
            "command",
            "args",
            "env",
            "read_only_paths",
            "network",
            "url",
            "headers",
            "bearer_token",
            "default_risk",
            "tool_policy",
        ]
        # the token shows as dots, and stays when the field is left as it is
        widgets = {"bearer_token": forms.PasswordInput(render_value=True)}


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    form = McpServerForm
    list_display = ("name", "transport", "enabled", "default_risk", "timeout_seconds", "updated_at")
    list_filter = ("transport", "enabled")
    search_fields = ("name", "command", "url")
    fieldsets = (
        (None, {"fields": ("name", "transport", "enabled", "timeout_seconds")}),
        (
            "stdio (runs in the run's sandbox)",
            {"fields": ("command", "args", "env", "read_only_paths", "network")},
        ),
        ("Streamable HTTP", {"fields": ("url", "headers", "bearer_token")}),
        ("Policy", {"fields": ("default_risk", "tool_policy")}),
    )

from __future__ import annotations

import logging

from django.apps import AppConfig
from django.conf import settings

logger = logging.getLogger(__name__)


class ToolsConfig(AppConfig):
    name = "tools"
    verbose_name = "Tools"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from tools import browser, checks  # noqa: F401  (checks registers the sandbox and browser checks)
        from tools.mcp.models import McpServer
        from tools.mcp.selectors import forget_servers
        from tools.mcp.sessions import sessions
        from tools.mcp.toolset import McpToolSet
        from tools.registry import load_builtin_tools
        from traces.runner.extensions import extensions
        from traces.services.delete import trace_deleting

        tool_set = McpToolSet(load_builtin_tools())  # the built-ins and the MCP servers' tools
        extensions.tool_registry = lambda: tool_set  # for every runner
        extensions.add("after_run", browser.close_for_trace)  # a run's Chromium ends with it
        extensions.add("after_run", sessions.close_run)  # so do its MCP sessions
        post_save.connect(forget_servers, sender=McpServer, dispatch_uid="mcp-servers-saved")
        post_delete.connect(forget_servers, sender=McpServer, dispatch_uid="mcp-servers-deleted")
        # A deleted trace's paused browser (cookies, pages) goes with it.
        trace_deleting.connect(browser.forget_traces, dispatch_uid="browser-forget-traces")

        if not settings.AGENT_SANDBOX:
            logger.warning(
                "AGENT_SANDBOX=off: tool commands run unconfined as the server's user (unsafe); "
                "see README 'Security'"
            )

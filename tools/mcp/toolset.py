"""The tool set runs use: the built-ins plus the tools of the enabled MCP servers (T1, T5).

Presets and runs choose MCP tools like built-ins, by name in allowed / denied, and
also by pattern: `mcp__github__*` is every tool of the server `github`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any

from tools.mcp.adapter import McpTool, build_mcp_tool, server_of, to_tool_result
from tools.mcp.config import ServerConfig
from tools.mcp.selectors import enabled_servers
from tools.mcp.sessions import sessions
from tools.registry import Tool, ToolRegistry
from traces.runner.tool_api import ToolContext, ToolResult


class McpToolSet(ToolRegistry):
    """The built-ins of `builtins` and the MCP servers' tools; runs them through ToolRegistry.execute."""

    def __init__(self, builtins: ToolRegistry) -> None:
        super().__init__()
        self._builtins = builtins
        self._built: tuple[Any, dict[str, McpTool], dict[str, str]] | None = None

    def mcp_tools(self) -> dict[str, McpTool]:
        return self._catalogue()[1]

    def unavailable_servers(self) -> dict[str, str]:
        """Servers whose tools could not be listed, with why."""
        return self._catalogue()[2]

    def _catalogue(self) -> tuple[Any, dict[str, McpTool], dict[str, str]]:
        servers = enabled_servers()
        listings = {name: sessions.listing(server) for name, server in servers.items()}
        signature = (sessions.version(), tuple((n, s.key(), repr(s)) for n, s in sorted(servers.items())))
        if self._built is not None and self._built[0] == signature:
            return self._built
        tools: dict[str, McpTool] = {}
        failed: dict[str, str] = {}
        for name, server in servers.items():
            listing = listings[name]
            if listing.error:
                failed[name] = listing.error
            for remote in listing.tools:
                if server.policy(remote.name).offered:
                    tool = build_mcp_tool(server, remote, _call)
                    tools[tool.name] = tool
        self._built = (signature, tools, failed)
        return self._built

    def get(self, name: str) -> Tool | None:
        if server_of(name) is None:
            return self._builtins.get(name)
        return self.mcp_tools().get(name)

    def names(self) -> list[str]:
        return self._builtins.names() + sorted(self.mcp_tools())

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None

    def version(self) -> Any:
        servers = enabled_servers()
        return (
            self._builtins.version(),
            sessions.version(),
            tuple((n, s.key(), repr(s)) for n, s in sorted(servers.items())),
        )

    def select(
        self, *, allowed: Iterable[str] | None = None, denied: Iterable[str] | None = None
    ) -> list[Tool]:
        """Tools offered to a run: `allowed` (None = all) minus `denied` and the unavailable; names or patterns."""
        denied_list = list(denied or ())
        names = self.names()
        if allowed is not None:
            wanted = list(allowed)
            names = [n for n in names if _matches(n, wanted)]
        chosen = []
        for name in names:
            tool = self.get(name)
            if tool is not None and not _matches(name, denied_list) and tool.unavailable_reason() is None:
                chosen.append(tool)
        return chosen

    def check_requested(self, names: list[str]) -> None:
        """ValueError naming what in `names` is unknown or cannot run here (a server that cannot be listed)."""
        known = self.names()
        failed = self.unavailable_servers()
        for name in names:
            server = server_of(name.rstrip("*")) or server_of(name)
            if server in failed and not any(fnmatch.fnmatchcase(k, name) for k in known):
                raise ValueError(
                    f"tool {name} is not available on this server: MCP server {server}: {failed[server]}"
                )
        unknown = [n for n in names if not any(k == n or fnmatch.fnmatchcase(k, n) for k in known)]
        if unknown:
            raise ValueError(f"unknown tool(s): {', '.join(unknown)}; available: {', '.join(known)}")
        for name in names:
            tool = self.get(name)
            reason = tool.unavailable_reason() if tool is not None else None
            if reason:
                raise ValueError(f"tool {name} is not available on this server: {reason}")


def _matches(name: str, patterns: list[str]) -> bool:
    return any(name == p or ("*" in p and fnmatch.fnmatchcase(name, p)) for p in patterns)


def _call(server: ServerConfig, tool: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    result = sessions.call(
        server,
        tool,
        arguments,
        trace_id=ctx.trace_id,
        workspace=ctx.workspace,
        writable=ctx.workspace_writable,
    )
    return to_tool_result(server.name, tool, result, ctx)

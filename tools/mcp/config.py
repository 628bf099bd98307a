"""Which MCP servers this deployment uses: the admin's rows and the operator's JSON file.

A server is declared in the admin (tools/mcp/models.py: McpServer) or in the file
AGENT_MCP_SERVERS_FILE names, for deployments that keep configuration in files:

    {"servers": [
      {"name": "files", "transport": "stdio", "command": "node",
       "args": ["/opt/mcp/server-filesystem/dist/index.js", "."], "env": {"LOG": "1"}},
      {"name": "issues", "transport": "http", "url": "https://mcp.example.com/mcp",
       "bearer_token": "${ISSUES_TOKEN}", "tools": {"delete_issue": {"offered": false}}}
    ]}

`${NAME}` in env, headers and bearer_token is read from the server's environment,
so the file needs no secret. An admin row overrides a file entry of the same name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

TRANSPORTS = ("stdio", "http")
RISKS = ("safe", "risky")
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")  # leaves room for the tool's name in 64
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ServerConfigError(ValueError):
    """A server declaration that cannot be used; the message names the server and the field."""


@dataclass(frozen=True)
class ToolPolicy:
    offered: bool = True
    risk: str = "risky"


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server as a run uses it. Secrets (env, headers, token) never appear in its repr."""

    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict, repr=False)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    bearer_token: str = field(default="", repr=False)
    timeout: float = 60.0
    network: bool = False  # stdio: whether the sandbox lets the server reach the network
    read_only_paths: tuple[str, ...] = ()  # stdio: host paths bound read-only (where the server is installed)
    default_risk: str = "risky"
    tools: dict[str, ToolPolicy] = field(default_factory=dict)
    source: str = "admin"  # admin | file

    def policy(self, tool: str) -> ToolPolicy:
        return self.tools.get(tool, ToolPolicy(offered=True, risk=self.default_risk))

    def http_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.bearer_token:
            headers["Authorization"] = f"Bearer {self.bearer_token}"
        return headers

    def key(self) -> str:
        """A digest of what the server's process or session depends on: a changed declaration starts a new one.

        A digest, so that the secrets it covers are not copied into the tool set's version."""
        declaration = json.dumps(
            [
                self.transport,
                self.command,
                self.args,
                self.env,
                self.url,
                self.http_headers(),
                self.network,
                self.read_only_paths,
                self.timeout,
            ],
            sort_keys=True,
            default=list,
        )
        return hashlib.sha256(declaration.encode()).hexdigest()


def server_from_dict(data: dict[str, Any], *, source: str) -> ServerConfig:
    """A ServerConfig from a declaration (a JSON object, or an admin row's fields)."""
    name = str(data.get("name", ""))
    if not NAME_PATTERN.match(name):
        raise ServerConfigError(
            f"MCP server name {name!r} must be 1-40 characters of a-z, 0-9, '_' and '-', starting with a letter or digit"
        )
    transport = data.get("transport", "stdio")
    if transport not in TRANSPORTS:
        raise ServerConfigError(f"MCP server {name}: transport must be one of {', '.join(TRANSPORTS)}")
    if transport == "stdio" and not data.get("command"):
        raise ServerConfigError(f"MCP server {name}: a stdio server needs a command")
    if transport == "http" and not str(data.get("url", "")).startswith(("http://", "https://")):
        raise ServerConfigError(f"MCP server {name}: an http server needs an http(s) url")
    default_risk = data.get("default_risk") or "risky"
    if default_risk not in RISKS:
        raise ServerConfigError(f"MCP server {name}: default_risk must be safe or risky")
    timeout = float(data.get("timeout") or 60)
    if not 0 < timeout <= 3600:
        raise ServerConfigError(f"MCP server {name}: timeout must be between 0 and 3600 seconds")
    return ServerConfig(
        name=name,
        transport=transport,
        command=str(data.get("command") or ""),
        args=tuple(str(a) for a in data.get("args") or ()),
        env={str(k): _expand(name, str(v)) for k, v in (data.get("env") or {}).items()},
        url=str(data.get("url") or ""),
        headers={str(k): _expand(name, str(v)) for k, v in (data.get("headers") or {}).items()},
        bearer_token=_expand(name, str(data.get("bearer_token") or "")),
        timeout=timeout,
        network=bool(data.get("network", False)),
        read_only_paths=tuple(str(p) for p in data.get("read_only_paths") or ()),
        default_risk=default_risk,
        tools=_policies(name, data.get("tools") or {}, default_risk),
        source=source,
    )


def _policies(name: str, raw: Any, default_risk: str) -> dict[str, ToolPolicy]:
    if not isinstance(raw, dict):
        raise ServerConfigError(f"MCP server {name}: tools must map tool names to {{offered, risk}}")
    policies = {}
    for tool, entry in raw.items():
        entry = entry if isinstance(entry, dict) else {}
        risk = entry.get("risk", default_risk)
        if risk not in RISKS:
            raise ServerConfigError(f"MCP server {name}: tool {tool}: risk must be safe or risky")
        policies[str(tool)] = ToolPolicy(offered=bool(entry.get("offered", True)), risk=risk)
    return policies


def _expand(server: str, value: str) -> str:
    def variable(match: re.Match[str]) -> str:
        if match.group(1) not in os.environ:
            raise ServerConfigError(f"MCP server {server}: environment variable {match.group(1)} is not set")
        return os.environ[match.group(1)]

    return _VARIABLE.sub(variable, value)


_file_cache: tuple[str, float, list[ServerConfig]] | None = None


def file_servers() -> list[ServerConfig]:
    """The servers of AGENT_MCP_SERVERS_FILE (none when unset); re-read when the file changes."""
    global _file_cache
    path = settings.AGENT_MCP_SERVERS_FILE
    if not path:
        return []
    try:
        mtime = Path(path).stat().st_mtime
    except OSError as exc:
        raise ServerConfigError(f"AGENT_MCP_SERVERS_FILE {path}: {exc.strerror}") from None
    if _file_cache is not None and _file_cache[:2] == (path, mtime):
        return _file_cache[2]
    try:
        data = json.loads(Path(path).read_text())
    except ValueError as exc:
        raise ServerConfigError(f"AGENT_MCP_SERVERS_FILE {path} is not JSON: {exc}") from None
    entries = data.get("servers") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ServerConfigError(f'AGENT_MCP_SERVERS_FILE {path} must hold {{"servers": [...]}}')
    servers = []
    for entry in entries:
        if not isinstance(entry, dict) or not entry.get("enabled", True):
            continue
        try:
            servers.append(server_from_dict(entry, source="file"))
        except ServerConfigError as exc:  # one bad entry leaves the others usable
            logger.error("AGENT_MCP_SERVERS_FILE %s: %s", path, exc)
    _file_cache = (path, mtime, servers)
    return servers

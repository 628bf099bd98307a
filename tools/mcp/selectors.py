"""Reads: the enabled MCP servers, from the operator's file and the admin's rows."""

from __future__ import annotations

import logging
import time

from django.conf import settings

from tools.mcp.config import ServerConfig, ServerConfigError, file_servers
from tools.mcp.models import McpServer

logger = logging.getLogger(__name__)

CACHE_SECONDS = 2.0  # every step of every run asks; an admin save clears it (apps.py)

_cache: tuple[float, str, dict[str, ServerConfig]] | None = None


def enabled_servers() -> dict[str, ServerConfig]:
    """The enabled servers by name: the file's, then the admin's over them; unusable ones are logged and left out."""
    global _cache
    now, path = time.monotonic(), settings.AGENT_MCP_SERVERS_FILE
    if _cache is not None and now - _cache[0] < CACHE_SECONDS and _cache[1] == path:
        return _cache[2]
    servers: dict[str, ServerConfig] = {}
    try:
        servers.update((s.name, s) for s in file_servers())
    except ServerConfigError as exc:
        logger.error("%s", exc)
    for row in McpServer.objects.filter(enabled=True):
        try:
            servers[row.name] = row.config()
        except ServerConfigError as exc:
            logger.error("%s", exc)
    _cache = (now, path, servers)
    return servers


def forget_servers(**_: object) -> None:
    """Read the declarations again at the next ask (connected to McpServer's save and delete)."""
    global _cache
    _cache = None

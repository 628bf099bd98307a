"""This process's MCP connections: one per run and server for calls, short-lived ones for listing.

- Calls: a run's first call to a server starts a connection for that run (a stdio
  server in the run's sandbox, its workspace mounted); later calls of the run reuse
  it; `close_run` (the runner's after_run point) ends it when the run ends, pauses,
  stops or loses its lease. A connection found ended before a call (a crashed
  server) is replaced first; one that fails during a call is dropped, so the next
  call starts the server again.
- Listing: the tools a server offers are listed once per process (and again after
  AGENT_MCP_LIST_SECONDS, a changed declaration, or a list_changed notification on
  any connection) through a connection that ends right after; runs select from it.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from django.conf import settings
from mcp.shared.exceptions import MCPError

from tools.mcp import bridge
from tools.mcp.client import START_SECONDS, Connection, ServerUnavailable, describe
from tools.mcp.config import ServerConfig
from traces.runner.tool_api import ToolError

logger = logging.getLogger(__name__)

RETRY_FAILED_LISTING_SECONDS = 30.0


@dataclass
class Listing:
    key: str  # the declaration it was listed under
    tools: list[types.Tool] = field(default_factory=list)
    at: float = 0.0
    error: str | None = None


class Sessions:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, str], Connection] = {}
        self._listings: dict[str, Listing] = {}
        self._listing_locks: dict[str, threading.Lock] = {}
        self._version = 0

    def version(self) -> int:
        """Bumped whenever a server's tool list changes."""
        return self._version

    def forget_listings(self) -> None:
        """List every server again at the next ask (tests; an operator's `mcp_servers --relist`)."""
        self._listings.clear()
        self._version += 1

    # --- listing ------------------------------------------------------------------

    def listing(self, server: ServerConfig) -> Listing:
        """The server's tools as last listed; listed now when missing or stale (blocks the caller)."""
        current = self._listings.get(server.name)
        if current is not None and not self._stale(current, server):
            return current
        with self._listing_locks.setdefault(server.name, threading.Lock()):
            current = self._listings.get(server.name)
            if current is not None and not self._stale(current, server):
                return current
            listing = self._list(server)
            self._set_listing(server.name, listing)
            return listing

    def _stale(self, listing: Listing, server: ServerConfig) -> bool:
        age = time.monotonic() - listing.at
        limit = RETRY_FAILED_LISTING_SECONDS if listing.error else settings.AGENT_MCP_LIST_SECONDS
        return listing.key != server.key() or age > limit

    def _list(self, server: ServerConfig) -> Listing:
        with tempfile.TemporaryDirectory(prefix="agentsite-mcp-list-") as scratch:
            connection = Connection(server, workspace=Path(scratch).resolve(), writable=False)

            async def list_once() -> list[types.Tool]:
                try:
                    await connection.start()
                    return await asyncio.wait_for(connection.list_tools(), server.timeout)
                finally:
                    await connection.close()

            try:
                tools = bridge.call(list_once(), START_SECONDS + server.timeout + 15)
            except (MCPError, ServerUnavailable, TimeoutError, OSError) as exc:
                reason = describe(exc)
                logger.warning("MCP server %s: cannot list its tools: %s", server.name, reason)
                return Listing(key=server.key(), at=time.monotonic(), error=reason)
        return Listing(key=server.key(), tools=tools, at=time.monotonic())

    def _set_listing(self, name: str, listing: Listing) -> None:
        previous = self._listings.get(name)
        self._listings[name] = listing
        if previous is None or _names_and_schemas(previous) != _names_and_schemas(listing):
            self._version += 1

    async def _relist(self, connection: Connection) -> None:
        try:
            tools = await asyncio.wait_for(connection.list_tools(), connection.server.timeout)
        except (MCPError, ServerUnavailable, TimeoutError) as exc:
            logger.warning("MCP server %s: relisting failed: %s", connection.server.name, describe(exc))
            return
        self._set_listing(
            connection.server.name, Listing(key=connection.server.key(), tools=tools, at=time.monotonic())
        )

    # --- calls --------------------------------------------------------------------

    def call(
        self,
        server: ServerConfig,
        tool: str,
        arguments: dict[str, Any],
        *,
        trace_id: str,
        workspace: Path,
        writable: bool,
    ) -> types.CallToolResult:
        """Call `tool` on the run's connection to `server`; ToolError says what went wrong."""
        key = (trace_id, server.name)
        for attempt in (1, 2):
            connection = self._connection(key, server, workspace, writable)
            try:
                return bridge.call(
                    self._call(connection, tool, arguments), START_SECONDS + server.timeout + 5
                )
            except MCPError as exc:
                if exc.code == types.REQUEST_TIMEOUT:
                    raise ToolError(
                        f"the MCP server {server.name} did not answer within {server.timeout:g} s"
                    ) from None
                if not _connection_lost(exc):
                    raise ToolError(f"the MCP server {server.name} refused the call: {exc.message}") from None
                self._drop(key, connection)
                if attempt == 1 and exc.message == "Session terminated":
                    continue  # the server forgot the session (restarted): it never ran the call
                raise ToolError(
                    f"the MCP server {server.name}'s connection ended during the call ({exc.message}); "
                    "it is started again for the next call"
                ) from None
            except ServerUnavailable as exc:
                self._drop(key, connection)
                raise ToolError(f"the MCP server {server.name} is not available: {exc}") from None
            except TimeoutError:
                self._drop(key, connection)
                raise ToolError(
                    f"the MCP server {server.name} did not answer in time; it is started again for the next call"
                ) from None
            except Exception as exc:  # a transport failure (the HTTP server is gone, a broken pipe)
                self._drop(key, connection)
                raise ToolError(
                    f"the MCP server {server.name} failed ({describe(exc)}); it is started again for the next call"
                ) from None
        raise AssertionError("unreachable")

    async def _call(
        self, connection: Connection, tool: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        if not connection.usable:
            await connection.start()
        result = await connection.call_tool(tool, arguments)
        for _ in range(3):  # a list_changed sent with the result is handled before the next step
            await asyncio.sleep(0)
        if connection.tools_changed:
            connection.tools_changed = False
            await self._relist(connection)
        return result

    def _connection(
        self, key: tuple[str, str], server: ServerConfig, workspace: Path, writable: bool
    ) -> Connection:
        with self._lock:
            connection = self._runs.get(key)
            if connection is not None and (connection.ended or connection.server.key() != server.key()):
                self._close_later(connection)
                connection = None
            if connection is None:
                connection = Connection(server, workspace=workspace, writable=writable)
                self._runs[key] = connection
            return connection

    def _drop(self, key: tuple[str, str], connection: Connection) -> None:
        with self._lock:
            if self._runs.get(key) is connection:
                del self._runs[key]
        self._close_later(connection)

    def _close_later(self, connection: Connection) -> None:
        asyncio.run_coroutine_threadsafe(connection.close(), bridge.loop())

    def close_run(self, trace_id: str, status: str = "") -> None:
        """End the connections of the run of `trace_id` (after_run: ended, paused, stopped or lease lost)."""
        with self._lock:
            keys = [key for key in self._runs if key[0] == trace_id]
            connections = [self._runs.pop(key) for key in keys]
        for connection in connections:
            try:
                bridge.call(connection.close(), 15)
            except TimeoutError:
                logger.warning("MCP server %s: closing took too long", connection.server.name)

    def connections_of(self, trace_id: str) -> list[Connection]:
        with self._lock:
            return [c for (trace, _), c in self._runs.items() if trace == trace_id]


# The SDK's stand-in for an HTTP error status without a JSON-RPC body: a server that
# lost our session and does not answer 404 as the spec says (server-everything: 400).
HTTP_STATUS_ERROR = "Server returned an error response"


def _connection_lost(exc: MCPError) -> bool:
    return exc.code == types.CONNECTION_CLOSED or exc.message in ("Session terminated", HTTP_STATUS_ERROR)


def _names_and_schemas(listing: Listing) -> list[tuple[str, Any, Any]]:
    return [(t.name, t.description, t.input_schema) for t in listing.tools]


sessions = Sessions()
close_run: Callable[[str, str], None] = sessions.close_run

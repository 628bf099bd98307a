"""One live MCP session to one server, owned by a task on the process's MCP loop (bridge.py).

The transport (stdio_client or streamable_http_client) and the ClientSession are
entered and left by one owner task, as anyio requires; callers on the loop use the
session between. A pump between the transport and the session notices the end of
the server's output (a crashed stdio server), so the next call starts a new
session instead of writing into a dead pipe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tools.mcp import launch
from tools.mcp.config import ServerConfig

logger = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="agentsite", version="1.0")
START_SECONDS = 30.0  # for a server to start and answer initialize


class ServerUnavailable(Exception):
    """The server could not be reached, or its connection ended: the call is a tool error."""


class Connection:
    """A session with one server; `workspace` is what a stdio server's sandbox mounts."""

    def __init__(
        self,
        server: ServerConfig,
        *,
        workspace: Path,
        writable: bool = True,
    ) -> None:
        self.server = server
        self.workspace = workspace
        self.writable = writable
        self.session: ClientSession | None = None
        self.ended = False  # the server's side is gone (process exited, stream closed)
        self.tools_changed = False  # a list_changed arrived: relisted after the call in flight
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def usable(self) -> bool:
        return self.session is not None and not self.ended and not self._stop.is_set()

    async def start(self) -> None:
        """Start the server (stdio) or open the session (http) and initialize; ServerUnavailable if it fails."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(ready), name=f"mcp-{self.server.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), START_SECONDS)
        except TimeoutError:
            await self.close()
            raise ServerUnavailable(f"did not answer initialize within {START_SECONDS:g} s") from None

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 10)
            except (TimeoutError, Exception):
                self._task.cancel()

    async def list_tools(self) -> list[types.Tool]:
        session = self._require()
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        return await self._require().call_tool(name, arguments, read_timeout_seconds=self.server.timeout)

    def _require(self) -> ClientSession:
        if self.session is None or not self.usable:
            raise ServerUnavailable("its connection has ended")
        return self.session

    async def _own(self, ready: asyncio.Future[None]) -> None:
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                to_session, session_read = anyio.create_memory_object_stream[Any](0)
                group = await stack.enter_async_context(anyio.create_task_group())
                group.start_soon(self._pump, read, to_session)
                session = await stack.enter_async_context(
                    ClientSession(
                        session_read, write, message_handler=self._on_message, client_info=CLIENT_INFO
                    )
                )
                await session.initialize()
                self.session = session
                ready.set_result(None)
                await self._stop.wait()
                group.cancel_scope.cancel()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(ServerUnavailable(describe(exc)))
            elif not isinstance(exc, asyncio.CancelledError):
                logger.info("MCP server %s: session ended: %s", self.server.name, describe(exc))
        finally:
            self.ended = True

    async def _pump(self, source: Any, sink: Any) -> None:
        """Hand the transport's messages to the session; their end marks the connection ended."""
        try:
            async with sink:
                async for item in source:
                    await sink.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            self.ended = True

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        server = self.server
        if server.transport == "http":
            client = create_mcp_http_client(headers=server.http_headers())
            return _http_transport(server.url, client)
        command, args, env = launch.sandboxed_command(server, self.workspace, writable=self.writable)
        params = StdioServerParameters(command=command, args=args, env=env, cwd=str(self.workspace))
        return stdio_client(params, errlog=launch.server_log())

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_changed = True


@asynccontextmanager
async def _http_transport(url: str, client: Any) -> AsyncIterator[Any]:
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


def describe(exc: BaseException) -> str:
    """A short reason for a failure, from inside exception groups; no headers or tokens are in it."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

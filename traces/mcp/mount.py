"""/mcp beside Django in the ASGI app (agentsite/asgi.py): `with_mcp(django_app)`.

The MCP SDK's streamable HTTP app, stateless and answering JSON (docs/ARCHITECTURE.md
argues why), behind traces/mcp/auth.py:TokenAuth. Its session manager must run for
as long as the app serves (a task group its requests are handled in), which the SDK
ties to the ASGI lifespan protocol; daphne sends no lifespan events, so the manager
is started by the first /mcp request, in a task of the server's event loop that
holds it open until the process ends.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings

from traces.mcp.auth import TokenAuth
from traces.mcp.server import build_server

MCP_PATH = "/mcp"


class McpMount:
    """Routes `MCP_PATH` to the MCP app and everything else to `app`."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._mcp: Any = None
        self._starting: asyncio.Future[Any] | None = None
        self._keeper: asyncio.Task[None] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "http" or scope["path"] != MCP_PATH:
            return await self.app(scope, receive, send)
        if scope["method"] != "POST":
            return await _post_only(send)
        mcp_app = self._mcp or await self._start()
        return await mcp_app(scope, receive, send)

    async def _start(self) -> Any:
        if self._starting is None:
            self._starting = asyncio.get_running_loop().create_future()
            self._keeper = asyncio.create_task(self._serve(self._starting), name="mcp session manager")
        self._mcp = await asyncio.shield(self._starting)
        return self._mcp

    async def _serve(self, started: asyncio.Future[Any]) -> None:
        try:
            server = build_server()
            starlette_app = server.streamable_http_app(
                streamable_http_path=MCP_PATH,
                stateless_http=True,
                json_response=True,
                # Host and Origin are checked against ALLOWED_HOSTS by TokenAuth.
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            async with server.session_manager.run():
                started.set_result(TokenAuth(starlette_app))
                await asyncio.Event().wait()  # until the process ends
        except Exception as exc:
            if started.done():
                raise
            started.set_exception(exc)
            self._starting = None  # the next request tries again


async def _post_only(send: Any) -> None:
    """GET (a standalone SSE stream) and DELETE (end a session) have nothing to serve
    without sessions: 405, as the streamable HTTP transport allows. The SDK would hold a
    GET stream open that nothing can ever be sent on."""
    body = json.dumps({"error": "only POST is served at /mcp (stateless)", "code": "method_not_allowed"})
    await send(
        {
            "type": "http.response.start",
            "status": 405,
            "headers": [(b"content-type", b"application/json"), (b"allow", b"POST")],
        }
    )
    await send({"type": "http.response.body", "body": body.encode()})


def with_mcp(app: Any) -> McpMount:
    return McpMount(app)

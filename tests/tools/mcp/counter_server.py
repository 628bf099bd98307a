"""A small MCP server of our own for the tests, written with the `mcp` SDK.

    python tests/tools/mcp/counter_server.py            # stdio
    PORT=8123 python tests/tools/mcp/counter_server.py http  # streamable HTTP on 127.0.0.1:$PORT/mcp

Tools: `increment` (a counter kept by the process: a new process starts at 0),
`slow` (sleeps, for timeouts), `unlock` (adds the tool `secret` and says so with a
tools/list_changed notification), `fail` (an isError result), `whoami` (the
environment variables it was given and its working directory).
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("counter")
count = 0


@server.tool()
def increment(by: int = 1) -> str:
    """Add `by` to the counter and return its new value."""
    global count
    count += by
    return str(count)


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep for `seconds`, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


def secret() -> str:
    """The secret a call to unlock reveals."""
    return "open sesame"


@server.tool()
async def unlock(ctx: Context) -> str:
    """Add the tool `secret` to this server's tools."""
    server.add_tool(secret)
    await ctx.session.send_tool_list_changed()
    return "unlocked"


@server.tool()
def fail(reason: str) -> str:
    """Always fails with `reason`."""
    raise ToolError(reason)


@server.tool()
def whoami() -> dict[str, object]:
    """The environment variables and working directory of this server."""
    return {"env": sorted(os.environ), "cwd": os.getcwd(), "pid": os.getpid()}


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(os.environ["PORT"]))
    else:
        server.run()

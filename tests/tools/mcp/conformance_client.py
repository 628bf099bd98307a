"""The client the MCP conformance suite drives (client mode): agentsite's own MCP client stack.

    conformance client --command "python tests/tools/mcp/conformance_client.py" --scenario tools_call

The suite starts a test server and runs this with its URL as the last argument:
it connects through tools/mcp/client.py:Connection (the SDK's streamable HTTP
transport, as runs use it), lists the tools and calls each one with arguments made
from its schema, maps the result as a run would, and exits 0, or 1 on an error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")

import django

django.setup()

from tools.mcp import bridge  # noqa: E402
from tools.mcp.client import Connection  # noqa: E402
from tools.mcp.config import server_from_dict  # noqa: E402

SAMPLES = {"number": 2, "integer": 3, "string": "conformance", "boolean": True, "array": [], "object": {}}


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    return {name: SAMPLES.get(str(spec.get("type")), "x") for name, spec in properties.items()}


async def session(url: str) -> None:
    server = server_from_dict(
        {"name": "conformance", "transport": "http", "url": url, "timeout": 20}, source="file"
    )
    connection = Connection(server, workspace=Path("/nonexistent"))
    await connection.start()
    try:
        for tool in await connection.list_tools():
            result = await connection.call_tool(tool.name, arguments_for(tool.input_schema))
            print(tool.name, "error" if result.is_error else "ok", [block.type for block in result.content])
    finally:
        await connection.close()


if __name__ == "__main__":
    bridge.call(session(sys.argv[-1]), 60)

"""The tools app's models: the MCP servers operators declare (tools/mcp/models.py)."""

from tools.mcp.models import McpServer

__all__ = ["McpServer"]

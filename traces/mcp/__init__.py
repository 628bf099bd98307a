"""agentsite as an MCP server at /mcp (X3): auth.py, server.py (tools, resource), handlers.py, mount.py."""

"""MCP servers as tool sources: operators declare servers, their tools join runs as mcp__<server>__<tool>.

config.py and models.py declare servers, selectors.py reads them, client.py holds one
session on the process's MCP loop (bridge.py), sessions.py pools them per run, launch.py
sandboxes stdio servers, adapter.py and toolset.py make their tools run tools.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tools.models import ToolContext, ToolResult
from tools.registry import default_registry

BUILTIN_TOOLS = {"read", "write", "edit", "glob", "grep", "list_files", "bash", "webfetch", "web_search"}

for _name in BUILTIN_TOOLS:
    importlib.import_module(f"tools.builtin.{_name}")

RunTool = Callable[..., ToolResult]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    directory = tmp_path / "workspace"
    directory.mkdir()
    return directory


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace, holding a file no tool may reach."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text("top secret\n")
    return directory


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    trace: Any = SimpleNamespace(trace_id="t1")
    return ToolContext(trace=trace, workspace=workspace)


@pytest.fixture
def run_tool(ctx: ToolContext) -> RunTool:
    """Call a tool the way the runner does: by name, with JSON arguments, limited to the offered tools."""

    def run(name: str, arguments: dict[str, Any] | str, *, offered: set[str] | None = None) -> ToolResult:
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return default_registry.execute(name, raw, ctx, offered=BUILTIN_TOOLS if offered is None else offered)

    return run

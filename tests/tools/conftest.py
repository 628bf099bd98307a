from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tools.registry import default_registry
from traces.runner.tool_api import ToolContext, ToolResult

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


def host_processes(marker: str) -> list[int]:
    """Host pids of live (not zombie) processes whose command line contains `marker`.

    Pids inside a sandbox's PID namespace mean nothing out here, so tests find a
    sandboxed process by a unique argument, such as `sleep 61.2345`.
    """
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def wait_until_gone(marker: str, seconds: float = 3.0) -> list[int]:
    """The processes carrying `marker` still alive after waiting up to `seconds` (empty: all gone)."""
    deadline = time.monotonic() + seconds
    while (alive := host_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive

"""The `list_files` tool: a directory tree of the workspace."""

from __future__ import annotations

import os
from pathlib import Path

from tools.registry import tool
from tools.workspace import IGNORED_DIRS, display_path, resolve_in_workspace, truncate_output
from traces.runner.tool_api import ToolContext, ToolError, ToolResult

MAX_ENTRIES = 1000
MAX_DEPTH = 10


@tool(risk="safe", read_only=True)
def list_files(ctx: ToolContext, path: str = ".", depth: int = 2) -> ToolResult:
    """List a directory of the workspace as an indented tree.

    Directories end in "/", symlinks are shown as "name -> target" and never
    entered. Directories below the depth limit show how many entries they hold.
    Version-control, dependency and cache directories such as .git and
    node_modules are shown but not expanded. At most 1000 entries are listed.

    Args:
        path: Directory to list, relative to the workspace root.
        depth: How many levels of directories to expand (1 = only the entries of path itself; at most 10).
    """
    if not 1 <= depth <= MAX_DEPTH:
        raise ToolError(f"depth must be between 1 and {MAX_DEPTH}, got {depth}.")
    base = resolve_in_workspace(ctx.workspace, path, must_exist=True)
    shown = display_path(ctx.workspace, base)
    if not base.is_dir():
        raise ToolError(f"{shown} is a file, not a directory; use read to see its content.")

    listing = _Listing()
    listing.add_children(base, depth=depth, indent=1)
    lines = [f"{shown}/" if shown != "." else "./", *listing.lines]
    if listing.truncated:
        lines.append(f"[listing stopped at {MAX_ENTRIES} entries; list a subdirectory or lower depth]")
    return ToolResult(
        title=f"Listed {shown} (depth {depth}): {listing.dirs} directories, {listing.files} files",
        output=truncate_output("\n".join(lines)),
        metadata={"directories": listing.dirs, "files": listing.files, "truncated": listing.truncated},
    )


class _Listing:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.dirs = 0
        self.files = 0
        self.truncated = False

    def add_children(self, directory: Path, *, depth: int, indent: int) -> None:
        for entry in _sorted_entries(directory):
            if len(self.lines) >= MAX_ENTRIES:
                self.truncated = True
                return
            self._add(entry, depth=depth, indent=indent)

    def _add(self, entry: os.DirEntry[str], *, depth: int, indent: int) -> None:
        pad = "  " * indent
        if entry.is_symlink():
            self.files += 1
            self.lines.append(f"{pad}{entry.name} -> {os.readlink(entry.path)}")
            return
        if not entry.is_dir():
            self.files += 1
            self.lines.append(f"{pad}{entry.name}")
            return
        self.dirs += 1
        if entry.name in IGNORED_DIRS:
            self.lines.append(f"{pad}{entry.name}/ (not expanded)")
        elif depth <= 1:
            self.lines.append(f"{pad}{entry.name}/ ({_count_entries(Path(entry.path))} entries)")
        else:
            self.lines.append(f"{pad}{entry.name}/")
            self.add_children(Path(entry.path), depth=depth - 1, indent=indent + 1)


def _sorted_entries(directory: Path) -> list[os.DirEntry[str]]:
    """Directories first, then files, each alphabetically."""
    try:
        with os.scandir(directory) as entries:
            found = list(entries)
    except OSError:
        return []
    return sorted(found, key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))


def _count_entries(directory: Path) -> int:
    try:
        with os.scandir(directory) as entries:
            return sum(1 for _ in entries)
    except OSError:
        return 0

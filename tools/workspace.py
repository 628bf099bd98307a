"""The trace workspace: where a trace's files live and how tools stay inside it (T4).

Every file tool goes through `resolve_in_workspace`, which works on real paths:
the workspace is resolved, the requested path is resolved (following symlinks),
and anything that ends up outside is refused with a message the model can act on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

from traces.runner.tool_api import ToolContext, ToolError

# Directories that are noise for a model exploring a project; walking tools skip them.
IGNORED_DIRS = frozenset(
    {".git", "node_modules", "__pycache__", ".venv", ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)

_BINARY_SNIFF_BYTES = 8192


def resolve_in_workspace(workspace: Path, path: str, *, must_exist: bool = False) -> Path:
    """The real path of `path` inside `workspace`, or a ToolError saying why not.

    Refuses NUL bytes, absolute paths, `..` that climbs above the workspace and
    symlinks (anywhere along the path) whose target lies outside it.
    """
    if not isinstance(path, str):
        raise ToolError(f"Path must be a string, got {type(path).__name__}.")
    if "\x00" in path:
        raise ToolError(f"Path {path!r} contains a NUL byte; refused.")
    if not path.strip():
        raise ToolError("Path is empty; give a path relative to the workspace, such as '.' or 'src/app.py'.")
    if os.path.isabs(path):
        raise ToolError(
            f"Path {path!r} is absolute; refused. Use a path relative to the workspace, such as 'src/app.py'."
        )
    normalized = os.path.normpath(path)
    if normalized == ".." or normalized.startswith("../"):
        raise ToolError(f"Path {path!r} leaves the workspace through '..'; refused.")
    root = workspace.resolve()
    try:
        target = (root / path).resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop (Python < 3.13)
        raise ToolError(f"Path {path!r} cannot be resolved: {exc}.") from exc
    if not target.is_relative_to(root):
        raise ToolError(f"Path {path!r} resolves outside the workspace through a symlink; refused.")
    if must_exist and not target.exists():
        raise ToolError(
            f"Path {path!r} does not exist in the workspace (use list_files or glob to find files)."
        )
    return target


def require_writable(ctx: ToolContext) -> None:
    """Refuse a change to a read-only project's files (M9) with a message the model can act on."""
    if ctx.workspace_writable:
        return
    raise ToolError(
        f"The workspace is project {ctx.project!r}, which is read-only: files here cannot be "
        "created, changed or deleted. Read and report instead (show the change you would make)."
    )


def display_path(workspace: Path, target: Path) -> str:
    """`target` relative to the workspace, in the form the model should pass back."""
    relative = target.relative_to(workspace.resolve())
    return relative.as_posix() if relative.parts else "."


def truncation_note(omitted: int) -> str:
    return f"\n[truncated: {omitted} more characters]"


def truncate_output(text: str, limit: int | None = None) -> str:
    """`text` cut to `limit` characters (default AGENT_TOOL_OUTPUT_LIMIT), saying how much was cut."""
    limit = limit or settings.AGENT_TOOL_OUTPUT_LIMIT
    if len(text) <= limit:
        return text
    return text[:limit] + truncation_note(len(text) - limit)


def is_binary_file(path: Path) -> bool:
    """Whether a file looks binary: a NUL byte in its first few kilobytes (as git and grep decide)."""
    with path.open("rb") as handle:
        return b"\x00" in handle.read(_BINARY_SNIFF_BYTES)


def walk_workspace(base: Path) -> Iterator[tuple[Path, bool]]:
    """(path, is_dir) for everything under `base`, sorted, depth-first.

    Skips IGNORED_DIRS. Symlinked directories are listed but never entered; callers
    check symlinks with `stays_in_workspace` before using them.
    """
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames[:] = sorted(name for name in dirnames if name not in IGNORED_DIRS)
        current = Path(dirpath)
        for name in dirnames:
            yield current / name, True
        for name in sorted(filenames):
            yield current / name, False


def stays_in_workspace(workspace: Path, path: Path) -> bool:
    """Whether `path`, found by `walk_workspace` under a resolved base, stays inside once followed."""
    if not path.is_symlink():
        return True
    try:
        return path.resolve().is_relative_to(workspace.resolve())
    except (OSError, RuntimeError):
        return False

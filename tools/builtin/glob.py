"""The `glob` tool: find files in the workspace by name pattern."""

from __future__ import annotations

import os
import re

from tools.registry import tool
from tools.workspace import (
    display_path,
    resolve_in_workspace,
    stays_in_workspace,
    truncate_output,
    walk_workspace,
)
from traces.runner.tool_api import ToolContext, ToolError, ToolResult

MAX_MATCHES = 500


@tool(risk="safe", read_only=True)
def glob(ctx: ToolContext, pattern: str, path: str = ".") -> ToolResult:
    """Find files and directories in the workspace whose path matches a glob pattern.

    `*` matches within one path segment, `**/` matches any number of directories,
    `?` one character, `[abc]` one of a set and `{py,txt}` either alternative. The
    pattern is matched against paths relative to `path`; results are given relative
    to the workspace root (ready to pass to read), sorted, directories ending in
    "/", at most 500. Version-control, dependency and cache directories such as
    .git, node_modules and __pycache__ are skipped.

    Args:
        pattern: Glob pattern such as "**/*.py", "src/*.{js,ts}" or "README*".
        path: Directory to search in, relative to the workspace root.
    """
    if not pattern or "\x00" in pattern:
        raise ToolError("pattern is empty or contains a NUL byte; give a pattern such as '**/*.py'.")
    if os.path.isabs(pattern) or ".." in pattern.split("/"):
        raise ToolError(
            f"Pattern {pattern!r} points outside the search directory; refused. "
            "Use a relative pattern without '..' and set path to choose where to search."
        )
    base = resolve_in_workspace(ctx.workspace, path, must_exist=True)
    if not base.is_dir():
        raise ToolError(f"{display_path(ctx.workspace, base)} is not a directory.")
    matcher = compile_glob(pattern)

    matches = []
    for entry, is_dir in walk_workspace(base):
        if not matcher.match(entry.relative_to(base).as_posix()):
            continue
        if not stays_in_workspace(ctx.workspace, entry):
            continue
        matches.append(display_path(ctx.workspace, entry) + ("/" if is_dir else ""))
    matches.sort()

    where = display_path(ctx.workspace, base)
    if not matches:
        return ToolResult(title=f"glob {pattern!r} in {where}: no matches", output="No files matched.")
    shown = matches[:MAX_MATCHES]
    output = "\n".join(shown)
    if len(matches) > MAX_MATCHES:
        output += f"\n[{len(matches) - MAX_MATCHES} more matches not shown; use a narrower pattern or path]"
    noun = "match" if len(matches) == 1 else "matches"
    return ToolResult(
        title=f"glob {pattern!r} in {where}: {len(matches)} {noun}",
        output=truncate_output(output),
        metadata={"count": len(matches)},
    )


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex that fully matches the slash-separated paths `pattern` describes."""
    try:
        return re.compile(_translate(pattern) + r"\Z")
    except re.error as exc:
        raise ToolError(f"Invalid glob pattern {pattern!r}: {exc}.") from exc


def _translate(pattern: str) -> str:
    parts: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        at_segment_start = i == 0 or pattern[i - 1] == "/"
        if at_segment_start and pattern.startswith("**/", i):
            parts.append("(?:[^/]*/)*")
            i += 3
        elif at_segment_start and pattern.startswith("**", i) and i + 2 == n:
            parts.append(".*")
            i += 2
        elif pattern[i] == "*":
            parts.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            parts.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (close := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : close].replace("\\", "\\\\")
            if body.startswith("!"):
                body = "^" + body[1:]
            parts.append(f"[{body}]")
            i = close + 1
        elif pattern[i] == "{" and (close := pattern.find("}", i)) != -1:
            options = pattern[i + 1 : close].split(",")
            parts.append("(?:" + "|".join(_translate(option) for option in options) + ")")
            i = close + 1
        else:
            parts.append(re.escape(pattern[i]))
            i += 1
    return "".join(parts)

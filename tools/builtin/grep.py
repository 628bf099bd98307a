"""The `grep` tool: search file contents in the workspace with a regular expression."""

from __future__ import annotations

import re
from pathlib import Path

from tools.builtin.glob import compile_glob
from tools.registry import tool
from tools.workspace import (
    display_path,
    is_binary_file,
    resolve_in_workspace,
    stays_in_workspace,
    truncate_output,
    walk_workspace,
)
from traces.runner.tool_api import ToolContext, ToolError, ToolResult

MAX_MATCHES = 200
MAX_LINE_CHARS = 300
MAX_FILE_BYTES = 5_000_000


@tool(risk="safe", read_only=True)
def grep(
    ctx: ToolContext,
    pattern: str,
    path: str = ".",
    include: str | None = None,
    ignore_case: bool = False,
) -> ToolResult:
    """Search the contents of workspace files for a regular expression (Python `re` syntax).

    Each matching line is shown as `file:line_number:text`, with the file relative
    to the workspace root; at most 200 matches, long lines cut to 300 characters.
    Binary files, files over 5 MB and directories such as .git, node_modules and
    __pycache__ are skipped. Use this to find where something is defined or used,
    then read the file around that line.

    Args:
        pattern: Regular expression to search for, such as "def \\w+_create" or "TODO".
        path: File or directory to search, relative to the workspace root.
        include: Only search files whose name matches this glob, such as "*.py" or "*.{js,ts}";
            a glob containing "/" is matched against the path relative to `path` instead.
        ignore_case: Match without regard to upper or lower case.
    """
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"Invalid regular expression {pattern!r}: {exc}.") from exc
    base = resolve_in_workspace(ctx.workspace, path, must_exist=True)
    files = [base] if base.is_file() else _candidate_files(ctx.workspace, base, include)

    lines: list[str] = []
    matched_files = 0
    for file in files:
        found = _search_file(regex, file, display_path(ctx.workspace, file), MAX_MATCHES - len(lines))
        matched_files += bool(found)
        lines.extend(found)
        if len(lines) >= MAX_MATCHES:
            lines.append(f"[stopped after {MAX_MATCHES} matches; narrow the pattern, path or include]")
            break

    if not lines:
        return ToolResult(title=f"grep {pattern!r}: no matches", output="No matches.")
    count = min(len(lines), MAX_MATCHES)
    return ToolResult(
        title=f"grep {pattern!r}: {_plural(count, 'match', 'matches')} in {_plural(matched_files, 'file', 'files')}",
        output=truncate_output("\n".join(lines)),
        metadata={"matches": count, "files": matched_files},
    )


def _candidate_files(workspace: Path, base: Path, include: str | None) -> list[Path]:
    matcher = compile_glob(include) if include else None
    files = []
    for entry, is_dir in walk_workspace(base):
        if is_dir or not stays_in_workspace(workspace, entry):
            continue
        if matcher:
            subject = entry.relative_to(base).as_posix() if "/" in (include or "") else entry.name
            if not matcher.match(subject):
                continue
        files.append(entry)
    return sorted(files)


def _search_file(regex: re.Pattern[str], file: Path, shown: str, room: int) -> list[str]:
    try:
        if not file.is_file() or file.stat().st_size > MAX_FILE_BYTES or is_binary_file(file):
            return []
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        if regex.search(line):
            line = line.removesuffix("\r")
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + "..."
            found.append(f"{shown}:{number}:{line}")
            if len(found) >= room:
                break
    return found


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"

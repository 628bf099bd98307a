"""The `read` tool: a text file from the workspace, line-numbered and paginated."""

from __future__ import annotations

from tools.registry import tool
from tools.workspace import display_path, is_binary_file, resolve_in_workspace, truncate_output
from traces.runner.tool_api import ToolContext, ToolError, ToolResult

MAX_LINE_CHARS = 2000


@tool(risk="safe", read_only=True)
def read(ctx: ToolContext, path: str, offset: int = 1, limit: int = 2000) -> ToolResult:
    """Read a text file from the workspace. Each line is prefixed with its line number.

    Long files come a page at a time: the result gives the total number of lines
    and the offset to pass to read the next page. Lines longer than 2000
    characters are cut. Binary files are refused; inspect them with bash instead.
    Use this before editing a file, so that old_string for edit is copied exactly.

    Args:
        path: File path relative to the workspace root, such as "src/app.py".
        offset: Number of the first line to show (the first line of the file is 1).
        limit: Maximum number of lines to show.
    """
    if offset < 1:
        raise ToolError(f"offset must be 1 or more (line numbers start at 1), got {offset}.")
    if limit < 1:
        raise ToolError(f"limit must be 1 or more, got {limit}.")
    target = resolve_in_workspace(ctx.workspace, path, must_exist=True)
    shown = display_path(ctx.workspace, target)
    if target.is_dir():
        raise ToolError(f"{shown} is a directory; use list_files to see what it contains.")
    if not target.is_file():
        raise ToolError(f"{shown} is not a regular file (a device, socket or pipe); refused.")
    if is_binary_file(target):
        size = target.stat().st_size
        raise ToolError(f"{shown} looks like a binary file ({size} bytes); read only shows text files.")

    lines = _split_lines(target.read_text(encoding="utf-8", errors="replace"))
    total = len(lines)
    if total == 0:
        return ToolResult(title=f"Read {shown} (empty file)", metadata={"path": shown, "total_lines": 0})
    if offset > total:
        raise ToolError(f"offset {offset} is past the end of {shown}, which has {total} lines.")

    last = min(total, offset + limit - 1)
    body = "\n".join(f"{number:>6}\t{_cut(lines[number - 1])}" for number in range(offset, last + 1))
    if offset > 1 or last < total:
        body += f"\n\n(Showing lines {offset}-{last} of {total}."
        body += f" Use offset={last + 1} to read more.)" if last < total else ")"
    return ToolResult(
        title=f"Read {shown} (lines {offset}-{last} of {total})",
        output=truncate_output(body),
        metadata={"path": shown, "first_line": offset, "last_line": last, "total_lines": total},
    )


def _split_lines(text: str) -> list[str]:
    # Split on "\n" only, so numbers agree with grep and editors (str.splitlines also
    # breaks on form feeds and Unicode separators).
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _cut(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]}... [line cut: {len(line) - MAX_LINE_CHARS} more characters]"

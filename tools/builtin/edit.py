"""The `edit` tool: replace an exact piece of text in a workspace file."""

from __future__ import annotations

from tools.registry import tool
from tools.workspace import display_path, is_binary_file, require_writable, resolve_in_workspace
from traces.runner.tool_api import ToolContext, ToolError, ToolResult

SNIPPET_CONTEXT_LINES = 3
SNIPPET_MAX_LINES = 40


@tool(risk="risky", read_only=False)
def edit(
    ctx: ToolContext, path: str, old_string: str, new_string: str, replace_all: bool = False
) -> ToolResult:
    """Replace exact text in a file of the workspace.

    old_string must match the file exactly, including whitespace and indentation
    (read the file first and copy the text without the line-number prefix). It
    must occur exactly once unless replace_all is true; if it occurs several
    times, include more surrounding lines to make it unique. To create a new
    file, use write.

    Args:
        path: File path relative to the workspace root, such as "src/app.py".
        old_string: The exact text to find.
        new_string: The text to put in its place (must differ from old_string).
        replace_all: Replace every occurrence instead of requiring exactly one.
    """
    if not old_string:
        raise ToolError("old_string is empty; give the exact text to replace (use write to create a file).")
    if old_string == new_string:
        raise ToolError("old_string and new_string are identical; nothing to change.")
    require_writable(ctx)
    target = resolve_in_workspace(ctx.workspace, path, must_exist=True)
    shown = display_path(ctx.workspace, target)
    if target.is_dir():
        raise ToolError(f"{shown} is a directory; give a file path.")
    if not target.is_file():
        raise ToolError(f"{shown} is not a regular file (a device, socket or pipe); refused.")
    if is_binary_file(target):
        raise ToolError(f"{shown} looks like a binary file; edit only changes text files.")
    try:
        text = target.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{shown} is not valid UTF-8 ({exc.reason}); edit it with bash instead.") from exc

    old, new = _match_line_endings(text, old_string, new_string)
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_string was not found in {shown}. Read the file and copy the text exactly, "
            "including whitespace and indentation."
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string matches {count} places in {shown}; include more surrounding lines to make it "
            "unique, or set replace_all to true to replace every occurrence."
        )
    updated = text.replace(old, new)
    target.write_bytes(updated.encode("utf-8"))
    noun = "replacement" if count == 1 else "replacements"
    return ToolResult(
        title=f"Edited {shown} ({count} {noun})",
        output=_snippet(updated, text.index(old), new),
        metadata={"path": shown, "replacements": count},
    )


def _match_line_endings(text: str, old: str, new: str) -> tuple[str, str]:
    """Models send "\\n"; a file with Windows line endings needs "\\r\\n" to match."""
    if "\r\n" in text and "\r\n" not in old and old not in text:
        return old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    return old, new


def _snippet(text: str, start: int, inserted: str) -> str:
    """The edited region of the first replacement with a few lines around it, numbered."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    first = text.count("\n", 0, start)
    last = first + inserted.count("\n")
    lo = max(0, first - SNIPPET_CONTEXT_LINES)
    hi = min(len(lines), last + SNIPPET_CONTEXT_LINES + 1, lo + SNIPPET_MAX_LINES)
    return "\n".join(f"{n + 1:>6}\t{lines[n]}" for n in range(lo, hi))

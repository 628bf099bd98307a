"""The `write` tool: create or overwrite a file in the workspace."""

from __future__ import annotations

from tools.registry import tool
from tools.workspace import display_path, require_writable, resolve_in_workspace
from traces.runner.tool_api import ToolContext, ToolError, ToolResult


@tool(risk="risky", read_only=False)
def write(ctx: ToolContext, path: str, content: str) -> ToolResult:
    """Write a file in the workspace, replacing it entirely if it already exists.

    Missing parent directories are created. The content is written exactly as
    given (UTF-8), so include a final newline if the file should end with one.
    To change part of an existing file, prefer edit.

    Args:
        path: File path relative to the workspace root, such as "src/app.py".
        content: The complete new content of the file.
    """
    if not isinstance(content, str):
        raise ToolError(f"content must be a string, got {type(content).__name__}.")
    require_writable(ctx)
    target = resolve_in_workspace(ctx.workspace, path)
    shown = display_path(ctx.workspace, target)
    if target.is_dir():
        raise ToolError(f"{shown} is a directory; give a file path.")
    if target.exists() and not target.is_file():
        raise ToolError(f"{shown} is not a regular file (a device, socket or pipe); refused.")
    existed = target.exists()
    data = content.encode("utf-8")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except OSError as exc:
        raise ToolError(f"Cannot write {shown}: {exc.strerror or exc}.") from exc
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    verb = "Overwrote" if existed else "Created"
    return ToolResult(
        title=f"{verb} {shown} ({lines} lines, {len(data)} bytes)",
        metadata={"path": shown, "created": not existed, "bytes": len(data)},
    )

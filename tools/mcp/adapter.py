"""An MCP server's tool as one of the run's tools (`mcp__<server>__<tool>`), and its results as ToolResult."""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import re
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import pydantic
from PIL import Image

from tools.mcp.client import START_SECONDS
from tools.mcp.config import ServerConfig
from tools.registry import Tool
from traces.media.blobs import blob_put
from traces.media.request import accepts_images
from traces.runner.tool_api import ToolContext, ToolError, ToolResult

PREFIX = "mcp__"
MAX_NAME = 64  # OpenAI's and Anthropic's limit on a tool's name
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """The provider-safe name of `tool` of `server`: [A-Za-z0-9_-], at most 64 characters, stable."""
    safe = _UNSAFE.sub("_", tool)
    name = f"{PREFIX}{server}__{safe}"
    if safe == tool and len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]  # rewritten names stay distinct
    return f"{name[: MAX_NAME - 9]}_{digest}"


def server_of(name: str) -> str | None:
    """The server a tool name points at (`mcp__<server>__...`), or None for a built-in."""
    if not name.startswith(PREFIX):
        return None
    server, _, rest = name[len(PREFIX) :].partition("__")
    return server if rest else None


class _Arguments(pydantic.BaseModel):
    arguments: dict[str, Any]


@dataclass
class McpTool(Tool):
    """A tool of an MCP server; its arguments are checked by the server against its own schema."""

    server: str = ""
    remote_name: str = ""

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise ToolError("arguments must be a JSON object")
        return {"arguments": arguments}


def build_mcp_tool(server: ServerConfig, remote: types.Tool, call: Any) -> McpTool:
    """The run's tool for `remote`; `call(server, remote_name, arguments, ctx)` runs it."""
    policy = server.policy(remote.name)
    parameters = dict(remote.input_schema or {})
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    description = (remote.description or remote.title or remote.name).strip()

    def run(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return call(server, remote.name, arguments, ctx)

    return McpTool(
        name=tool_name(server.name, remote.name),
        func=run,
        description=f"{description}\n\n(From the MCP server '{server.name}'.)",
        parameters=parameters,
        arguments_model=_Arguments,
        context_param="ctx",
        risk=policy.risk,
        read_only=False,  # a server's hints are its own claims, not ours to rely on
        timeout=START_SECONDS + server.timeout + 10,  # the call's own timeout answers first
        server=server.name,
        remote_name=remote.name,
    )


def to_tool_result(server: str, tool: str, result: types.CallToolResult, ctx: ToolContext) -> ToolResult:
    """Text, structured content, images (for models that take them) and resources as one ToolResult."""
    model = (ctx.config.model if ctx.config else None) or getattr(ctx.trace, "model", None) or ""
    vision = accepts_images(model)
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for index, block in enumerate(result.content):
        texts.extend(_block_text(block, images if vision else None, f"{tool}-{index}"))
    if result.structured_content is not None and not any(
        isinstance(b, types.TextContent) for b in result.content
    ):
        texts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=2))
    output = "\n\n".join(t for t in texts if t)
    metadata = {"source": f"mcp:{server}", "mcp_server": server, "mcp_tool": tool}
    if result.is_error:
        message = output or "no details given"
        return ToolResult(
            title="Error",
            output=f"The MCP tool {tool} ({server}) failed: {message}",
            is_error=True,
            metadata=metadata,
        )
    return ToolResult(title="", output=output or "(no output)", images=images, metadata=metadata)


def _block_text(block: Any, images: list[dict[str, Any]] | None, name: str) -> list[str]:
    if isinstance(block, types.TextContent):
        return [block.text]
    if isinstance(block, types.ImageContent):
        return [_image(block.data, block.mime_type, images, name)]
    if isinstance(block, types.AudioContent):
        return [f"[audio, {block.mime_type}: not passed to the model]"]
    if isinstance(block, types.ResourceLink):
        return [
            f"[resource link] {block.name}: {block.uri}"
            + (f" ({block.mime_type})" if block.mime_type else "")
        ]
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return [f"[resource {resource.uri}]\n{resource.text}"]
        mime = resource.mime_type or "application/octet-stream"
        if mime.startswith("image/"):
            return [f"[resource {resource.uri}] " + _image(resource.blob, mime, images, name)]
        return [f"[resource {resource.uri}: {mime}, {len(resource.blob) * 3 // 4} bytes, not shown]"]
    return [f"[{getattr(block, 'type', 'unknown')} content: not shown]"]


def _image(data: str, mime: str, images: list[dict[str, Any]] | None, name: str) -> str:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[an image ({mime}) that is not valid base64]"
    if images is None:
        return f"[an image ({mime}, {len(raw)} bytes): this model does not accept images]"
    media: dict[str, Any] = {"mime": mime, "bytes": len(raw), "name": name}
    try:
        with Image.open(io.BytesIO(raw)) as image:
            media["width"], media["height"] = image.size
    except Exception:
        pass
    images.append({"type": "image_url", "image_url": {"url": f"media:{blob_put(raw)}"}, "media": media})
    return f"[an image ({mime}, {len(raw)} bytes): shown below]"

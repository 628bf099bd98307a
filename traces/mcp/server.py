"""agentsite as an MCP server (X3): the tools and the trace resource an MCP client sees.

Each tool reads the caller from the HTTP request (traces/mcp/auth.py put the API
token's user in the ASGI scope), runs one sync handler of traces/mcp/handlers.py
in Django's database thread and returns its JSON; a refusal is an MCP tool error
(`isError`) carrying the REST API's error body and status.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from channels.db import database_sync_to_async
from django.core.serializers.json import DjangoJSONEncoder
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from traces.mcp import handlers
from traces.mcp.auth import scope_user

TRACE_URI = "agentsite://traces/{trace_id}"
INSTRUCTIONS = (
    "agentsite runs agents for you in the background. start_run hands it a task and answers at once "
    "with a trace_id; poll get_trace until status is completed, failed or stopped (waiting means an "
    "expert must approve a tool call, or a question needs an answer: answer_question). continue_run "
    "sends a follow-up, or rewinds to an earlier message with after_sequence. Errors carry the REST "
    "API's body: {error, code, status}."
)

TraceId = Annotated[str, Field(description="a trace id, as start_run or list_traces return it")]
Messages = Annotated[
    list[dict[str, Any]] | None,
    Field(description="OpenAI-format messages ({role, content}); instead of task/message"),
]
Settings = Annotated[
    dict[str, Any] | None,
    Field(
        description="run settings, as the REST API takes them: temperature, max_iterations, "
        "confirm_policy, strategy, skills, enable_memory, project, ..."
    ),
]

ToolFn = TypeVar("ToolFn", bound=Callable[..., Any])
# What every tool returns: a CallToolResult whose structured content is a JSON object.
Answer = Annotated[CallToolResult, dict[str, Any]]
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)


async def _run(ctx: Context, handler: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
    """`handler(user, ...)` in Django's database thread; the API's refusals as McpCallError."""
    user = scope_user(ctx.request_context.request)
    try:
        return await database_sync_to_async(handler)(user, *args, **kwargs)
    except Exception as exc:
        refusal = handlers.api_error(exc)
        if refusal is None:
            raise
        raise refusal from None


async def _call(ctx: Context, handler: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> Answer:
    """A tool's answer, its JSON as text and structured content; a refusal is a tool error
    (isError) whose text and structured content are the API's error body."""
    try:
        data, refused = await _run(ctx, handler, *args, **kwargs), False
    except handlers.McpCallError as refusal:
        data, refused = refusal.body, True
    text = json.dumps(data, cls=DjangoJSONEncoder)
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=json.loads(text), is_error=refused
    )


def _settings(settings: dict[str, Any] | None, **fields: Any) -> dict[str, Any]:
    """One request body from the run settings and the tool's own fields (unset ones left out)."""
    return {**(settings or {}), **{k: v for k, v in fields.items() if v is not None}}


def _tool(server: MCPServer, annotations: ToolAnnotations) -> Callable[[ToolFn], ToolFn]:
    """Register a tool; its docstring, dedented, is the description the client's model reads."""

    def register(fn: ToolFn) -> ToolFn:
        server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations)
        return fn

    return register


def build_server() -> MCPServer:
    server: MCPServer = MCPServer(name="agentsite", title="agentsite", instructions=INSTRUCTIONS)

    @_tool(server, WRITE)
    async def start_run(
        ctx: Context,
        task: Annotated[str | None, Field(description="what the agent should do (one user message)")] = None,
        messages: Messages = None,
        preset: Annotated[str | None, Field(description="agent preset (agent_type)")] = None,
        model: Annotated[str | None, Field(description="model name; default: the deployment's")] = None,
        name: Annotated[str | None, Field(description="a name for the trace")] = None,
        tools: Annotated[list[str] | None, Field(description="tools offered (default: the preset's)")] = None,
        settings: Settings = None,
    ) -> Answer:
        """Start a new agent run in the background; answers at once with its trace_id (status started).
        Give either task or messages. Poll get_trace for its progress and result."""
        body = _settings(
            settings, task=task, messages=messages, preset=preset, model=model, name=name, tools=tools
        )
        return await _call(ctx, handlers.start_run, body)

    @_tool(server, WRITE)
    async def continue_run(
        ctx: Context,
        trace_id: TraceId,
        message: Annotated[str | None, Field(description="a follow-up user message")] = None,
        messages: Messages = None,
        after_sequence: Annotated[
            int | None,
            Field(
                description="rewind: cut the main path after this message sequence (get_trace shows "
                "them) and go on from there with the new message; without a message the answer "
                "after that point is regenerated"
            ),
        ] = None,
        settings: Settings = None,
    ) -> Answer:
        """Continue a finished, failed or stopped trace (or rewind it with after_sequence); it runs in
        the background. Refused (status 409) while the trace runs or is queued."""
        if message is not None:
            messages = [*(messages or []), {"role": "user", "content": message}]
        body = _settings(settings, messages=messages, after_sequence=after_sequence)
        return await _call(ctx, handlers.continue_run, trace_id, body)

    @_tool(server, ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False))
    async def stop_run(ctx: Context, trace_id: TraceId) -> Answer:
        """Stop a running or queued trace: it stops at its next checkpoint (status stopping, then
        stopped). Refused (status 409) when it is not running."""
        return await _call(ctx, handlers.stop_run, trace_id)

    @_tool(server, READ)
    async def get_trace(
        ctx: Context,
        trace_id: TraceId,
        after: Annotated[int, Field(ge=0, description="main-path messages after this sequence")] = 0,
        limit: Annotated[
            int, Field(ge=1, le=handlers.MAX_PAGE, description="at most this many")
        ] = handlers.PAGE,
    ) -> Answer:
        """A trace: status, result (result_summary), error, goal tree, sub-traces, totals; a page of its
        main path (the conversation, by sequence: pass next_after as `after` for the next page); its
        pending approvals and open questions to a human."""
        return await _call(ctx, handlers.get_trace, trace_id, after=after, limit=limit)

    @_tool(server, READ)
    async def list_traces(
        ctx: Context,
        status: Annotated[
            str | None, Field(description="queued, running, waiting, completed, failed, stopped")
        ] = None,
        q: Annotated[str | None, Field(description="text in the name or task")] = None,
        parent: Annotated[str | None, Field(description="a parent trace id, or 'none' for top-level")] = None,
        limit: Annotated[int, Field(ge=1, le=handlers.MAX_PAGE)] = handlers.PAGE,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> Answer:
        """The traces you may see, newest first (yours; an expert sees all). Page with offset."""
        filters = {"status": status, "q": q, "parent": parent}
        return await _call(ctx, handlers.list_traces, filters, limit=limit, offset=offset)

    @_tool(server, WRITE)
    async def answer_question(
        ctx: Context,
        trace_id: Annotated[str, Field(description="the question's trace id (get_trace: open_questions)")],
        answer: Annotated[str, Field(description="your answer")],
    ) -> Answer:
        """Answer an agent's question to a human (ask_human); the asking trace resumes."""
        return await _call(ctx, handlers.answer_question, trace_id, answer)

    @_tool(server, WRITE)
    async def decide_approval(
        ctx: Context,
        trace_id: TraceId,
        approval_id: Annotated[int, Field(description="get_trace: pending_approvals[].approval_id")],
        decision: Literal["approve", "deny"],
        arguments: Annotated[
            dict[str, Any] | None, Field(description="edited arguments (approve only)")
        ] = None,
        note: str = "",
        scope: Annotated[
            Literal["call", "run"], Field(description="run: approve this tool for the rest of the run")
        ] = "call",
    ) -> Answer:
        """Approve or deny a tool call a trace waits on; the run resumes. Experts (staff) only
        (status 403 otherwise)."""
        body: dict[str, Any] = {"decision": decision, "note": note, "scope": scope}
        if arguments is not None:
            body["arguments"] = arguments
        return await _call(ctx, handlers.decide_approval, trace_id, approval_id, body)

    @server.resource(TRACE_URI, name="trace", mime_type="application/json")
    async def trace(trace_id: str, ctx: Context) -> Answer:
        """A trace as get_trace shows it (its first page of the main path)."""
        try:
            return await _run(ctx, handlers.get_trace, trace_id)
        except handlers.McpCallError as refusal:
            error = ResourceNotFoundError if refusal.body["status"] == 404 else ResourceError
            raise error(str(refusal)) from None

    return server

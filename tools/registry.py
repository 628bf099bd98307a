"""The `@tool` decorator and the registry every tool is collected in (T1, T2).

A tool is a plain function, sync or async. Its JSON schema comes from the type
hints and the docstring (first paragraph = description, `Args:` lines = parameter
descriptions) through a pydantic model of its arguments (`tools/arguments.py`),
which also checks every call before the tool runs. A parameter annotated
`ToolContext` is injected, never shown to the model.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import logging
import time
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pydantic
from django.conf import settings

from tools.arguments import arguments_model, parameters_schema, parse_docstring, validate_arguments
from traces.runner.tool_api import SLOW_AFTER_SECONDS, ToolContext, ToolError, ToolResult

logger = logging.getLogger(__name__)

RISK_LEVELS = ("safe", "risky")


@dataclass
class Tool:
    name: str
    func: Callable[..., Any]
    description: str
    parameters: dict[str, Any]
    # Checks and coerces a call's arguments (the model of `parameters`).
    arguments_model: type[pydantic.BaseModel]
    context_param: str | None = None
    risk: str = "safe"
    read_only: bool = True
    timeout: float | None = None
    is_async: bool = False
    # Inline tools run in the run's own thread, untimed: they change the run's
    # in-memory state (the goal tree) and must share its database connection.
    inline: bool = False
    param_names: list[str] = field(default_factory=list)
    # Why the tool cannot run on this server (e.g. not configured), or None; an
    # unavailable tool is not offered to runs.
    unavailable: Callable[[], str | None] | None = None
    # Per-call confirmation (seed 002 request_confirm): given a call's arguments, the
    # question to put to an expert before it runs, or None when it may run as is.
    # Under `ask-risky` a tool with this hook waits only when it asks.
    confirm: Callable[[dict[str, Any]], str | None] | None = None

    def unavailable_reason(self) -> str | None:
        return self.unavailable() if self.unavailable is not None else None

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments to call the tool with; ToolError says what is wrong."""
        return validate_arguments(self.arguments_model, arguments)

    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def build_tool(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    risk: str = "safe",
    read_only: bool = True,
    timeout: float | None = None,
    inline: bool = False,
    unavailable: Callable[[], str | None] | None = None,
    confirm: Callable[[dict[str, Any]], str | None] | None = None,
) -> Tool:
    if risk not in RISK_LEVELS:
        raise ValueError(f"risk must be one of {RISK_LEVELS}")
    tool_name = name or func.__name__
    doc_description, doc_params = parse_docstring(func.__doc__ or "")
    model = arguments_model(func, name=tool_name, descriptions=doc_params)
    hints = typing.get_type_hints(func)
    context_param = next((p for p in inspect.signature(func).parameters if hints.get(p) is ToolContext), None)
    return Tool(
        name=tool_name,
        func=func,
        description=description or doc_description or func.__name__,
        parameters=parameters_schema(model),
        arguments_model=model,
        context_param=context_param,
        risk=risk,
        read_only=read_only,
        timeout=timeout,
        is_async=inspect.iscoroutinefunction(func),
        inline=inline,
        param_names=[f.alias or n for n, f in model.model_fields.items()],
        unavailable=unavailable,
        confirm=confirm,
    )


class ToolRegistry:
    """Tools by name. `default_registry` holds the built-ins."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> Tool:
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def select(
        self,
        *,
        allowed: Iterable[str] | None = None,
        denied: Iterable[str] | None = None,
    ) -> list[Tool]:
        """Tools offered to a run: `allowed` (None = all) minus `denied` and the unavailable."""
        denied_set = set(denied or ())
        names = self.names() if allowed is None else [n for n in allowed if n in self._tools]
        return [
            self._tools[n]
            for n in names
            if n not in denied_set and self._tools[n].unavailable_reason() is None
        ]

    def version(self) -> Any:
        """The built-ins are fixed once registered (the MCP tool set changes: tools/mcp/toolset.py)."""
        return 0

    def check_requested(self, names: list[str]) -> None:
        """ValueError naming the tools in `names` that are unknown or cannot run here."""
        unknown = [n for n in names if n not in self._tools]
        if unknown:
            raise ValueError(f"unknown tool(s): {', '.join(unknown)}; available: {', '.join(self.names())}")
        for name in names:
            reason = self._tools[name].unavailable_reason()
            if reason:
                raise ValueError(f"tool {name} is not available on this server: {reason}")

    def execute(
        self,
        name: str,
        arguments: str | dict[str, Any] | None,
        ctx: ToolContext,
        *,
        offered: set[str] | None = None,
        timeout: float | None = None,
        slow: Callable[[], None] | None = None,
    ) -> ToolResult:
        """Run one tool call. Failures become an error ToolResult, never an exception.

        `offered` is the set of tools this run may use: anything else is refused
        as unknown, so a denied tool cannot be executed even when named (T5).
        `slow` is called in the caller's thread when a timed tool has not finished
        within SLOW_AFTER_SECONDS (the runner commits the call's event then, so a
        long tool shows live while it runs); what it raises is raised from here.
        """
        tool = self.get(name)
        if tool is None or (offered is not None and name not in offered):
            available = ", ".join(sorted(offered if offered is not None else self.names()))
            return _error(f"Unknown tool {name!r}. Available tools: {available}.")
        try:
            kwargs = tool.validate_arguments(_parse_arguments(arguments))
        except ToolError as exc:  # the tool does not run
            return _error(f"Invalid arguments for {name}: {exc}")
        if tool.context_param:
            kwargs[tool.context_param] = ctx
        limit = None if tool.inline else (tool.timeout or timeout)
        try:
            result = _call(tool, kwargs, limit, slow)
        except _SlowFailed as exc:
            raise exc.error from None
        except ToolError as exc:
            return _error(f"{name} failed: {exc}")
        except concurrent.futures.TimeoutError as exc:
            if limit is None:  # raised by the tool itself, not by waiting for it
                return _internal_error(name, exc)
            return _error(f"{name} timed out after {limit:g} s.")
        except Exception as exc:  # arguments were valid: a tool's own bug, which must not end the run (T2)
            return _internal_error(name, exc)
        return _as_result(name, result)


def _error(message: str) -> ToolResult:
    return ToolResult(title="Error", output=message, is_error=True)


def _internal_error(name: str, exc: Exception) -> ToolResult:
    logger.exception("tool %s failed with an internal error", name)
    return _error(f"{name} failed with an internal error: {type(exc).__name__}: {exc}")


def _parse_arguments(arguments: str | dict[str, Any] | None) -> dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, dict):
        return dict(arguments)
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise ToolError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})") from exc
    if not isinstance(parsed, dict):
        raise ToolError("arguments must be a JSON object")
    return parsed


class _SlowFailed(Exception):
    """What the caller's `slow` raised, carried past the tool's own error handling."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _call(tool: Tool, kwargs: dict[str, Any], timeout: float | None, slow: Callable[[], None] | None) -> Any:
    if tool.is_async:

        def target() -> Any:
            return asyncio.run(tool.func(**kwargs))

    else:

        def target() -> Any:
            return tool.func(**kwargs)

    if timeout is None:
        return target()
    # A timed tool runs in a helper thread of a shared pool; on timeout the run
    # moves on and the thread's late result is dropped.
    future = _TIMED_POOL.submit(_with_db_cleanup, target)
    if slow is None or timeout <= SLOW_AFTER_SECONDS:
        return future.result(timeout=timeout)
    deadline = time.monotonic() + timeout - SLOW_AFTER_SECONDS
    try:
        return future.result(timeout=SLOW_AFTER_SECONDS)
    except concurrent.futures.TimeoutError:
        pass
    try:
        slow()
    except BaseException as exc:  # the tool's late result is dropped, as on a timeout
        raise _SlowFailed(exc) from exc
    return future.result(timeout=max(0.0, deadline - time.monotonic()))


# Threads for timed tools, shared by every run of the process (starting a thread per
# call costs more than most tools). A tool that overruns its timeout keeps its thread
# until it returns, so the pool is generous.
# Sized to the runs a worker process holds (traces/runhost.py), so a run's tool
# never waits for a thread while its timeout runs.
_TIMED_POOL = concurrent.futures.ThreadPoolExecutor(
    max_workers=max(32, 2 * settings.AGENT_RUNS_PER_WORKER), thread_name_prefix="tool"
)


def _with_db_cleanup(target: Callable[[], Any]) -> Any:
    from django.db import connections

    try:
        return target()
    finally:
        connections.close_all()


def _as_result(name: str, value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(title="", output=value)
    try:
        text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    except TypeError:
        text = str(value)
    return ToolResult(title="", output=text)


default_registry = ToolRegistry()


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    risk: str = "safe",
    read_only: bool = True,
    timeout: float | None = None,
    inline: bool = False,
    unavailable: Callable[[], str | None] | None = None,
    confirm: Callable[[dict[str, Any]], str | None] | None = None,
    registry: ToolRegistry | None = None,
) -> Any:
    """Register a function as a tool. Usable bare (`@tool`) or with options."""

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        built = build_tool(
            f,
            name=name,
            description=description,
            risk=risk,
            read_only=read_only,
            timeout=timeout,
            inline=inline,
            unavailable=unavailable,
            confirm=confirm,
        )
        (registry or default_registry).register(built)
        # the function keeps its Tool for code that holds only the function; a plain
        # function type has no such attribute
        f.tool = built  # type: ignore[attr-defined]
        return f

    if func is not None:
        return decorate(func)
    return decorate


def load_builtin_tools() -> ToolRegistry:
    """Import every built-in tool module so its `@tool` registrations run."""
    import importlib
    import pkgutil

    import tools.builtin as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"tools.builtin.{module.name}")
    return default_registry

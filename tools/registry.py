"""The `@tool` decorator and the registry every tool is collected in (T1, T2).

A tool is a plain function, sync or async. Its JSON schema comes from the type
hints and the docstring (first paragraph = description, `Args:` lines = parameter
descriptions). A parameter annotated `ToolContext` is injected, never shown to the
model.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import logging
import re
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin

from tools.models import ToolContext, ToolError, ToolResult

logger = logging.getLogger(__name__)

RISK_LEVELS = ("safe", "risky")


@dataclass
class Tool:
    name: str
    func: Callable[..., Any]
    description: str
    parameters: dict[str, Any]
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


_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}


def _json_schema(annotation: Any) -> dict[str, Any]:
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        values = list(args)
        schema = _json_schema(type(values[0]))
        schema["enum"] = values
        return schema
    if origin in (typing.Union, types.UnionType):
        non_null = [a for a in args if a is not type(None)]
        if len(non_null) == 1:
            return _json_schema(non_null[0])
        return {"anyOf": [_json_schema(a) for a in non_null]}
    if origin in (list, tuple, set) or annotation in (list, tuple, set):
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = _json_schema(args[0])
        return schema
    if origin is dict or annotation is dict:
        return {"type": "object"}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    return {}


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and `Args:` entries."""
    doc = inspect.cleandoc(doc or "")
    parts = re.split(r"^\s*(?:Args|Arguments|Parameters):\s*$", doc, maxsplit=1, flags=re.M)
    description = parts[0].strip()
    params: dict[str, str] = {}
    if len(parts) > 1:
        current = None
        for line in parts[1].splitlines():
            if re.match(r"^\s*(Returns|Raises|Examples?):\s*$", line):
                break
            match = re.match(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if match:
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current and line.strip():
                params[current] += " " + line.strip()
    return description, params


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
    hints = typing.get_type_hints(func)
    doc_description, doc_params = _parse_docstring(func.__doc__ or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    context_param = None
    param_names = []
    for pname, param in inspect.signature(func).parameters.items():
        annotation = hints.get(pname, str)
        if annotation is ToolContext:
            context_param = pname
            continue
        param_names.append(pname)
        schema = _json_schema(annotation)
        if pname in doc_params:
            schema["description"] = doc_params[pname]
        if param.default is inspect.Parameter.empty:
            required.append(pname)
        elif param.default is not None:
            schema["default"] = param.default
        properties[pname] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return Tool(
        name=name or func.__name__,
        func=func,
        description=description or doc_description or func.__name__,
        parameters=parameters,
        context_param=context_param,
        risk=risk,
        read_only=read_only,
        timeout=timeout,
        is_async=inspect.iscoroutinefunction(func),
        inline=inline,
        param_names=param_names,
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
    ) -> ToolResult:
        """Run one tool call. Failures become an error ToolResult, never an exception.

        `offered` is the set of tools this run may use: anything else is refused
        as unknown, so a denied tool cannot be executed even when named (T5).
        """
        tool = self._tools.get(name)
        if tool is None or (offered is not None and name not in offered):
            available = ", ".join(sorted(offered if offered is not None else self._tools))
            return _error(f"Unknown tool {name!r}. Available tools: {available}.")
        try:
            kwargs = _parse_arguments(arguments)
        except ToolError as exc:
            return _error(f"Invalid arguments for {name}: {exc}")
        unknown = sorted(set(kwargs) - set(tool.param_names))
        if unknown:
            return _error(
                f"Invalid arguments for {name}: unknown parameter(s) {', '.join(unknown)}; "
                f"expected {', '.join(tool.param_names) or 'no parameters'}."
            )
        missing = [p for p in tool.parameters.get("required", []) if p not in kwargs]
        if missing:
            return _error(f"Invalid arguments for {name}: missing {', '.join(missing)}.")
        if tool.context_param:
            kwargs[tool.context_param] = ctx
        limit = None if tool.inline else (tool.timeout or timeout)
        try:
            result = _call(tool, kwargs, limit)
        except ToolError as exc:
            return _error(f"{name} failed: {exc}")
        except concurrent.futures.TimeoutError:
            return _error(f"{name} timed out after {limit:g} s.")
        except TypeError as exc:
            return _error(f"Invalid arguments for {name}: {exc}")
        except Exception as exc:  # a tool's own bug must not end the run (T2)
            logger.exception("tool %s raised", name)
            return _error(f"{name} raised {type(exc).__name__}: {exc}")
        return _as_result(name, result)


def _error(message: str) -> ToolResult:
    return ToolResult(title="Error", output=message, is_error=True)


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


def _call(tool: Tool, kwargs: dict[str, Any], timeout: float | None) -> Any:
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
    return _TIMED_POOL.submit(_with_db_cleanup, target).result(timeout=timeout)


# Threads for timed tools, shared by every run of the process (starting a thread per
# call costs more than most tools). A tool that overruns its timeout keeps its thread
# until it returns, so the pool is generous.
_TIMED_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="tool")


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

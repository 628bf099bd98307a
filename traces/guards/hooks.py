"""Lifecycle hooks (G4): code that watches or shapes a run at fixed points.

Points, in the order a step meets them:

- `before_model(trace, messages) -> messages | None` may replace the request's messages;
- `after_model(trace, response) -> None` sees the model's reply;
- `before_tool_call(trace, call) -> str | None` may block a call: the reason becomes its result;
- `after_tool_call(trace, call, result) -> ToolResult | None` may rewrite the result;
- `on_compaction(trace, info) -> None`, `on_agent_end(trace) -> None`.

Hooks run by ascending priority (ties keep registration order). A hook that raises
is logged and skipped; it never ends the run. Register in code
(`default_hooks.register("before_tool_call", fn, priority=10)`) or in settings:
`AGENT_HOOKS` lists dotted paths to functions taking the registry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

POINTS = (
    "before_model",
    "after_model",
    "before_tool_call",
    "after_tool_call",
    "on_compaction",
    "on_agent_end",
)


@dataclass(frozen=True)
class _Hook:
    priority: int
    order: int
    func: Callable[..., Any]


class LifecycleHooks:
    def __init__(self) -> None:
        self._hooks: dict[str, list[_Hook]] = {point: [] for point in POINTS}
        self._count = 0

    def register(self, point: str, func: Callable[..., Any], *, priority: int = 100) -> Callable[..., Any]:
        if point not in self._hooks:
            raise ValueError(f"unknown hook point {point!r}; points: {', '.join(POINTS)}")
        self._count += 1
        self._hooks[point].append(_Hook(priority, self._count, func))
        self._hooks[point].sort(key=lambda h: (h.priority, h.order))
        return func

    def __bool__(self) -> bool:
        return any(self._hooks.values())

    def has(self, point: str) -> bool:
        return bool(self._hooks[point])

    def _each(self, point: str, *args: Any) -> list[Any]:
        results = []
        for hook in self._hooks[point]:
            try:
                results.append(hook.func(*args))
            except Exception:
                logger.exception("%s hook %r failed; skipped", point, hook.func)
        return results

    def before_model(self, trace: Any, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for hook in self._hooks["before_model"]:
            try:
                replaced = hook.func(trace, messages)
            except Exception:
                logger.exception("before_model hook %r failed; skipped", hook.func)
                continue
            if replaced is not None:
                messages = replaced
        return messages

    def after_model(self, trace: Any, response: Any) -> None:
        self._each("after_model", trace, response)

    def before_tool_call(self, trace: Any, call: dict[str, Any]) -> str | None:
        """The first blocking reason any hook gives, or None to let the call run."""
        for hook in self._hooks["before_tool_call"]:
            try:
                reason = hook.func(trace, call)
            except Exception:
                logger.exception("before_tool_call hook %r failed; skipped", hook.func)
                continue
            if reason:
                return str(reason)
        return None

    def after_tool_call(self, trace: Any, call: dict[str, Any], result: Any) -> Any:
        for hook in self._hooks["after_tool_call"]:
            try:
                rewritten = hook.func(trace, call, result)
            except Exception:
                logger.exception("after_tool_call hook %r failed; skipped", hook.func)
                continue
            if rewritten is not None:
                result = rewritten
        return result

    def on_compaction(self, trace: Any, info: dict[str, Any]) -> None:
        self._each("on_compaction", trace, info)

    def on_agent_end(self, trace: Any) -> None:
        self._each("on_agent_end", trace)


def hooks_from_settings() -> LifecycleHooks:
    """A registry filled by the functions named in settings.AGENT_HOOKS."""
    hooks = LifecycleHooks()
    for path in getattr(settings, "AGENT_HOOKS", []):
        import_string(path)(hooks)
    return hooks

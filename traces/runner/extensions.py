"""The runner's extension points: what other apps plug into every run.

Dependencies run one way: memory, tools, collaboration and notifications import the
runner's public API and register here, in their AppConfig.ready(); the runner calls
what is registered and imports none of them. Each point says when it is called.

The types a point deals in are protocols of what the runner reads (a preset, a tool,
a tool set), so the runner names no class of another app either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from traces.goal_tree import GoalTree
    from traces.llm import LLMResponse
    from traces.models import Message, Trace
    from traces.runner.config import RunConfig
    from traces.runner.state import RunState
    from traces.runner.store import RunStore
    from traces.runner.strategies import Lesson
    from traces.runner.tool_api import ToolContext, ToolResult

logger = logging.getLogger(__name__)

# A write to run inside the run's next fenced commit (RunStore.defer).
Defer = Callable[[Callable[[], None]], None]
Emit = Callable[[str, dict[str, Any]], None]
ContextHook = Callable[["Trace", "GoalTree | None"], "str | None"]


class Preset(Protocol):
    """What the runner reads of an agent preset (M7)."""

    allowed_tools: list[str] | None
    denied_tools: list[str] | None
    max_iterations: int | None
    temperature: float | None
    skills: list[str] | None
    extra: dict[str, Any]


class Tool(Protocol):
    """What the runner reads of a tool (T1)."""

    name: str
    risk: str
    read_only: bool
    inline: bool
    confirm: Callable[[dict[str, Any]], str | None] | None

    def schema(self) -> dict[str, Any]: ...

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]: ...


class ToolSet(Protocol):
    """The registry a runner offers tools from and runs them through (T1, T2, T5)."""

    def get(self, name: str) -> Tool | None: ...

    def select(self, *, allowed: Iterable[str] | None, denied: Iterable[str] | None) -> list[Any]: ...

    def check_requested(self, names: list[str]) -> None: ...

    def execute(
        self,
        name: str,
        arguments: Any,
        ctx: ToolContext,
        *,
        offered: set[str],
        timeout: float | None,
        slow: Callable[[], None] | None = None,
    ) -> ToolResult:
        """Run a call; `slow` (in this thread) once a tool runs past a quarter second."""
        ...

    def version(self) -> Any:
        """Changes when the tools it offers may have (an MCP server's list changed): runs select again."""
        ...


class RunObserver(Protocol):
    """Watches a run as it happens, on the run's thread (OpenTelemetry export, issue 22).

    Each method must be quick and must not block: an observer that raises is logged
    and the run goes on. `run` is the runner's RunState, read-only to observers
    except `run.trace.context`, which an observer may replace (written with the
    next commit)."""

    def segment_started(self, run: RunState) -> None: ...

    def model_started(
        self, run: RunState, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> None: ...

    # `message`: the assistant message the reply became; None with `error` when the call failed or stopped
    def model_ended(
        self, run: RunState, response: LLMResponse | None, message: Message | None, error: str | None
    ) -> None: ...

    def tool_started(self, run: RunState, call: dict[str, Any], name: str) -> None: ...

    # `message`: the call's result; None when the tool suspended the run (it waits)
    def tool_ended(self, run: RunState, call: dict[str, Any], message: Message | None) -> None: ...

    # The run is about to end `waiting`: `kind` approval (G5) or tool (ask_human, a waiting sub-agent)
    def waiting(self, run: RunState, kind: str, tool: str) -> None: ...

    # The run segment ended however it did (run.trace.status), lease loss and crashes included
    def segment_ended(self, run: RunState) -> None: ...


@dataclass
class RunExtensions:
    """The registered extensions; `extensions` below is the one every runner uses."""

    # The tool registry a runner uses unless given one (the tools app).
    tool_registry: Callable[[], ToolSet] | None = None
    # A preset by agent type; raises LookupError naming the known ones (the memory app).
    preset: Callable[[str | None], Preset] | None = None
    # A new run's system prompt from the base prompt (skills, M6).
    system_prompt: list[Callable[[RunConfig, Preset, str, set[str]], str]] = field(default_factory=list)
    # A new run's input messages before they are stored (experiences, M4).
    first_messages: list[Callable[..., list[dict[str, Any]]]] = field(default_factory=list)
    # Each assistant reply, its writes deferred into the reply's commit (citations, M4).
    on_reply: list[Callable[[Trace, str | None, Defer], None]] = field(default_factory=list)
    # A run's end, its writes deferred into the final commit (outcomes, M5).
    on_end: list[Callable[[Trace, str, Defer], None]] = field(default_factory=list)
    # After the final commit (notifications).
    after_end: list[Callable[[Trace, str], None]] = field(default_factory=list)
    # When a run's generator exits however it ended, lease loss and crashes included,
    # with the trace id and the run's final status (`waiting` for a pause; still
    # `running` after a lost lease): what a run held in this process is let go, or
    # kept for the next run segment (the browser tools' Chromium).
    after_run: list[Callable[[str, str], None]] = field(default_factory=list)
    # Each model request, just before it is sent; may return replacement messages, which
    # are sent but not stored (M8: the memory index and what recall found); `Emit`
    # writes an event of the run (M8: `memory_recalled`).
    before_model: list[Callable[[Trace, list[dict[str, Any]], Emit], list[dict[str, Any]] | None]] = field(
        default_factory=list
    )
    # Parts of the periodic context injection (R7: the inbox, S4).
    context_hooks: list[ContextHook] = field(default_factory=list)
    # The persisted result of an open call healed at load (R6); None: not this hook's tool.
    healers: list[Callable[[Trace, dict[str, Any]], str | None]] = field(default_factory=list)
    # A Reflexion lesson (R11), its writes deferred into the next commit (a draft experience).
    on_lesson: list[Callable[[Trace, Lesson, Defer], None]] = field(default_factory=list)
    # Before a level-2 compaction summarises (C2: a reflection side branch).
    before_compaction: list[Callable[[RunStore, Any], None]] = field(default_factory=list)

    # Watchers of every run (OpenTelemetry spans); see RunObserver.
    observers: list[RunObserver] = field(default_factory=list)

    def observe(self, point: str, *args: Any) -> None:
        """Tell every observer; an observer's failure never fails the run."""
        for observer in self.observers:
            try:
                getattr(observer, point)(*args)
            except Exception:
                logger.exception("run observer %r failed at %s", observer, point)

    def add(self, point: str, hook: Callable[..., Any]) -> None:
        """Register `hook` at the list point `point`, once: an app's ready() may run
        again (django.test.utils.isolate_apps builds a second registry)."""
        hooks: list[Callable[..., Any]] = getattr(self, point)
        if hook not in hooks:
            hooks.append(hook)

    def require_tools(self) -> ToolSet:
        if self.tool_registry is None:
            raise RuntimeError("no tool registry registered (is the tools app installed?)")
        return self.tool_registry()

    def require_preset(self, name: str | None) -> Preset:
        if self.preset is None:
            raise RuntimeError("no preset provider registered (is the memory app installed?)")
        return self.preset(name)


extensions = RunExtensions()

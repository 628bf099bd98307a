"""The runner's public API for tools: what a tool receives (ToolContext), returns
(ToolResult) or raises (ToolError). Tools import these from `traces.runner`; the
runner imports nothing of the tools app (its registry comes through extensions)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

from traces.models import Trace

if TYPE_CHECKING:
    from traces.goal_tree import GoalTree
    from traces.runner.config import RunConfig
    from traces.runner.store import RunStore

# A timed tool not done after this long counts as slow (tools/registry.py:
# ToolRegistry.execute's `slow`): the runner then commits its `tool_call`, so a watcher
# sees a long command when it starts. Not shorter: at 5 ms a busy worker's quick tools
# crossed it too, and in two of four 64-run SQLite rounds their extra commits, queued
# for the one writer, made tool calls 0.5 s late (bench/density.py).
SLOW_AFTER_SECONDS = 0.25


class ToolError(Exception):
    """A failure the model caused (bad path, bad argument): reported back to it."""


@dataclass
class ToolResult:
    title: str
    output: str = ""
    # A short stand-in for `output` once it has been seen (C3).
    long_term_memory: str | None = None
    include_output_only_once: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    # Stored image parts (traces/media/parts.py) the model sees after this step's
    # results, in a user message: providers take images in user turns, not tool ones.
    images: list[dict[str, Any]] = field(default_factory=list)

    def to_content(self) -> str:
        """The text the model reads as this tool's result."""
        if not self.output:
            return self.title
        return f"{self.title}\n\n{self.output}" if self.title else self.output


@dataclass
class ToolContext:
    """Injected into tools that declare a `ctx: ToolContext` parameter."""

    trace: Trace
    workspace: Path
    goal_tree: GoalTree | None = None
    goal_id: str | None = None
    uid: str | None = None
    runner: Any = None  # the AgentRunner, for tools that run sub-agents
    tool_call_id: str | None = None
    # The run's store: tools that start children emit events and commit through it.
    store: RunStore | None = None
    config: RunConfig | None = None
    # The run's network setting for sandboxed processes; None = AGENT_SANDBOX_NETWORK.
    sandbox_network: bool | None = None
    # M9: a read-only project's workspace refuses writes (file tools) and is mounted ro (sandbox).
    workspace_writable: bool = True
    project: str | None = None  # the project setting the workspace comes from, None = the trace's own

    @property
    def trace_id(self) -> str:
        return self.trace.trace_id

    def interruption(self) -> str | None:
        """Why the run making this call must end now, or None: long tools poll it.

        A stop requested on the trace (R5, from any process) or a lease taken by
        another run (W5) ends the run at its next checkpoint; a tool blocked on a
        command would otherwise hold it until the command's own timeout. One
        primary-key read; None for a context without a stored trace (tests).
        """
        if getattr(self.trace, "pk", None) is None:
            return None
        row = Trace.objects.filter(pk=self.trace.pk).values_list("stop_requested", "run_token").first()
        if row is None:
            return "its trace was deleted"
        stop_requested, run_token = row
        if stop_requested:
            return "the run was asked to stop"
        if run_token != self.trace.run_token:
            return "the run lost its lease to another worker"
        return None


_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_DIR_NAME = 80


def workspace_for(trace_id: str) -> Path:
    """The workspace directory of a trace, created if missing.

    Sub-traces (`{root}@delegate-...`) share their root trace's workspace, so a
    delegated agent sees the files its parent made.
    """
    directory = workspace_path(trace_id)
    directory.mkdir(parents=True, exist_ok=True)
    return directory.resolve()


def workspace_path(trace_id: str) -> Path:
    """Where `workspace_for` keeps the trace's workspace (its root trace's), not created."""
    root_id = trace_id.split("@", 1)[0]
    if not root_id:
        raise ValueError(f"trace id {trace_id!r} has no root part")
    return Path(settings.AGENT_WORKSPACE_ROOT) / _safe_dir_name(root_id)


def _safe_dir_name(root_id: str) -> str:
    name = _UNSAFE_NAME_CHARS.sub("_", root_id).strip("._")[:_MAX_DIR_NAME]
    if name == root_id:
        return name
    # The id was rewritten: a digest keeps distinct ids in distinct directories.
    digest = hashlib.sha256(root_id.encode("utf-8")).hexdigest()[:12]
    return f"{name or 'trace'}-{digest}"

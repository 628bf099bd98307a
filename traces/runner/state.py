"""The state of one run, owned by the thread running it (traces/runner/loop.py)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from traces.goal_tree import GoalTree
from traces.guards.loop_detection import LoopDetector, LoopVerdict
from traces.llm import ModelSettings
from traces.models import Message, Trace
from traces.runner.compaction import PathInfo
from traces.runner.config import RunConfig
from traces.runner.extensions import Preset, Tool
from traces.runner.project import Placement, ProjectContext
from traces.runner.request_log import RequestLog
from traces.runner.store import RunStore
from traces.runner.turns import Turn


@dataclass(frozen=True)
class StepEnd:
    """How a ReAct loop (the whole run's, or one plan step's) ended.

    `kind`: answered (`text` is the answer), error (`text`: the model call's
    error), stopped, limit (no answer within its iterations), gave_up (Reflexion
    ran out of lessons, `text` says why) or ended (the run already ended: waiting,
    or a guard ended it).
    """

    kind: str
    text: str = ""


@dataclass
class RunState:
    """The state of one run, owned by the thread running it."""

    trace: Trace
    store: RunStore
    goal_tree: GoalTree
    config: RunConfig
    preset: Preset
    model: ModelSettings
    tools: list[Tool]
    workspace: Path
    llm_messages: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    stream: bool = False
    stream_watched: bool = False  # stream only calls made while the trace is watched
    max_iterations: int = 30
    context_every: int = 10
    stop_event: threading.Event = field(default_factory=threading.Event)
    last_poll: float = 0.0
    pending_calls: list[dict[str, Any]] = field(default_factory=list)
    pending_from: int = 0  # sequence of the assistant message whose calls are pending
    fresh: list[Message] = field(default_factory=list)  # persisted, not yet yielded
    iterations: int = 0
    model_seconds: float = 0.0
    last_call_seconds: float | None = None  # the run's latest model call, request to reply
    started: float = field(default_factory=time.perf_counter)
    loop_detector: LoopDetector = field(
        default_factory=lambda: LoopDetector(
            warning=settings.AGENT_LOOP_WARNING, critical=settings.AGENT_LOOP_CRITICAL
        )
    )
    loop_verdict: LoopVerdict | None = None  # worst pattern seen in the current step
    infos: list[PathInfo] = field(default_factory=list)  # one per llm_messages entry (C1-C3)
    token_total: int = 0  # estimated tokens of llm_messages
    threshold: int = 0  # compaction starts above this many tokens
    once_pending: list[tuple[int, str]] = field(default_factory=list)  # (index, long-term memory) to retire
    dropped_signature: tuple[int, ...] = ()  # what level 1 left out last time (one event per change)
    truncated_signature: tuple[int, ...] = ()  # what the truncation fallback left out last time
    microcompact_keep: int = 0  # newest tool results kept whole in requests (0: microcompact off)
    microcompact_at: int = 0  # microcompact starts above this many tokens
    microcompact_done: int = 0  # index of llm_messages where the last microcompact pass stopped
    policy: str = "auto"  # confirm gate (G5)
    gated: bool = False  # whether calls must pass the gate (a policy asks, or approvals exist)
    placement: Placement | None = None  # M9: the workspace, its AGENTS.md root, whether writable
    project_context: ProjectContext | None = None  # M9: added to each request's system prompt

    strategy: str = "react"  # R11: react | routed | plan_execute (strategies/select.py)
    reflexion: bool = False  # R11: a self-critique and a retry after a failed tool call
    lessons: list[str] = field(default_factory=list)  # Reflexion's lessons, in every later request
    step_lessons: int = 0  # lessons learned in the current step (a plan step, or the whole loop)
    request_log: RequestLog = field(default_factory=RequestLog)  # what each model call was sent
    turn: Turn = field(default_factory=Turn)  # its place in the process's turns (turns.py)

    tools_version: Any = None  # the tool set's version the tools were selected at
    offered: set[str] = field(init=False)  # names of self.tools
    tool_schemas: list[dict[str, Any]] = field(init=False)  # what every model request offers

    def __post_init__(self) -> None:
        self.offer(self.tools)

    def offer(self, tools: list[Tool]) -> None:
        """Offer `tools` from the next model request on; derived once, not at every step."""
        self.tools = tools
        self.offered = {t.name for t in tools}
        self.tool_schemas = [t.schema() for t in tools]

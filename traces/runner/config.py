"""RunConfig, and the errors a run request can end in (defined in traces/errors.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from traces.errors import InvalidRun as InvalidRun
from traces.errors import LeaseLost as LeaseLost
from traces.errors import NotAllowed as NotAllowed
from traces.errors import RunConflict as RunConflict
from traces.errors import RunError as RunError
from traces.errors import TraceNotFound as TraceNotFound

# How a run that reached its step limit says so (trace.error_message, status stopped).
STEP_LIMIT_PREFIX = "step limit:"


@dataclass
class RunConfig:
    """Everything one run may vary. Infrastructure lives on the AgentRunner.

    Fields follow the seed's RunConfig; `None` means "the preset's or the
    deployment's default".
    """

    # model layer
    model: str | None = None
    temperature: float | None = None
    max_iterations: int | None = None
    tools: list[str] | None = None  # None = every tool the preset allows
    # framework layer
    agent_type: str = "default"
    uid: str | None = None
    system_prompt: str | None = None
    skills: list[str] | None = None
    enable_memory: bool = True
    # M4: the experiences a run may be given, by code (None = the whole approved library)
    experiences: list[str] | None = None
    auto_execute_tools: bool = True
    name: str | None = None
    # trace control
    trace_id: str | None = None
    parent_trace_id: str | None = None
    parent_goal_id: str | None = None
    after_sequence: int | None = None
    # ours
    owner_id: int | None = None
    context: dict[str, Any] = field(default_factory=dict)
    llm_params: dict[str, Any] = field(default_factory=dict)
    stream: bool | None = None
    confirm_policy: str | None = None  # auto | ask-risky | ask-all; None = preset, then deployment
    sandbox_network: bool | None = None  # network for sandboxed tools; None = preset, then deployment
    project: str | None = None  # M9: "name" or "name/dir" of AGENT_PROJECTS; None = preset, else none
    context_every: int | None = None
    strategy: str | None = None  # R11: react | routed | plan_execute; None = preset, else react
    reflexion: bool | None = None  # R11: self-critique after a failed call; None = preset, else plan_execute
    microcompact_keep: int | None = None  # newest tool results kept whole; 0 = off; None = deployment
    new_trace_id: str | None = None  # id for a new trace (sub-traces name theirs)
    # A run the API queued (traces.services): the trace row is already reserved
    # with this lease token, so the worker claims exactly that reservation (a
    # duplicate task delivery finds the token moved on and does nothing) and
    # adopts a pre-created new trace instead of inserting it.
    reserved_token: int | None = None
    reserved_from: str | None = None  # the trace's status before the reservation
    on_token: Callable[[str], None] | None = None
    # Told at each round's start with the run's progress (a sub-agent's parent relays
    # it as subagent_progress / subagent_checkpoint, traces/collaboration/progress.py).
    on_progress: Callable[[dict[str, Any]], None] | None = None


@dataclass
class RunResult:
    trace_id: str
    status: str
    result: str | None
    error: str | None
    messages: int
    head_sequence: int
    total_tokens: int
    total_cost: float
    iterations: int
    stats: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

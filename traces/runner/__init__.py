"""The agent runner: RunConfig in, Trace and Messages out."""

from __future__ import annotations

from traces.runner.config import (
    InvalidRun,
    LeaseLost,
    NotAllowed,
    RunConfig,
    RunConflict,
    RunError,
    RunResult,
    TraceNotFound,
)
from traces.runner.loop import AgentRunner

__all__ = [
    "AgentRunner",
    "InvalidRun",
    "LeaseLost",
    "NotAllowed",
    "RunConfig",
    "RunConflict",
    "RunError",
    "RunResult",
    "TraceNotFound",
]

"""What AgentRunner's phase mixins share (traces/runner/loop.py assembles them)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from traces.guards.hooks import LifecycleHooks
    from traces.llm import LLMResponse
    from traces.models import Message
    from traces.runner.extensions import ContextHook, ToolSet
    from traces.runner.state import RunState, StepEnd


class RunnerBase:
    """The base of every phase mixin (RunSetup, ModelCalls, ContextManagement, ToolCalls):
    declares the infrastructure `AgentRunner.__init__` sets and the steps one phase calls
    in another, so each mixin reads as what `self` is: the AgentRunner. Declarations
    only; nothing here exists at run time."""

    llm_call: Callable[..., LLMResponse]
    utility_llm_call: Callable[..., LLMResponse]
    tool_registry: ToolSet
    context_hooks: list[ContextHook]
    hooks: LifecycleHooks
    worker_id: str
    _pool: Executor

    if TYPE_CHECKING:

        def _add_message(self, run: RunState, message: Message) -> Message: ...  # loop.py

        def _stopping(self, run: RunState) -> bool: ...  # loop.py

        def _finish(  # loop.py
            self,
            run: RunState,
            status: str,
            *,
            result: str | None = None,
            error: str | None = None,
            reason: str | None = None,
        ) -> None: ...

        def _note(self, run: RunState, text: str, *, kind: str, description: str) -> Message: ...  # calls.py

        def _react(self, run: RunState, limit: int) -> Generator[Message, None, StepEnd]: ...  # loop.py

        def _request(self, run: RunState) -> list[dict[str, Any]]: ...  # context.py

        def _model_replied(
            self, run: RunState, response: LLMResponse, message: Message
        ) -> None: ...  # model_call.py

        def _call_model(  # model_call.py
            self, run: RunState, messages: list[dict[str, Any]], *, offer_tools: bool = True
        ) -> LLMResponse | None: ...

        def _persist_assistant(self, run: RunState, response: LLMResponse) -> Message: ...  # model_call.py

        def _self_critique(  # strategies/reflexion.py
            self, run: RunState, assistant: Message, errors: list[Message]
        ) -> Generator[Message, None, str | None]: ...

"""One-shot traces (seed 004 `mode: "call"`, `prompt_name`; seed 003 「单次调用是 Agent 的特例」).

`trace_call` sends one model request without tools through the litellm wrapper
(`traces/llm.py:LLMClient`) and records it as a trace of mode `call`: the input
messages, the reply with its tokens, cost and duration, `run_started` and `final`
(or `error`) events. No runner, worker, goal tree or context injection is involved:
the trace is complete when the function returns, and reads like any other trace
(API, portal, totals).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from traces.events import event_append
from traces.llm import LLMClient, LLMError, LLMResponse, ModelNotConfigured, agent_model
from traces.models import Message, Trace, TraceStatus
from traces.runner import InvalidRun
from traces.runner.prepare import new_trace_id, text_of, validate_messages
from traces.runner.run_settings import LLM_PARAMS_ALLOWED

# Never api_base, api_key or the like: the caller chooses how the model answers, not where
# the deployment's key is sent.
CALL_PARAMS_ALLOWED = LLM_PARAMS_ALLOWED | {"temperature"}

LLMCall = Callable[..., LLMResponse]


def trace_call(
    *,
    user: Any,
    messages: list[dict[str, Any]],
    prompt_name: str | None = None,
    model: str | None = None,
    name: str | None = None,
    llm_params: dict[str, Any] | None = None,
    llm_call: LLMCall | None = None,
) -> Trace:
    """Make one model call and return its trace (completed, or failed with the reason).

    Raises InvalidRun (400) for messages without a user message or no model configured;
    a model that fails is the trace's failure, not an exception."""
    clean = validate_messages(messages)
    first_user = next((m for m in clean if m["role"] == "user"), None)
    if first_user is None:
        raise InvalidRun("a call needs at least one user message")
    refused = set(llm_params or {}) - CALL_PARAMS_ALLOWED
    if refused:
        raise InvalidRun(
            f"llm_params: {', '.join(sorted(refused))} may not be set; allowed: {', '.join(sorted(CALL_PARAMS_ALLOWED))}"
        )
    try:
        settings_for_model = agent_model(model)
    except ModelNotConfigured as exc:
        raise InvalidRun(str(exc)) from None
    trace = _recorded_inputs(user, clean, prompt_name, name, settings_for_model.model, llm_params or {})
    try:
        response = (llm_call or LLMClient())(clean, model=settings_for_model, params=llm_params or None)
    except LLMError as exc:
        return _failed(trace, str(exc))
    return _completed(trace, response)


@transaction.atomic
def _recorded_inputs(
    user: Any,
    messages: list[dict[str, Any]],
    prompt_name: str | None,
    name: str | None,
    model: str,
    llm_params: dict[str, Any],
) -> Trace:
    task = text_of(next(m for m in messages if m["role"] == "user").get("content"))
    trace = Trace.objects.create(
        trace_id=new_trace_id(),
        name=(name or prompt_name or task[:60])[:200],
        mode="call",
        prompt_name=prompt_name,
        task=task,
        agent_type=None,
        status=TraceStatus.RUNNING,
        owner=user,
        model=model,
        llm_params=llm_params,
        tools=[],
    )
    for sequence, data in enumerate(messages, start=1):
        _store(trace, sequence, data)
    Trace.objects.filter(pk=trace.pk).update(last_sequence=len(messages), head_sequence=len(messages))
    event_append(trace.trace_id, "run_started", {"mode": "call", "model": model, "prompt_name": prompt_name})
    trace.refresh_from_db()
    return trace


def _store(trace: Trace, sequence: int, data: dict[str, Any], **fields: Any) -> Message:
    return Message.objects.create(
        message_id=Message.make_id(trace.trace_id, sequence),
        trace=trace,
        role=data["role"],
        sequence=sequence,
        parent_sequence=sequence - 1 or None,
        segment_start=1,
        content=data.get("content"),
        name=data.get("name"),
        **fields,
    )


@transaction.atomic
def _completed(trace: Trace, response: LLMResponse) -> Trace:
    sequence = trace.last_sequence + 1
    _store(
        trace,
        sequence,
        {"role": "assistant", "content": response.content},
        prompt_tokens=response.prompt_tokens,
        completion_tokens=response.completion_tokens,
        cost=response.cost,
        duration_ms=response.duration_ms,
        finish_reason=response.finish_reason,
        description=f"reply to {trace.prompt_name or 'a call'}",
    )
    tokens = response.prompt_tokens + response.completion_tokens
    trace.last_sequence = trace.head_sequence = sequence
    trace.total_messages = sequence
    trace.total_prompt_tokens, trace.total_completion_tokens = (
        response.prompt_tokens,
        response.completion_tokens,
    )
    trace.total_tokens = tokens
    trace.total_cost = response.cost or 0.0
    trace.unpriced_calls = 0 if response.cost is not None else 1
    trace.total_duration_ms = response.duration_ms
    return _ended(trace, TraceStatus.COMPLETED, result=response.content or "")


@transaction.atomic
def _failed(trace: Trace, error: str) -> Trace:
    trace.total_messages = trace.last_sequence
    return _ended(trace, TraceStatus.FAILED, error=error)


def _ended(trace: Trace, status: str, *, result: str | None = None, error: str | None = None) -> Trace:
    now = timezone.now()
    trace.status, trace.result_summary, trace.error_message = status, result, error
    trace.completed_at = trace.updated_at = now
    trace.save()
    kind = "final" if status == TraceStatus.COMPLETED else "error"
    payload = {  # as a run's end event (traces/runner/loop.py:_finish)
        "status": status,
        "result": result,
        "error": error,
        "head_sequence": trace.head_sequence,
        "total_tokens": trace.total_tokens,
        "total_cost": trace.total_cost,
        "cost_state": trace.cost_state.value,
    }
    event_append(trace.trace_id, kind, payload)
    return trace

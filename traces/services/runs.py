"""Writes on traces that callers outside the runner make: start, continue, reflect
(and stop, re-exported from traces/services/stop.py).

The API and the admin call these; they never run the agent loop (W1). Each one
checks synchronously everything that can be refused, so a bad request gets its
400/404/409 at once, then reserves the trace and enqueues `traces.tasks.run_trace`
for a django-q2 worker after the transaction commits.

Reservation (W5). A queued run is a trace in status `queued` with a fresh
`run_token` and its request stored (`Trace.run_request`, traces/services/queue.py):

- a second request finds status `queued` and gets 409 immediately, before any
  worker has picked the first one up;
- the reservation is a compare-and-swap on `run_token` (every claim and every
  reservation moves it on), so two racing requests cannot both reserve, and a
  run that started and ended between our checks and the reservation makes the
  checks stale and the reservation fail (409) instead of running on them;
- the worker claims exactly that token (`trace_claim(reserved_token=...)`), so a
  duplicate delivery of the task, or a delivery after the reservation was
  stopped, claims nothing and does nothing;
- a new trace's row is created here, already reserved (token 1), so
  `GET /api/traces/{id}` works as soon as `POST /api/traces` returns; the runner
  adopts the row instead of inserting it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone

from memory.presets import Preset, UnknownPreset, get_preset
from traces.llm import ModelNotConfigured, agent_model
from traces.media.intake import media_intake
from traces.models import ACTIVE_STATUSES, Trace, TraceStatus
from traces.runner import InvalidRun, RunConfig, RunConflict, run_settings
from traces.runner.extensions import extensions
from traces.runner.prepare import new_trace_id, plan_existing, text_of, validate_messages
from traces.selectors import trace_main_path_for_run, trace_visible_or_404
from traces.services.queue import run_request, send_on_commit
from traces.services.stop import trace_stop as trace_stop
from traces.services.stop import trace_stop_waiting as trace_stop_waiting

RUN_TASK = "traces.tasks.run_trace"
REFLECT_TASK = "memory.tasks.reflect_trace"


def trace_start(
    *,
    user: Any,
    messages: list[dict[str, Any]] | None,
    model: str | None = None,
    preset: str | None = None,
    name: str | None = None,
    uid: str | None = None,
    context: dict[str, Any] | None = None,
    tools: list[str] | None = None,
    settings: dict[str, Any] | None = None,
) -> Trace:
    """Create a new trace, reserved for a worker, and enqueue its run.

    `settings` are run settings (traces/runner/run_settings.py: temperature,
    max_iterations, skills, system_prompt, llm_params, confirm_policy,
    enable_memory, ...); they are stored on the trace and kept by its later runs.
    Raises InvalidRun (400) for malformed messages, an unknown preset or tool, a
    bad setting (naming it), or no model configured. Returns the created trace
    (status queued, no messages yet).
    """
    clean = validate_messages(messages)
    first_user = next((m for m in clean if m["role"] == "user"), None)
    if first_user is None:
        raise InvalidRun("a new run needs at least one user message")
    agent_type = preset or "default"
    found = _check_preset(agent_type)
    requested = _check_settings(
        user,
        {**(settings or {}), **({"tools": tools} if tools is not None else {})},
        _baseline_policy(found),
        run_settings.default_network(found),
    )
    model_name = _check_model(model)
    if context is not None and not isinstance(context, dict):
        raise InvalidRun("context must be a JSON object")
    trace_id, token = new_trace_id(), 1
    config = RunConfig(
        **requested,
        model=model,
        agent_type=agent_type,
        uid=uid,
        name=name,
        owner_id=user.pk,
        context=dict(context or {}),
        new_trace_id=trace_id,
        reserved_token=token,
    )
    clean = media_intake(clean)  # L5: images and PDFs checked and stored, references kept
    request = _run_request(trace_id, clean, config)
    now = timezone.now()
    with transaction.atomic():
        # The reservation and the worker's request in one row, one statement.
        trace = Trace.objects.create(
            trace_id=trace_id,
            name=(name or "")[:200],
            task=text_of(first_user.get("content")),
            agent_type=agent_type,
            status=TraceStatus.QUEUED,
            owner_id=user.pk,
            uid=uid,
            model=model_name,
            context=config.context,
            created_at=now,
            updated_at=now,
            run_token=token,
            heartbeat_at=None,
            run_request=request,
            queued_at=now,
        )
        send_on_commit(trace.trace_id, request)
    return trace


def trace_continue(
    *,
    user: Any,
    trace_id: str,
    messages: list[dict[str, Any]] | None,
    after_sequence: int | None = None,
    settings: dict[str, Any] | None = None,
) -> Trace:
    """Continue, rewind or regenerate a trace (R2) in a worker.

    The trace's stored run settings hold; `settings` changes some of them for
    this and later runs (a `settings_changed` event says which).

    Raises TraceNotFound (404) for an unknown trace or one `user` may not see,
    RunConflict (409) while the trace runs or is queued, InvalidRun (400) for an
    after_sequence off the main path, malformed messages or nothing to run.
    """
    trace = trace_visible_or_404(user=user, trace_id=trace_id)
    if trace.status in ACTIVE_STATUSES:
        raise RunConflict(_running_reason(trace))
    clean = validate_messages(messages)
    if after_sequence is not None and (
        isinstance(after_sequence, bool) or not isinstance(after_sequence, int)
    ):
        raise InvalidRun("after_sequence must be an integer message sequence or null")
    found = _check_preset(trace.agent_type or "default")
    baseline = (trace.run_settings or {}).get("confirm_policy") or _baseline_policy(found)
    network = (trace.run_settings or {}).get("sandbox_network")
    requested = _check_settings(
        user, settings or {}, baseline, run_settings.default_network(found) if network is None else network
    )
    if "system_prompt" in requested:
        raise InvalidRun("system_prompt: only a new run takes one (the prompt is the trace's first message)")
    _check_model(trace.model)
    token = trace.run_token + 1
    config = RunConfig(
        **requested,
        trace_id=trace.trace_id,
        after_sequence=after_sequence,
        agent_type=trace.agent_type or "default",
        reserved_token=token,
        reserved_from=trace.status,
    )
    path = trace_main_path_for_run(trace_id=trace.trace_id, head_sequence=trace.head_sequence)
    plan_existing(trace, path, clean, config, trace.status)
    clean = media_intake(clean)
    with transaction.atomic():
        _reserve(trace, token, _run_request(trace.trace_id, clean, config))
    trace.refresh_from_db()
    return trace


def trace_reflect(*, user: Any, trace_id: str, focus: str = "") -> Trace:
    """Reflect on a trace in a worker (M3): a side branch off the head extracts draft experiences.

    Holds the run lease like a run (409 while the trace runs or is queued) and
    gives the trace back in the status it had; the head does not move
    (`memory/reflect.py`). Raises TraceNotFound (404), InvalidRun (400) for a
    trace with no messages, a non-string focus or no model configured.
    """
    trace = trace_visible_or_404(user=user, trace_id=trace_id)
    if trace.status in ACTIVE_STATUSES:
        raise RunConflict(_running_reason(trace))
    if not isinstance(focus, str):
        raise InvalidRun("focus must be a string")
    if not trace.head_sequence:
        raise InvalidRun(f"trace {trace.trace_id!r} has no messages to reflect on")
    _check_model(trace.model)
    token, previous = trace.run_token + 1, trace.status
    request = run_request(
        REFLECT_TASK, [trace.trace_id, focus, token, previous], task_name=f"reflect {trace.trace_id}"
    )
    with transaction.atomic():
        _reserve(trace, token, request, clear_outcome=False)
    trace.refresh_from_db()
    return trace


def _reserve(trace: Trace, token: int, request: dict[str, Any], *, clear_outcome: bool = True) -> None:
    """Reserve `trace` for a worker with lease `token` (compare-and-swap, see the module doc),
    storing the worker's `request` in the same statement; it is sent once the caller's
    transaction commits (traces/services/queue.py).

    `clear_outcome=False` keeps the error and completion time (a reflection gives them back).
    """
    outcome = {"error_message": None, "completed_at": None} if clear_outcome else {}
    now = timezone.now()
    reserved = (
        Trace.objects.filter(pk=trace.pk, run_token=trace.run_token)
        .exclude(status__in=ACTIVE_STATUSES)
        .update(
            status=TraceStatus.QUEUED,
            run_token=token,
            run_owner="",
            heartbeat_at=None,
            stop_requested=False,
            updated_at=now,
            run_request=request,
            queued_at=now,
            **outcome,
        )
    )
    if not reserved:
        raise RunConflict(
            f"trace {trace.trace_id!r} was started by another request a moment ago; "
            "wait for that run to finish or stop it"
        )
    send_on_commit(trace.trace_id, request)


# --- helpers -------------------------------------------------------------------


def _running_reason(trace: Trace) -> str:
    if trace.status == TraceStatus.QUEUED or trace.heartbeat_at is None:
        return (
            f"trace {trace.trace_id!r} already has a run queued for a worker; "
            "wait for it to finish or stop it first"
        )
    age = (timezone.now() - trace.heartbeat_at).total_seconds()
    return (
        f"trace {trace.trace_id!r} is already running (worker {trace.run_owner or '?'}, "
        f"last heartbeat {age:.0f} s ago); wait for it to finish or stop it first"
    )


def _check_preset(name: str) -> Preset:
    try:
        return get_preset(name)
    except UnknownPreset as exc:
        raise InvalidRun(str(exc)) from None


def _baseline_policy(preset: Preset) -> str:
    """The confirm policy a run gets when it names none: the preset's, else the deployment's."""
    return run_settings.preset_policy(preset) or django_settings.AGENT_CONFIRM_POLICY


def _check_settings(
    user: Any, values: dict[str, Any], baseline_policy: str, baseline_network: bool
) -> dict[str, Any]:
    requested = run_settings.check_request(
        values,
        baseline_policy=baseline_policy,
        may_loosen=bool(getattr(user, "is_staff", False)),
        baseline_network=baseline_network,
    )
    _check_tools(requested.get("tools"))
    return requested


def _check_tools(names: list[str] | None) -> None:
    if names is None:
        return
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InvalidRun("tools must be a list of tool names")
    try:
        extensions.require_tools().check_requested(names)
    except ValueError as exc:
        raise InvalidRun(str(exc)) from None


def _check_model(model: str | None) -> str:
    try:
        return agent_model(model).model
    except ModelNotConfigured as exc:
        raise InvalidRun(str(exc)) from None


def task_config(config: RunConfig) -> dict[str, Any]:
    """`config` as a run task's argument (traces/tasks.py:run_trace): plain values, no callback."""
    return {k: v for k, v in asdict(config).items() if k != "on_token"}


def _run_request(trace_id: str, messages: list[dict[str, Any]], config: RunConfig) -> dict[str, Any]:
    """The run's request for a worker, stored with its reservation (traces/services/queue.py)."""
    return run_request(RUN_TASK, [trace_id, messages, task_config(config)], task_name=f"run {trace_id}")

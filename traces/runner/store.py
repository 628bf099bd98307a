"""RunStore: every write a run makes, fenced by its lease token (D6, W5).

The run keeps the trace row in memory and writes it back with
`UPDATE ... WHERE run_token = <ours>`: a run that lost its lease (another worker
claimed the trace) writes nothing, and its transaction rolls back whole.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Model
from django.utils import timezone

from traces import events as event_bus
from traces.goal_tree import GoalTree
from traces.models import ACTIVE_STATUSES, Goal, Message, Trace, TraceEvent, TraceStatus
from traces.runner.config import LeaseLost, RunConflict, TraceNotFound
from traces.runner.connections import connection_release
from traces.runner.fenced import fenced_write, quoted_column
from traces.runner.heartbeats import lease_heartbeats
from traces.storable import without_nul

# Written at every commit: cheap columns that change step by step.
TRACE_FIELDS = [
    "name",
    "needs_attention",
    "attention_reason",
    "status",
    "current_goal_id",
    "total_messages",
    "total_tokens",
    "total_prompt_tokens",
    "total_completion_tokens",
    "total_cost",
    "unpriced_calls",
    "total_duration_ms",
    "last_sequence",
    "head_sequence",
    "last_event_id",
    "result_summary",
    "error_message",
    "completed_at",
    "updated_at",
    "heartbeat_at",
]
# Written only when they changed since the last commit: JSON and text that rarely
# change during a run (serialising the tool schemas at every step is not free).
COLD_FIELDS = ["task", "model", "tools", "llm_params", "run_settings", "context"]


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def trace_request_stop(*, trace_id: str) -> bool:
    """Flag a running trace to stop; its run exits at the next checkpoint (R5).

    Returns False when the trace is not running (nothing to stop).
    """
    return bool(Trace.objects.filter(pk=trace_id, status=TraceStatus.RUNNING).update(stop_requested=True))


def trace_claim(*, trace_id: str, owner: str, reserved_token: int | None = None) -> Trace:
    """Take the run lease of a trace, or raise RunConflict if a live run holds it.

    A lease is free when the trace is neither running nor queued, or when its
    heartbeat is older than AGENT_LEASE_SECONDS (the worker that held it is
    presumed dead). With `reserved_token`, only the reservation the API made
    (status queued, that token) can be claimed: a duplicate delivery of the same
    task, or one whose reservation was stopped before it started, claims nothing.
    The stored request (traces/services/queue.py) stays until the run's first commit
    (`RunStore.commit`), which holds its inputs: a worker that dies in between leaves
    the sweep what it needs to queue the run again (traces/services/sweep.py).
    """
    now = timezone.now()
    set_params = [TraceStatus.RUNNING.value, owner, now, False, now]
    if reserved_token is not None:
        free_params: list[Any] = [TraceStatus.QUEUED.value, reserved_token]
    else:
        stale = now - timedelta(seconds=settings.AGENT_LEASE_SECONDS)
        free_params = [*(status.value for status in ACTIVE_STATUSES), TraceStatus.RUNNING.value, stale]
    sql = _claim_sql(connection.vendor, reserved=reserved_token is not None)
    claimed = next(iter(Trace.objects.raw(sql, [*set_params, trace_id, *free_params])), None)
    if claimed is not None:
        return claimed
    holder = Trace.objects.filter(pk=trace_id).values("run_owner", "heartbeat_at").first()
    if holder is None:
        raise TraceNotFound(f"trace {trace_id!r} does not exist")
    if reserved_token is not None:
        raise RunConflict(
            f"the reservation {reserved_token} of trace {trace_id!r} was already claimed or cancelled"
        )
    age = (now - holder["heartbeat_at"]).total_seconds() if holder["heartbeat_at"] else 0
    raise RunConflict(
        f"trace {trace_id!r} is already running (worker {holder['run_owner'] or '?'}, "
        f"last heartbeat {age:.0f} s ago); stop it first or wait for it to finish"
    )


@functools.cache
def _claim_sql(vendor: str, *, reserved: bool) -> str:
    """The claim as one statement, `UPDATE ... RETURNING` the whole row (the run needs
    it): an ORM update and then a get cost the worker ~1 ms more CPU a claim, compiling
    the two queries (bench/run_cost.py's profile and a timing of claims, 5 Dec 2026). SQLite 3.35 or newer
    has RETURNING (traces/checks.py)."""
    q = connection.ops.quote_name

    def c(name: str) -> str:
        return quoted_column(Trace, name)

    status, token, heartbeat = c("status"), c("run_token"), c("heartbeat_at")
    active = ", ".join(["%s"] * len(ACTIVE_STATUSES))
    free = (
        f"{status} = %s AND {token} = %s"
        if reserved
        else f"(NOT ({status} IN ({active})) OR ({status} = %s AND {heartbeat} < %s))"
    )
    columns = ", ".join(q(field.column) for field in Trace._meta.concrete_fields)
    return (
        f"UPDATE {q(Trace._meta.db_table)} SET {status} = %s, {token} = {token} + 1, "
        f"{c('run_owner')} = %s, {heartbeat} = %s, {c('stop_requested')} = %s, "
        f"{c('error_message')} = NULL, {c('completed_at')} = NULL, {c('updated_at')} = %s, "
        f"{c('queued_at')} = NULL "
        f"WHERE {c('trace_id')} = %s AND ({free}) RETURNING {columns}"
    )


class RunStore:
    """Buffers one step's messages and events and commits them with the trace row."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.token = trace.run_token
        self.goal_tree: GoalTree | None = None
        self._messages: list[Message] = []
        self._events: list[TraceEvent] = []
        self._deferred: list[Callable[[], None]] = []
        self._rows: dict[type[Model], list[Model]] = {}  # other tables' rows for the next commit
        self._keep_existing: set[type[Model]] = set()
        self._newest: tuple[int, int] | None = None  # (sequence, segment_start) of the newest message
        # Cold fields as this store last wrote them; empty, so the first commit writes
        # them all (the row may have been made by someone else, e.g. the API).
        self._written: dict[str, Any] = {}
        self._hot: dict[str, Any] = {}  # TRACE_FIELDS as last written (only changes are sent)
        # The claim left the trace's stored request (`run_request`) in place; the first
        # commit, which holds the run's inputs, clears it (the sweep queues a run that
        # died before it again from that request: traces/services/sweep.py).
        self._request_cleared = False
        # The stop flag as the last commit read it, and when.
        self.stop_seen = False
        self.polled_at = 0.0

    # --- buffering -------------------------------------------------------------

    def emit(self, event_type: str, payload: dict[str, Any] | None = None) -> None:
        self.trace.last_event_id += 1
        self._events.append(
            TraceEvent(
                trace_id=self.trace.trace_id,
                event_id=self.trace.last_event_id,
                type=event_type,
                payload=without_nul(payload or {}),
                created_at=timezone.now(),
            )
        )

    def defer(self, write: Callable[[], None]) -> None:
        """Run `write` inside the next commit's transaction, after its fence.

        For a run's writes to other tables (experience counters): they land
        with the step or not at all, and not for a run that lost its lease.
        """
        self._deferred.append(write)

    def insert(self, model: type[Model], rows: Sequence[Model], *, keep_existing: bool = False) -> None:
        """Insert `rows` with the next commit, in its one fenced statement (what the model
        was sent, traces/runner/request_log.py). `keep_existing`: a row colliding with
        a stored one on a unique constraint is skipped, not an error."""
        self._rows.setdefault(model, []).extend(rows)
        if keep_existing:
            self._keep_existing.add(model)

    @property
    def has_pending_events(self) -> bool:
        return bool(self._events)

    def next_sequence(self) -> int:
        self.trace.last_sequence += 1
        return self.trace.last_sequence

    def add_message(self, message: Message, *, move_head: bool = True) -> Message:
        """Buffer `message` as the new head; counts it in the trace totals.

        `move_head=False` stores a side-branch message (a reflection, M3): it hangs
        from its `parent_sequence`, but the head and so the main path stay put.
        """
        trace = self.trace
        for field in ("content", "tool_calls", "description", "name", "tool_call_id"):
            setattr(message, field, without_nul(getattr(message, field)))
        message.segment_start = self._segment_start(message)
        self._newest = (message.sequence, message.segment_start)
        if move_head:
            trace.head_sequence = message.sequence
        trace.total_messages += 1
        prompt = message.prompt_tokens or 0
        completion = message.completion_tokens or 0
        trace.total_prompt_tokens += prompt
        trace.total_completion_tokens += completion
        trace.total_tokens += prompt + completion
        trace.total_cost = round(trace.total_cost + (message.cost or 0.0), 10)
        # A model call without a price is unknown, not free: counted, so the
        # total says it is a lower bound (Trace.cost_state).
        unpriced = message.cost is None and message.is_model_reply
        trace.unpriced_calls += unpriced
        trace.total_duration_ms += message.duration_ms or 0
        if self.goal_tree is not None:
            self.goal_tree.record_stats(
                message.goal_id,
                prompt_tokens=prompt,
                completion_tokens=completion,
                cost=message.cost,
                unpriced=unpriced,
                duration_ms=message.duration_ms or 0,
            )
        self._messages.append(message)
        self.emit("message", message_payload(message))
        return message

    def _segment_start(self, message: Message) -> int:
        """Continue the parent's linear segment when the parent is the message just before."""
        parent = message.parent_sequence
        if parent is None or parent != message.sequence - 1:
            return message.sequence
        if self._newest is not None and self._newest[0] == parent:
            return self._newest[1]
        stored = (
            Message.objects.filter(trace_id=self.trace.trace_id, sequence=parent)
            .values_list("segment_start", flat=True)
            .first()
        )
        return stored if stored is not None else parent

    # --- writing ---------------------------------------------------------------

    def commit(self, *, final: bool = False, release: bool = False) -> None:
        """Write buffered rows, changed goals and the trace atomically, fenced by our token.

        On PostgreSQL that is one statement, on SQLite one transaction
        (traces/runner/fenced.py); either also reads the stop flag. `final` (a
        run's end) also writes goal figures that are otherwise batched; `release`
        gives the lease up with it (`run_owner` emptied; the trace keeps its status,
        which frees the lease unless it is running or queued).
        """
        trace = self.trace
        now = timezone.now()
        trace.updated_at = now
        trace.heartbeat_at = now
        hot = {f: getattr(trace, f) for f in TRACE_FIELDS}
        fields = {f: v for f, v in hot.items() if f not in self._hot or self._hot[f] != v}
        cold = {
            f: getattr(trace, f)
            for f in COLD_FIELDS
            if f not in self._written or getattr(trace, f) != self._written[f]
        }
        goals, writes, stats_due = (
            self.goal_tree.pending_writes(all_stats=final) if self.goal_tree else ([], [], False)
        )
        # Deferred writes share the fenced commit's transaction; a step without
        # them stays one statement on PostgreSQL.
        with transaction.atomic() if self._deferred else contextlib.nullcontext():
            stop = fenced_write(
                trace_id=trace.pk,
                token=self.token,
                trace_values={
                    **fields,
                    **cold,
                    **({} if self._request_cleared else {"run_request": None}),
                    **({"run_owner": ""} if release else {}),
                },
                inserts=[
                    (Message, self._messages),
                    (TraceEvent, self._events),
                    (Goal, goals),
                    *self._rows.items(),
                ],
                updates=[
                    (Goal, {"trace": trace.pk, "goal_id": goal.goal_id}, values) for goal, values in writes
                ],
                keep_existing=self._keep_existing,
            )
            if stop is None:
                raise LeaseLost(f"trace {trace.pk!r} was claimed by another run; stopping this one")
            for write in self._deferred:
                write()
        self._deferred = []
        self._rows = {}
        self._request_cleared = True
        trace.run_request = None
        if release:
            trace.run_owner = ""
        self.stop_seen = stop
        self.polled_at = time.monotonic()
        if self.goal_tree is not None:
            self.goal_tree.mark_flushed(stats=stats_due)
        if self._events:
            published = [event_bus.event_dict(e) for e in self._events]
            transaction.on_commit(lambda: event_bus.publish(trace.pk, published))
        self._messages = []
        self._events = []
        self._hot = hot
        if cold:
            self._written.update({f: copy.deepcopy(v) for f, v in cold.items()})

    def heartbeat(self) -> bool:
        """Refresh the lease; returns whether a stop was requested meanwhile."""
        now = timezone.now()
        row = Trace.objects.filter(pk=self.trace.pk, run_token=self.token)
        if not row.update(heartbeat_at=now):
            raise LeaseLost(f"trace {self.trace.pk!r} was claimed by another run; stopping this one")
        self.trace.heartbeat_at = now
        return bool(row.values_list("stop_requested", flat=True).first())

    @contextlib.contextmanager
    def keep_alive(self) -> Iterator[None]:
        """Keep the lease fresh from a helper thread while the caller blocks (a long tool).

        Without it a tool running longer than AGENT_LEASE_SECONDS would look like a
        dead worker to the sweep (W5). One heartbeat thread per process serves
        every run (registering is a dict insert, not a thread start per call); it
        stops beating for a run once its lease is lost, and the run finds out at
        its next commit.
        """
        beats = lease_heartbeats()
        beats.add(self)
        connection_release()  # the heartbeat thread beats for us meanwhile
        try:
            yield
        finally:
            beats.discard(self)


EVENT_CONTENT_LIMIT = 4_000


def _cut(text: str) -> tuple[str, bool]:
    if len(text) > EVENT_CONTENT_LIMIT:
        return text[:EVENT_CONTENT_LIMIT], True
    return text, False


def message_payload(message: Message) -> dict[str, Any]:
    """A message as its `message` event carries it.

    Text content longer than EVENT_CONTENT_LIMIT is cut (`content_truncated`): a
    50 KB tool output is not stored twice; the full text is one
    `GET /api/traces/{id}/messages` away.
    """
    content, truncated = message.content, False
    if isinstance(content, str):
        content, truncated = _cut(content)
    return {
        "message_id": message.message_id,
        "sequence": message.sequence,
        "parent_sequence": message.parent_sequence,
        "role": message.role,
        "goal_id": message.goal_id,
        "kind": message.kind,
        "description": message.description,
        "content": content,
        "content_truncated": truncated,
        "tool_calls": message.tool_calls,
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "prompt_tokens": message.prompt_tokens,
        "completion_tokens": message.completion_tokens,
        "cost": message.cost,
        "duration_ms": message.duration_ms,
        "finish_reason": message.finish_reason,
        "reasoning": _cut(message.reasoning)[0],
        "reasoning_tokens": message.reasoning_tokens,
        "created_at": message.created_at.isoformat() if message.created_at else None,
    }

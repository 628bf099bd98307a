"""Trace, Message, Goal and TraceEvent: the persisted shape of every agent run.

Field names follow the seed's dataclasses (seed 004 "数据模型"), so the API and the
runner speak the same words.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from traces.remote_agents import RemoteAgentConfig  # noqa: F401  (a model of this app, in its own module)


class TraceStatus(models.TextChoices):
    QUEUED = "queued"  # accepted, its request stored (Trace.run_request), no worker has claimed it yet
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"


# A trace in one of these has a run in hand: a second run request is a 409.
ACTIVE_STATUSES = (TraceStatus.QUEUED, TraceStatus.RUNNING)


class CostState(models.TextChoices):
    """How much of a trace's cost is known (Trace.unpriced_calls)."""

    KNOWN = "known"  # every model call was priced: total_cost is the cost
    PARTIAL = "partial"  # some were not: total_cost is a lower bound
    UNKNOWN = "unknown"  # none with a price: total_cost says nothing


def cost_state(cost: float, unpriced_calls: int) -> CostState:
    """The state of a cost summed over priced calls, `unpriced_calls` calls left out."""
    if not unpriced_calls:
        return CostState.KNOWN
    return CostState.PARTIAL if cost > 0 else CostState.UNKNOWN


class Trace(models.Model):
    """One agent execution. Main agents, sub-agents and human requests alike."""

    trace_id = models.CharField(max_length=255, primary_key=True)
    name = models.CharField(max_length=200, blank=True, default="")
    mode = models.CharField(max_length=10, choices=[("call", "call"), ("agent", "agent")], default="agent")
    prompt_name = models.CharField(max_length=200, blank=True, null=True)
    task = models.TextField(blank=True, null=True)
    agent_type = models.CharField(max_length=100, blank=True, null=True, default="default")
    parent_trace = models.ForeignKey(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="sub_traces",
        db_column="parent_trace_id",
    )
    parent_goal_id = models.CharField(max_length=64, blank=True, null=True)
    status = models.CharField(
        max_length=16, choices=TraceStatus.choices, default=TraceStatus.RUNNING, db_index=True
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="traces",
    )

    total_messages = models.IntegerField(default=0)
    total_tokens = models.IntegerField(default=0)
    total_prompt_tokens = models.IntegerField(default=0)
    total_completion_tokens = models.IntegerField(default=0)
    total_cost = models.FloatField(default=0.0)
    total_duration_ms = models.BigIntegerField(default=0)
    # Model calls with no known price (Message.cost null): total_cost sums the
    # others only, so it is exact when this is 0 and a lower bound otherwise.
    unpriced_calls = models.IntegerField(default=0)

    last_sequence = models.IntegerField(default=0)
    head_sequence = models.IntegerField(default=0)
    last_event_id = models.BigIntegerField(default=0)

    uid = models.CharField(max_length=200, blank=True, null=True, db_index=True)
    model = models.CharField(max_length=200, blank=True, null=True)
    tools = models.JSONField(blank=True, null=True)
    llm_params = models.JSONField(default=dict, blank=True)
    # The run's effective settings (traces/runner/run_settings.py), kept by every later run.
    run_settings = models.JSONField(default=dict, blank=True)
    context = models.JSONField(default=dict, blank=True)
    current_goal_id = models.CharField(max_length=64, blank=True, null=True)

    result_summary = models.TextField(blank=True, null=True)
    error_message = models.TextField(blank=True, null=True)

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(blank=True, null=True)

    # Run lease (D6): which worker runs the trace, a fencing token that grows with
    # every claim, and a heartbeat so a crashed worker's run can be detected.
    run_owner = models.CharField(max_length=200, blank=True, default="")
    run_token = models.BigIntegerField(default=0)
    heartbeat_at = models.DateTimeField(blank=True, null=True)
    stop_requested = models.BooleanField(default=False)
    # A queued run's task and arguments (traces/services/queue.py), kept until a worker
    # claims it, so the sweep can queue it again from the database alone (W5).
    run_request = models.JSONField(blank=True, null=True)
    queued_at = models.DateTimeField(blank=True, null=True)

    # Set when a guard wants an expert to look (loop detected, ...), with why.
    needs_attention = models.BooleanField(default=False, db_index=True)
    attention_reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "-created_at"], name="trace_status_created"),
            models.Index(fields=["owner", "-created_at"], name="trace_owner_created"),
        ]

    def __str__(self) -> str:
        return self.name or self.trace_id

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def cost_state(self) -> CostState:
        return cost_state(self.total_cost, self.unpriced_calls)


class MessageKind(models.TextChoices):
    """What a message is beyond its role (the runtime's own messages are marked)."""

    PLAIN = "", "plain"
    INPUT = "input", "input"
    CONTEXT = "context", "context injection"
    HEALED = "healed", "healed tool call"
    TOOL_ERROR = "tool_error", "tool error"
    LOOP_WARNING = "loop_warning", "loop warning"
    GUARD = "guard", "guard"
    SUMMARY = "summary", "compaction summary"
    CARRIED = "carried", "carried over a summary"
    ONCE = "once", "shown once"
    REFLECT = "reflect", "reflection"


class Message(models.Model):
    """One LLM-API message. `parent_sequence` links messages into a tree."""

    message_id = models.CharField(max_length=270, primary_key=True)
    # No index of its own: the (trace, sequence) unique constraint serves lookups
    # by trace, and every step inserts here (one index fewer to maintain).
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="messages", db_index=False)
    role = models.CharField(
        max_length=10,
        choices=[(r, r) for r in ("system", "user", "assistant", "tool")],
    )
    sequence = models.IntegerField()
    parent_sequence = models.IntegerField(blank=True, null=True)
    # First sequence of the linear segment this message ends: a message whose
    # parent is the message just before it (sequence - 1) continues its parent's
    # segment; any other message starts one. A main path is then a few ranges of
    # sequences, one per branch point, which the main-path query reads directly.
    segment_start = models.IntegerField(blank=True, null=True)
    goal_id = models.CharField(max_length=64, blank=True, null=True)
    description = models.TextField(blank=True, default="")
    tool_call_id = models.CharField(max_length=200, blank=True, null=True)
    name = models.CharField(max_length=200, blank=True, null=True)
    content = models.JSONField(blank=True, null=True)
    tool_calls = models.JSONField(blank=True, null=True)
    prompt_tokens = models.IntegerField(blank=True, null=True)
    completion_tokens = models.IntegerField(blank=True, null=True)
    cost = models.FloatField(blank=True, null=True)
    duration_ms = models.IntegerField(blank=True, null=True)
    finish_reason = models.CharField(max_length=40, blank=True, null=True)
    # A reasoning model's thinking (seed 003 Step `reasoning`): shown folded in the
    # portal, never part of `to_llm_dict` (providers reject it sent back).
    reasoning = models.TextField(blank=True, default="")
    reasoning_tokens = models.IntegerField(blank=True, null=True)  # part of completion_tokens
    # What kind of message this is beyond its role: "context" injections,
    # "healed" synthetic tool results, "summary" of a compaction, ...
    kind = models.CharField(max_length=20, blank=True, default=MessageKind.PLAIN, choices=MessageKind.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["trace", "sequence"]
        constraints = [
            models.UniqueConstraint(fields=["trace", "sequence"], name="message_trace_sequence"),
        ]

    def __str__(self) -> str:
        return self.message_id

    @property
    def is_model_reply(self) -> bool:
        """Whether a model call wrote this message (its figures are the call's)."""
        return self.role == "assistant" and self.kind in (MessageKind.PLAIN, MessageKind.REFLECT)

    @staticmethod
    def make_id(trace_id: str, sequence: int) -> str:
        return f"{trace_id}-{sequence:04d}"

    def to_llm_dict(self) -> dict[str, Any]:
        """The OpenAI-format dict sent to a model."""
        return llm_dict(self.role, self.content, self.tool_calls, self.tool_call_id, self.name)

    @classmethod
    def from_llm_dict(
        cls,
        d: dict[str, Any],
        *,
        trace_id: str,
        sequence: int,
        goal_id: str | None = None,
        parent_sequence: int | None = None,
    ) -> Message:
        return cls(
            message_id=cls.make_id(trace_id, sequence),
            trace_id=trace_id,
            role=d["role"],
            sequence=sequence,
            parent_sequence=parent_sequence,
            goal_id=goal_id,
            content=d.get("content"),
            tool_calls=d.get("tool_calls") or None,
            tool_call_id=d.get("tool_call_id"),
            name=d.get("name") if d["role"] == "tool" else None,
        )


def llm_dict(
    role: str,
    content: Any,
    tool_calls: list[dict[str, Any]] | None,
    tool_call_id: str | None,
    name: str | None,
) -> dict[str, Any]:
    """A stored message's fields as the OpenAI-format dict sent to a model."""
    data: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant" and tool_calls:
        data["tool_calls"] = tool_calls
        if content in ("", None):
            data["content"] = None
    if role == "tool":
        data["tool_call_id"] = tool_call_id
        if name:
            data["name"] = name
    return data


class GoalStatus(models.TextChoices):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    ABANDONED = "abandoned"


CLOSED_GOAL_STATUSES = (GoalStatus.COMPLETED, GoalStatus.ABANDONED)


class Goal(models.Model):
    """A node of a trace's plan. `goal_id` is per trace ("1", "2", ...)."""

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="goals")
    goal_id = models.CharField(max_length=64)
    description = models.TextField()
    reason = models.TextField(blank=True, default="")
    parent_id = models.CharField(max_length=64, blank=True, null=True)
    position = models.FloatField(default=0.0)
    type = models.CharField(
        max_length=16,
        choices=[("normal", "normal"), ("agent_call", "agent_call")],
        default="normal",
    )
    status = models.CharField(max_length=16, choices=GoalStatus.choices, default=GoalStatus.PENDING)
    summary = models.TextField(blank=True, null=True)
    sub_trace_ids = models.JSONField(blank=True, null=True)
    agent_call_mode = models.CharField(max_length=16, blank=True, null=True)
    sub_trace_metadata = models.JSONField(blank=True, null=True)
    self_stats = models.JSONField(default=dict, blank=True)
    cumulative_stats = models.JSONField(default=dict, blank=True)
    # How the trace's last run ended ("completed", "failed", "stopped") while this
    # goal was still open; "" while a run goes on or once the goal is closed.
    left_open = models.CharField(max_length=16, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["trace", "position"]
        constraints = [
            models.UniqueConstraint(fields=["trace", "goal_id"], name="goal_trace_goal_id"),
        ]

    def __str__(self) -> str:
        return f"{self.trace_id}#{self.goal_id} {self.description[:40]}"


class TraceEvent(models.Model):
    """Append-only event log of a trace; the source of truth for live streams."""

    # Served by the (trace, event_id) unique constraint, as Message.trace.
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="events", db_index=False)
    event_id = models.BigIntegerField()
    type = models.CharField(max_length=40)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["trace", "event_id"]
        constraints = [
            models.UniqueConstraint(fields=["trace", "event_id"], name="event_trace_event_id"),
        ]

    def __str__(self) -> str:
        return f"{self.trace_id}:{self.event_id} {self.type}"


class UserAgents(models.Model):
    """A user's own AGENTS text (M9): the last layer of every run's project context, edited in the portal."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agents_text"
    )
    text = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"AGENTS text of user {self.user_id}"


# Models of a part with its own folder, registered with this app.
from traces.collaboration.models import InboxMessage as InboxMessage  # noqa: E402
from traces.events.models import TraceWatch as TraceWatch  # noqa: E402
from traces.guards.models import Approval as Approval  # noqa: E402
from traces.guards.models import ApprovalStatus as ApprovalStatus  # noqa: E402
from traces.observability.models import ModelRequest as ModelRequest  # noqa: E402
from traces.observability.models import RequestPart as RequestPart  # noqa: E402

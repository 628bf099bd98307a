"""Approvals (G5): a risky tool call waiting for an expert's decision, and the decision.

A model of the `traces` app (re-exported by `traces/models.py`); the gate that
creates them is `traces/guards/confirm.py`, decisions are
`traces/services/approvals.py`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"


class Approval(models.Model):
    """A risky tool call waiting for an expert (G5), bound to that exact call.

    The decision and who made it stay on the row: the audit trail.
    """

    trace = models.ForeignKey("traces.Trace", on_delete=models.CASCADE, related_name="approvals")
    tool_call_id = models.CharField(max_length=200)
    message_sequence = models.IntegerField(help_text="the assistant message that made the call")
    tool_name = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict, blank=True)
    edited_arguments = models.JSONField(blank=True, null=True)
    risk = models.CharField(max_length=16, default="risky")
    # What the tool asks of the expert for this very call (a matched risk rule), if anything.
    question = models.TextField(blank=True, default="")
    status = models.CharField(
        max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING, db_index=True
    )
    # "run": the expert approved every later call of this tool in the trace's current run too.
    scope = models.CharField(
        max_length=8, choices=[("call", "this call"), ("run", "the rest of the run")], default="call"
    )
    requested_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(blank=True, null=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="approval_decisions",
    )
    decision_note = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-requested_at"]
        constraints = [
            models.UniqueConstraint(fields=["trace", "tool_call_id"], name="approval_trace_call"),
        ]

    def __str__(self) -> str:
        return f"{self.trace_id}:{self.tool_name} ({self.status})"

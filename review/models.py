"""What experts say about traces (X6): score definitions, scores, review queues.

A score belongs to a trace and, when it judges one message, to that message too.
One expert holds at most one score per definition per target (trace, or message):
scoring again replaces it. A trace sits in a review queue at most once.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from traces.models import Message, Trace


class ScoreKind(models.TextChoices):
    NUMERIC = "numeric", "numeric (a number in a range)"
    CATEGORICAL = "categorical", "categorical (one of a list)"
    BOOLEAN = "boolean", "boolean (yes / no)"


class ScoreDefinition(models.Model):
    """What may be scored and how; managed in the admin."""

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True, default="")
    kind = models.CharField(max_length=16, choices=ScoreKind.choices)
    minimum = models.FloatField(blank=True, null=True, help_text="numeric: lowest allowed value")
    maximum = models.FloatField(blank=True, null=True, help_text="numeric: highest allowed value")
    categories = models.JSONField(
        default=list, blank=True, help_text='categorical: the allowed labels, e.g. ["good", "bad"]'
    )
    active = models.BooleanField(
        default=True, help_text="inactive definitions keep their scores but take no new ones"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("name",)
        constraints = [
            models.CheckConstraint(
                condition=~Q(kind=ScoreKind.NUMERIC) | Q(minimum__isnull=False, maximum__isnull=False),
                name="review_numeric_score_has_range",
            ),
            models.CheckConstraint(
                condition=Q(minimum__isnull=True)
                | Q(maximum__isnull=True)
                | Q(minimum__lte=models.F("maximum")),
                name="review_score_range_ordered",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Score(models.Model):
    """One expert's judgement of a trace or of one of its messages.

    `value` is the number sorted and filtered on (booleans are 0/1, categories are
    None); `label` is the category (or "true"/"false", or the number as text).
    """

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="scores")
    # DO_NOTHING keeps deleting a trace's messages one DELETE (traces/services/delete.py);
    # a trace's scores go first, by its trace_deleting signal (review/apps.py).
    message = models.ForeignKey(
        Message, on_delete=models.DO_NOTHING, related_name="scores", blank=True, null=True
    )
    definition = models.ForeignKey(ScoreDefinition, on_delete=models.PROTECT, related_name="scores")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scores")
    value = models.FloatField(blank=True, null=True)
    label = models.CharField(max_length=100, blank=True, default="")
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("created_at", "id")
        constraints = [
            models.UniqueConstraint(
                fields=["trace", "definition", "author"],
                condition=Q(message__isnull=True),
                name="review_one_trace_score_per_author",
            ),
            models.UniqueConstraint(
                fields=["message", "definition", "author"],
                condition=Q(message__isnull=False),
                name="review_one_message_score_per_author",
            ),
        ]
        indexes = [models.Index(fields=["definition", "trace"], name="review_score_def_trace")]

    def __str__(self) -> str:
        return f"{self.trace_id} {self.definition_id}={self.label}"


class ReviewQueue(models.Model):
    """A list of traces for experts to work through, scoring and commenting."""

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True, default="")
    # The trace list's filter parameters it was filled from (empty: filled by hand).
    filters = models.JSONField(default=dict, blank=True)
    definitions = models.ManyToManyField(ScoreDefinition, blank=True, related_name="queues")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, blank=True, null=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return self.name


class ItemStatus(models.TextChoices):
    PENDING = "pending"
    DONE = "done"
    SKIPPED = "skipped"


class QueueItem(models.Model):
    queue = models.ForeignKey(ReviewQueue, on_delete=models.CASCADE, related_name="items")
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="queue_items")
    position = models.IntegerField(default=0)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, blank=True, null=True, related_name="queue_items"
    )
    status = models.CharField(max_length=10, choices=ItemStatus.choices, default=ItemStatus.PENDING)
    done_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, blank=True, null=True, related_name="+"
    )
    done_at = models.DateTimeField(blank=True, null=True)

    class Meta:
        ordering = ("position", "id")
        constraints = [models.UniqueConstraint(fields=["queue", "trace"], name="review_trace_once_per_queue")]

    def __str__(self) -> str:
        return f"{self.queue_id}:{self.trace_id} ({self.status})"


class MessageEdit(models.Model):
    """An expert's edit of a main-path message (X6 edit-and-fork): the edited copy
    starts a new branch, the original stays; who, when, which message, before/after.

    Sequences rather than foreign keys: deleting a trace's messages stays one DELETE
    (traces/services/delete.py); the edits go first, by the trace_deleting signal.
    """

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="message_edits")
    editor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, blank=True, null=True, related_name="+"
    )
    edited_at = models.DateTimeField(default=timezone.now)
    original_sequence = models.IntegerField(help_text="the message that was edited (it stays)")
    edited_sequence = models.IntegerField(help_text="its edited copy, the new branch's first message")
    head_sequence = models.IntegerField(help_text="the new branch's head right after the edit")
    role = models.CharField(max_length=10)
    before = models.JSONField(help_text="the edited fields as they were: content and/or tool_calls")
    after = models.JSONField(help_text="the edited fields as the copy has them")
    rerun = models.BooleanField(default=False, help_text="whether the branch was re-run from the edit")

    class Meta:
        ordering = ("edited_at", "id")

    def __str__(self) -> str:
        return f"{self.trace_id}:{self.original_sequence}->{self.edited_sequence}"


class Verdict(models.TextChoices):
    PENDING = "", "not judged"
    FIXED = "fixed", "fixed"
    NOT_FIXED = "not_fixed", "not fixed"


class Correction(models.Model):
    """An expert's correction of an assistant message ("here the agent should have …"),
    the draft experience proposed from it, and the verification of that experience: a
    branch forked before the mistake and re-run with the experience injected, judged
    fixed / not fixed against the original branch (X6, issue 23 item 4)."""

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="corrections")
    message_sequence = models.IntegerField(help_text="the corrected assistant message")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, blank=True, null=True, related_name="+"
    )
    text = models.TextField()
    experience = models.ForeignKey(
        "memory.Experience", on_delete=models.SET_NULL, blank=True, null=True, related_name="corrections"
    )
    # The verification: the original branch's head, the fork point, when it started.
    original_head_sequence = models.IntegerField(blank=True, null=True)
    verify_after_sequence = models.IntegerField(blank=True, null=True)
    verified_at = models.DateTimeField(blank=True, null=True)
    verdict = models.CharField(max_length=10, choices=Verdict.choices, blank=True, default=Verdict.PENDING)
    verdict_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, blank=True, null=True, related_name="+"
    )
    verdict_at = models.DateTimeField(blank=True, null=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"{self.trace_id}:{self.message_sequence} {self.verdict or 'open'}"

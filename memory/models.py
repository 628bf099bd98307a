"""What is learned and configured: experiences (M1), agent presets (M7) and memory entries (M8).

An Experience is a condition + rule lesson with evidence, reviewed by experts
(draft -> approved -> retired); only approved ones are retrieved by default (M5).
`intent_index`, `state_index` and `search_text` are denormalised copies of the
tags and text, kept by `Experience.build_indexes()`, so retrieval can match tags
with plain SQL; the full-text indexes are the database's own (migration 0008: a
weighted generated tsvector with a GIN index on PostgreSQL, an FTS5 table kept
by triggers on SQLite).
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from memory.tags import canonical_tag, normalize_tag, normalize_tags

__all__ = [
    "canonical_tag",
    "normalize_tag",
    "normalize_tags",
]  # re-exported: the tag rules live in memory/tags.py

CATEGORIES = ("tool_usage", "logic_flow", "environment", "domain", "communication", "other")
CODE_RE = re.compile(r"^ex_\d{3,}$")


class ExperienceStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    APPROVED = "approved", "Approved"
    RETIRED = "retired", "Retired"


class ExperienceSource(models.TextChoices):
    EXECUTION = "execution", "Execution (reflection)"
    FEEDBACK = "feedback", "Expert feedback"
    MANUAL = "manual", "Manual"


# A condition is the clause after "When" (the portal shows "When <condition>", an
# agent reads "When <condition>: <rule>"), so a leading "when", "whenever" or "if"
# that a model or a person wrote is the prefix said twice.
_CONDITION_LEAD = re.compile(r"^(?:when(?:ever)?|if)\b[\s,:]*", re.IGNORECASE)


def normalize_condition(text: str | None) -> str:
    """`"When the file is large."` -> `"the file is large."`; a bare "when" stays."""
    text = (text or "").strip()
    clause = _CONDITION_LEAD.sub("", text, count=1)
    return clause if clause else text


class Experience(models.Model):
    code = models.CharField(max_length=20, unique=True, help_text="ex_001 ... (cited by agents as [ex_001])")
    scope = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text='who it applies to, e.g. "agent:explore"; empty = all',
    )
    category = models.CharField(max_length=50, default="logic_flow", db_index=True)
    tags = models.JSONField(default=dict, blank=True, help_text='{"state": [...], "intent": [...]}')
    condition = models.TextField(blank=True, default="", help_text="when the rule applies")
    rule = models.TextField(help_text="what to do (the body of the experience)")
    evidence = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"trace_id": ..., "messages": [{"sequence": 5, "message_id": ...}]}',
    )
    trace = models.ForeignKey(
        "traces.Trace",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="experiences",
        help_text="the trace the evidence comes from",
    )
    source = models.CharField(
        max_length=20, choices=ExperienceSource.choices, default=ExperienceSource.MANUAL, db_index=True
    )
    confidence = models.FloatField(default=0.5)
    helpful = models.IntegerField(default=0)
    harmful = models.IntegerField(default=0)
    usage_count = models.IntegerField(default=0, help_text="times an agent cited it")
    outcome_runs = models.IntegerField(default=0, help_text="finished runs that retrieved it")
    outcome_successes = models.IntegerField(default=0, help_text="of those, completed")
    success_rate = models.FloatField(null=True, blank=True)
    embedding = models.JSONField(null=True, blank=True, editable=False)
    embedding_model = models.CharField(max_length=200, blank=True, default="", editable=False)
    embedded_at = models.DateTimeField(null=True, blank=True, editable=False)
    status = models.CharField(
        max_length=10, choices=ExperienceStatus.choices, default=ExperienceStatus.DRAFT, db_index=True
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now)
    # Denormalised for retrieval (build_indexes); never edited by hand.
    intent_index = models.TextField(blank=True, default="", editable=False)
    state_index = models.TextField(blank=True, default="", editable=False)
    search_text = models.TextField(blank=True, default="", editable=False)
    _embedded_text: str | None = None  # search_text as loaded (from_db), not a field

    class Meta:
        ordering = ["code"]
        indexes = [
            models.Index(fields=["status", "category"], name="memory_exp_status_cat"),
            # the fingerprint of a process's matrix of vectors (memory/retrieval/vectors.py)
            models.Index(fields=["embedded_at"], name="memory_exp_embedded_at"),
            models.Index(fields=["updated_at"], name="memory_exp_updated_at"),
        ]

    def __str__(self) -> str:
        return f"{self.code}: {self.condition or self.rule}"[:120]

    def save(self, *args: Any, touch: bool = True, **kwargs: Any) -> None:
        """Save with fresh indexes; `touch=False` keeps `updated_at` (imports). An edit of
        the text an embedding was made from drops it (embed_missing makes a new one)."""
        self.build_indexes()
        loaded = self._embedded_text
        if loaded is not None and loaded != self.search_text and self.embedding_model:
            self.embedding, self.embedding_model, self.embedded_at = None, "", None
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {
                    *kwargs["update_fields"],
                    "embedding",
                    "embedding_model",
                    "embedded_at",
                }
        self._embedded_text = self.search_text
        if touch:
            self.updated_at = timezone.now()
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {
                *kwargs["update_fields"],
                "tags",
                "rule",
                "condition",
                "intent_index",
                "state_index",
                "search_text",
                "updated_at",
            }
        super().save(*args, **kwargs)

    @classmethod
    def from_db(cls, db: Any, field_names: Any, values: Any) -> Experience:
        """Remembers the text the stored embedding was made from (save() compares)."""
        experience = super().from_db(db, field_names, values)
        experience._embedded_text = experience.__dict__.get("search_text")
        return experience

    def build_indexes(self) -> None:
        """Normalise tags and text, and refresh the denormalised retrieval columns."""
        self.tags = normalize_tags(self.tags)
        self.rule = (self.rule or "").strip("\n")
        self.condition = normalize_condition(self.condition)
        canonical = normalize_tags(self.tags, canonical=True)
        self.intent_index = "".join(f" {t} " for t in canonical["intent"])
        self.state_index = "".join(f" {t} " for t in canonical["state"])
        words = [*self.tags["intent"], *self.tags["state"]]
        self.search_text = "\n".join(
            [self.category, " ".join(w.replace("_", " ") for w in words), self.condition, self.rule]
        )

    @property
    def evidence_trace_id(self) -> str | None:
        """The evidence's trace while it exists (None once deleted: nothing links to it)."""
        if self.evidence_deleted:
            return None
        return (self.evidence or {}).get("trace_id") or self.trace_id

    @property
    def evidence_deleted(self) -> bool:
        return bool((self.evidence or {}).get("trace_deleted"))

    @property
    def evidence_sequences(self) -> list[int]:
        return [m["sequence"] for m in (self.evidence or {}).get("messages") or [] if "sequence" in m]

    @property
    def condition_clause(self) -> str:
        """The condition as shown after "When", also for rows saved before it was normalised."""
        return normalize_condition(self.condition)

    def prompt_line(self) -> str:
        """How the experience is shown to an agent."""
        when = f"When {self.condition_clause.rstrip('.')}: " if self.condition else ""
        rule = " ".join(self.rule.split())
        return f"- [{self.code}] {when}{rule} ({self.track_record()})"

    def track_record(self) -> str:
        """Votes and, once runs have used it, the success rate: what an agent weighs it by."""
        record = f"helpful {self.helpful}, harmful {self.harmful}"
        if self.outcome_runs:
            rate = round(100 * self.outcome_successes / self.outcome_runs)
            record += f", succeeded in {self.outcome_successes}/{self.outcome_runs} runs ({rate}%)"
        return record


class AgentPreset(models.Model):
    """A preset stored in the database; it overrides a built-in of the same name (M7)."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True, default="")
    allowed_tools = models.JSONField(
        null=True, blank=True, help_text="tool names the agent may use; empty (null) = every tool"
    )
    denied_tools = models.JSONField(null=True, blank=True, help_text="tool names never offered nor run")
    max_iterations = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="step limit of a run; empty = the run's own, else AGENT_MAX_ITERATIONS",
    )
    temperature = models.FloatField(null=True, blank=True)
    skills = models.JSONField(
        null=True, blank=True, help_text="built-in skills injected into the system prompt; null = all"
    )
    extra = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class MemoryType(models.TextChoices):
    USER = "user", "User"
    FEEDBACK = "feedback", "Feedback"
    PROJECT = "project", "Project"
    REFERENCE = "reference", "Reference"


class MemoryEntry(models.Model):
    """An agent's own note about a user or a project (M8, seed 001's memory entries).

    Written by the agent through `write_memory` (the write gate in
    `memory/entries/gate.py`), no expert approval; scoped to the trace's owner and,
    for project-bound runs, to the project ("" = every run of the owner). Within a
    scope, (type, name) is unique case-insensitively: writing it again overwrites.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="memory_entries",
    )
    project = models.CharField(max_length=100, blank=True, default="", db_index=True)
    type = models.CharField(max_length=16, choices=MemoryType.choices)
    name = models.CharField(max_length=200)
    description = models.CharField(max_length=500, blank=True, default="")
    keywords = models.JSONField(default=list, blank=True)
    content = models.TextField()
    saved_at = models.DateTimeField(default=timezone.now)
    # The trace whose run wrote it last (None: written in the portal, the API or an import).
    trace = models.ForeignKey(
        "traces.Trace", on_delete=models.SET_NULL, null=True, blank=True, related_name="memory_entries"
    )

    class Meta:
        ordering = ["-saved_at", "-id"]
        verbose_name_plural = "memory entries"
        indexes = [models.Index(fields=["owner", "project", "-saved_at"], name="memory_entry_scope")]
        constraints = [
            models.UniqueConstraint(
                "owner",
                "project",
                "type",
                Lower("name"),
                name="memory_entry_unique_name",
            )
        ]

    def __str__(self) -> str:
        return f"{self.type}: {self.name}"

"""Experts manage score definitions and review queues in the admin (X6)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms import ModelForm

from review.models import MessageEdit, QueueItem, ReviewQueue, Score, ScoreDefinition, ScoreKind


class ScoreDefinitionForm(ModelForm):
    class Meta:
        model = ScoreDefinition
        fields = ("name", "description", "kind", "minimum", "maximum", "categories", "active")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind")
        if kind == ScoreKind.NUMERIC and (data.get("minimum") is None or data.get("maximum") is None):
            raise ValidationError("A numeric score needs a minimum and a maximum.")
        if kind == ScoreKind.CATEGORICAL:
            labels = data.get("categories")
            if (
                not isinstance(labels, list)
                or not labels
                or not all(isinstance(x, str) and x for x in labels)
            ):
                raise ValidationError('A categorical score needs a list of labels, e.g. ["good", "bad"].')
        return data


@admin.register(ScoreDefinition)
class ScoreDefinitionAdmin(admin.ModelAdmin):
    form = ScoreDefinitionForm
    list_display = ("name", "kind", "minimum", "maximum", "categories", "active")
    list_filter = ("kind", "active")
    search_fields = ("name", "description")


@admin.register(Score)
class ScoreAdmin(admin.ModelAdmin):
    list_display = ("trace", "message", "definition", "label", "author", "updated_at")
    list_filter = ("definition",)
    search_fields = ("trace__trace_id", "comment")
    raw_id_fields = ("trace", "message", "author")


class QueueItemInline(admin.TabularInline):
    model = QueueItem
    raw_id_fields = ("trace", "assignee", "done_by")
    extra = 0


@admin.register(ReviewQueue)
class ReviewQueueAdmin(admin.ModelAdmin):
    list_display = ("name", "created_by", "created_at")
    search_fields = ("name", "description")
    filter_horizontal = ("definitions",)
    inlines = (QueueItemInline,)


@admin.register(MessageEdit)
class MessageEditAdmin(admin.ModelAdmin):
    """The edit-and-fork audit trail: read only (edits are made on the portal or the API)."""

    list_display = ("trace", "original_sequence", "edited_sequence", "editor", "edited_at", "rerun")
    list_filter = ("rerun",)
    search_fields = ("trace__trace_id",)
    readonly_fields = [f.name for f in MessageEdit._meta.fields]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

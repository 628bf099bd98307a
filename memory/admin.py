"""Admin of memory: the experts' review queue for experiences, presets and memory entries (M1, M5, M7, M8)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from memory import services
from memory.entries.gate import Draft, MemoryRefused, check
from memory.models import AgentPreset, Experience, ExperienceStatus, MemoryEntry
from memory.tags import canonical_tag


class TagFilter(admin.SimpleListFilter):
    """Filter by one state or intent tag (the most used ones are listed)."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        counts: dict[str, int] = {}
        for tags in Experience.objects.values_list("tags", flat=True)[:2000]:
            for kind in ("intent", "state"):
                for tag in (tags or {}).get(kind) or []:
                    counts[f"{kind}:{tag}"] = counts.get(f"{kind}:{tag}", 0) + 1
        top = sorted(counts, key=lambda key: (-counts[key], key))[:30]
        return [(key, key) for key in top]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Experience]) -> QuerySet[Experience]:
        value = self.value()
        if not value or ":" not in value:
            return queryset
        kind, tag = value.split(":", 1)
        column = "intent_index" if kind == "intent" else "state_index"
        return queryset.filter(**{f"{column}__contains": f" {canonical_tag(tag)} "})


class ExperienceActionForm(ActionForm):
    """The action bar's extra fields, read by the *Merge tags* action."""

    tags_from = forms.CharField(required=False, label="Merge tags", help_text="comma-separated")
    tags_into = forms.CharField(required=False, label="into")


@admin.register(Experience)
class ExperienceAdmin(admin.ModelAdmin):
    action_form = ExperienceActionForm
    list_display = (
        "code",
        "status",
        "category",
        "short_condition",
        "helpful",
        "harmful",
        "usage_count",
        "success_rate",
        "source",
        "updated_at",
    )
    list_editable = ("helpful", "harmful")
    list_filter = ("status", "category", "source", TagFilter)
    search_fields = ("code", "condition", "rule", "intent_index", "state_index")
    readonly_fields = (
        "code",
        "evidence_links",
        "usage_count",
        "outcome_runs",
        "outcome_successes",
        "success_rate",
        "reviewed_by",
        "reviewed_at",
        "created_at",
        "updated_at",
    )
    fields = (
        "code",
        "status",
        "category",
        "scope",
        "tags",
        "condition",
        "rule",
        "source",
        "confidence",
        ("helpful", "harmful"),
        "evidence_links",
        "evidence",
        "trace",
        ("usage_count", "outcome_runs", "outcome_successes", "success_rate"),
        ("reviewed_by", "reviewed_at"),
        ("created_at", "updated_at"),
    )
    raw_id_fields = ("trace",)
    actions = ["approve", "retire", "back_to_draft", "export_markdown", "merge_tags", "embed"]
    ordering = ("-updated_at",)

    @admin.display(description="condition")
    def short_condition(self, experience: Experience) -> str:
        text = experience.condition or experience.rule
        return text if len(text) <= 80 else text[:80] + "…"

    @admin.display(description="evidence")
    def evidence_links(self, experience: Experience) -> str:
        """Links to the evidence's trace and messages in the admin."""
        trace_id = experience.evidence_trace_id
        if experience.evidence_deleted:
            return "trace deleted"
        if not trace_id:
            return "—"
        trace_url = reverse("admin:traces_trace_change", args=[trace_id])
        items = (experience.evidence or {}).get("messages") or []
        links = format_html_join(
            ", ",
            '<a href="{}">#{}</a>',
            (
                (reverse("admin:traces_message_change", args=[item["message_id"]]), item.get("sequence", "?"))
                for item in items
                if item.get("message_id")
            ),
        )
        return format_html('trace <a href="{}">{}</a>; messages {}', trace_url, trace_id, links or "—")

    def save_model(self, request: HttpRequest, obj: Experience, form: Any, change: bool) -> None:
        if not change:
            obj.code = services.experience_next_code()
        # always authenticated here (the admin lets only staff in); the check narrows the type
        if change and "status" in form.changed_data and request.user.is_authenticated:
            obj.reviewed_by, obj.reviewed_at = request.user, timezone.now()
        super().save_model(request, obj, form, change)
        if obj.status == ExperienceStatus.APPROVED:
            services.experiences_embed_all(codes=[obj.code])

    @admin.action(description="Embed the selected approved experiences again (AGENT_EMBEDDING_MODEL)")
    def embed(self, request: HttpRequest, queryset: QuerySet[Experience]) -> None:
        codes = list(queryset.values_list("code", flat=True))
        done = services.experiences_embed_all(codes=codes, everything=True)
        level = messages.SUCCESS if done else messages.WARNING
        self.message_user(request, f"{done} approved experience(s) embedded (see the log if fewer).", level)

    def _set_status(self, request: HttpRequest, queryset: QuerySet[Experience], status: str) -> None:
        codes = list(queryset.values_list("code", flat=True))
        changed = services.experiences_set_status(codes=codes, status=status, user=request.user)
        self.message_user(request, f"{changed} experience(s) now {status}.", messages.SUCCESS)

    @admin.action(description="Approve the selected experiences")
    def approve(self, request: HttpRequest, queryset: QuerySet[Experience]) -> None:
        self._set_status(request, queryset, ExperienceStatus.APPROVED)

    @admin.action(description="Retire the selected experiences")
    def retire(self, request: HttpRequest, queryset: QuerySet[Experience]) -> None:
        self._set_status(request, queryset, ExperienceStatus.RETIRED)

    @admin.action(description="Send the selected experiences back to draft")
    def back_to_draft(self, request: HttpRequest, queryset: QuerySet[Experience]) -> None:
        self._set_status(request, queryset, ExperienceStatus.DRAFT)

    @admin.action(description="Merge tags (fields beside the action) in the selected experiences")
    def merge_tags(self, request: HttpRequest, queryset: QuerySet[Experience]) -> None:
        sources = [t for t in request.POST.get("tags_from", "").split(",") if t.strip()]
        codes = list(queryset.values_list("code", flat=True))
        try:
            changed = services.experience_tags_merge(
                codes=codes, sources=sources, target=request.POST.get("tags_into", "")
            )
        except ValueError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        self.message_user(request, f"Tags merged in {changed} experience(s).", messages.SUCCESS)

    @admin.action(description="Download the selected experiences as experiences.md")
    def export_markdown(self, request: HttpRequest, queryset: QuerySet[Experience]) -> HttpResponse:
        response = HttpResponse(
            services.experiences_export(queryset=queryset), content_type="text/markdown; charset=utf-8"
        )
        response["Content-Disposition"] = 'attachment; filename="experiences.md"'
        return response


@admin.register(AgentPreset)
class AgentPresetAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "description",
        "max_iterations",
        "temperature",
        "allowed_tools",
        "skills",
        "updated_at",
    )
    search_fields = ("name", "description")


class MemoryEntryForm(forms.ModelForm):
    """Edits pass the write gate (M8), like the agent's own writes."""

    class Meta:
        model = MemoryEntry
        fields = [
            "owner",
            "project",
            "type",
            "name",
            "description",
            "keywords",
            "content",
            "saved_at",
            "trace",
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        keywords = data.get("keywords")
        draft = Draft(
            type=data.get("type") or "",
            name=data.get("name") or "",
            description=data.get("description") or "",
            keywords=[str(k) for k in keywords] if isinstance(keywords, list) else [],
            content=data.get("content") or "",
        )
        try:
            checked = check(draft)
        except MemoryRefused as refused:
            raise forms.ValidationError(
                [f"memory not saved: {reason}" for reason in refused.reasons]
            ) from None
        data.update(
            name=checked.name,
            description=checked.description,
            keywords=checked.keywords,
            content=checked.content,
        )
        return data


@admin.register(MemoryEntry)
class MemoryEntryAdmin(admin.ModelAdmin):
    form = MemoryEntryForm
    list_display = ["name", "type", "owner", "project", "description", "saved_at"]
    list_filter = ["type", "project"]
    search_fields = ["name", "description", "content", "owner__username"]
    raw_id_fields = ["owner", "trace"]
    date_hierarchy = "saved_at"

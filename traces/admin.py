"""Admin views of traces: what experts scan when something looks off."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.timezone import localtime

from traces.collaboration.humans import HUMAN, human_answer
from traces.models import Approval, Goal, InboxMessage, Message, RemoteAgentConfig, Trace, TraceEvent
from traces.runner import RunError
from traces.runner.store import trace_request_stop
from traces.services.approvals import approval_decide
from traces.services.delete import IN_FLIGHT, deletion_plan, trace_delete
from traces.services.runs import trace_continue, trace_reflect


class GoalInline(admin.TabularInline):
    model = Goal
    extra = 0
    can_delete = False
    fields = ("goal_id", "parent_id", "description", "status", "type", "summary", "cumulative_stats")
    readonly_fields = fields
    ordering = ("position",)
    show_change_link = True


def _cut(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, whole in the title (shown on hover)."""
    return format_html('<span title="{}">{}</span>', text, Truncator(text).chars(limit))


@admin.register(Trace)
class TraceAdmin(admin.ModelAdmin):
    # Narrow columns so a row stays a line or two at 1400px beside the filters: ids and
    # names cut (whole on hover), numbers and dates on one line (traces/admin.css).
    list_display = (
        "short_id",
        "short_name",
        "status",
        "agent",
        "owner",
        "short_model",
        "message_count",
        "tokens",
        "total_cost",
        "updated",
    )
    list_display_links = ("short_id", "short_name")
    list_filter = ("status", "needs_attention", "agent_type", "model", "mode")
    search_fields = ("trace_id", "name", "task", "uid")
    date_hierarchy = "created_at"
    list_select_related = ("owner",)
    raw_id_fields = ("owner", "parent_trace")
    readonly_fields = (
        "trace_id",
        "total_messages",
        "total_tokens",
        "total_prompt_tokens",
        "total_completion_tokens",
        "total_cost",
        "total_duration_ms",
        "last_sequence",
        "head_sequence",
        "last_event_id",
        "run_owner",
        "run_token",
        "heartbeat_at",
        "run_settings",
        "created_at",
        "completed_at",
    )
    inlines = [GoalInline]
    actions = ["stop_traces", "reflect_traces", "answer_questions"]

    class Media:
        css = {"all": ("traces/admin.css",)}

    # Deleting goes through traces/services/delete.py (sub-traces, workspaces, files), and the
    # confirmation counts what goes instead of listing every message of a large trace.
    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[str], dict[str, int], set[str], list[str]]:
        lines: list[str] = []
        totals: dict[str, int] = {}
        protected: list[str] = []
        for trace in objs:
            plan = deletion_plan(user=request.user, trace_id=trace.pk)
            lines.append(
                f"Trace {trace.pk} with {plan.traces - 1} sub-trace(s): {plan.messages} messages, "
                f"{plan.events} events, {plan.files} workspace/spill path(s)"
            )
            for name, value in plan.as_dict().items():
                totals[name] = totals.get(name, 0) + value
            if trace.status in IN_FLIGHT:
                protected.append(f"trace {trace.pk} is {trace.status}: stop it first")
        return lines, totals, set(), protected

    def delete_model(self, request: HttpRequest, obj: Trace) -> None:
        self.delete_queryset(request, Trace.objects.filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Trace]) -> None:
        for trace_id in list(queryset.values_list("pk", flat=True)):
            try:
                trace_delete(user=request.user, trace_id=trace_id)
            except RunError as exc:
                self.message_user(request, f"{trace_id}: {exc}", messages.WARNING)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        # The table needs the width the admin's navigation sidebar takes (other pages keep it).
        return super().changelist_view(request, {**(extra_context or {}), "is_nav_sidebar_enabled": False})

    @admin.display(description="trace id", ordering="trace_id")
    def short_id(self, trace: Trace) -> str:
        return _cut(trace.trace_id, 9)

    @admin.display(description="name", ordering="name")
    def short_name(self, trace: Trace) -> str:
        return _cut(trace.name or trace.task or "", 60)

    @admin.display(description="agent", ordering="agent_type")
    def agent(self, trace: Trace) -> str:
        return trace.agent_type or "-"

    @admin.display(description="model", ordering="model")
    def short_model(self, trace: Trace) -> str:
        provider, _, name = (trace.model or "-").rpartition("/")
        return format_html("{}<wbr>{}", f"{provider}/" if provider else "", name)  # breaks after the provider

    @admin.display(description="messages", ordering="total_messages")
    def message_count(self, trace: Trace) -> str:
        return f"{trace.total_messages:,}"

    @admin.display(description="tokens", ordering="total_tokens")
    def tokens(self, trace: Trace) -> str:
        return f"{trace.total_tokens:,}"

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, trace: Trace) -> str:
        return date_format(localtime(trace.updated_at), "M j, H:i")

    @admin.action(description="Stop the selected running traces")
    def stop_traces(self, request: HttpRequest, queryset: QuerySet[Trace]) -> None:
        stopped = sum(trace_request_stop(trace_id=t.trace_id) for t in queryset)
        self.message_user(request, f"Asked {stopped} running trace(s) to stop.", messages.SUCCESS)

    @admin.action(description="Reflect on the selected traces (draft experiences, M3)")
    def reflect_traces(self, request: HttpRequest, queryset: QuerySet[Trace]) -> None:
        started = 0
        for trace in queryset:
            try:
                trace_reflect(user=request.user, trace_id=trace.trace_id)
                started += 1
            except RunError as exc:
                self.message_user(request, f"{trace.trace_id}: {exc}", messages.WARNING)
        self.message_user(request, f"Reflection queued for {started} trace(s).", messages.SUCCESS)

    @admin.action(description="Answer the selected ask_human questions (S3)")
    def answer_questions(self, request: HttpRequest, queryset: QuerySet[Trace]) -> HttpResponse | None:
        """An intermediate page with one answer box per waiting question; the askers resume."""

        questions = list(queryset.filter(agent_type=HUMAN, status="waiting"))
        if not questions:
            self.message_user(request, "None of the selected traces is a waiting question.", messages.WARNING)
            return None
        if request.POST.get("apply"):
            answered = 0
            for question in questions:
                answer = request.POST.get(f"answer-{question.trace_id}", "")
                if not answer.strip():
                    continue
                try:
                    human_answer(user=request.user, trace_id=question.trace_id, answer=answer)
                    answered += 1
                except RunError as exc:
                    self.message_user(request, f"{question.trace_id}: {exc}", messages.ERROR)
            self.message_user(
                request, f"Answered {answered} question(s); their traces resume.", messages.SUCCESS
            )
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Answer questions",
            "questions": questions,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/traces/answer_questions.html", context)


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = (
        "message_id",
        "role",
        "kind",
        "sequence",
        "parent_sequence",
        "goal_id",
        "description",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "created_at",
    )
    list_filter = ("role", "kind")
    search_fields = ("message_id", "trace__trace_id", "description")
    raw_id_fields = ("trace",)
    ordering = ("trace", "sequence")

    actions = ["rewind_here", "regenerate_from_here"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # messages come from runs; an expert rewinds instead of inserting

    def _one(self, request: HttpRequest, queryset: QuerySet[Message]) -> Message | None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one message.", messages.ERROR)
            return None
        return queryset.get()

    def _continue(self, request: HttpRequest, message: Message, new: list[dict[str, Any]]) -> None:
        try:
            trace_continue(
                user=request.user, trace_id=message.trace_id, messages=new, after_sequence=message.sequence
            )
        except RunError as exc:
            self.message_user(request, f"{message.trace_id}: {exc}", messages.ERROR)
            return
        what = "Rewound" if new else "Regenerating"
        self.message_user(
            request,
            f"{what} trace {message.trace_id} after message {message.sequence}; it runs in a worker.",
            messages.SUCCESS,
        )

    @admin.action(description="Rewind at the selected message with new text")
    def rewind_here(self, request: HttpRequest, queryset: QuerySet[Message]) -> HttpResponse | None:
        message = self._one(request, queryset)
        if message is None:
            return None
        if request.POST.get("apply"):
            text = request.POST.get("text", "").strip()
            if not text:
                self.message_user(request, "Write the new message to rewind with.", messages.ERROR)
                return None
            self._continue(request, message, [{"role": "user", "content": text}])
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Rewind",
            "message": message,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/traces/rewind.html", context)

    @admin.action(description="Regenerate from the selected message")
    def regenerate_from_here(self, request: HttpRequest, queryset: QuerySet[Message]) -> None:
        message = self._one(request, queryset)
        if message is not None:
            self._continue(request, message, [])


@admin.register(Goal)
class GoalAdmin(admin.ModelAdmin):
    list_display = ("trace", "goal_id", "description", "status", "type", "created_at")
    list_filter = ("status", "type")
    search_fields = ("trace__trace_id", "description")
    raw_id_fields = ("trace",)


@admin.register(TraceEvent)
class TraceEventAdmin(admin.ModelAdmin):
    list_display = ("trace", "event_id", "type", "created_at")
    list_filter = ("type",)
    search_fields = ("trace__trace_id",)
    raw_id_fields = ("trace",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the event log is append-only


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    """Risky tool calls waiting for an expert (G5); decided rows are the audit trail."""

    list_display = (
        "trace",
        "tool_name",
        "status",
        "scope",
        "risk",
        "requested_at",
        "decided_by",
        "decided_at",
    )
    list_filter = ("status", "tool_name", "risk")
    search_fields = ("trace__trace_id", "tool_name", "tool_call_id")
    raw_id_fields = ("trace", "decided_by")
    readonly_fields = (
        "trace",
        "tool_call_id",
        "message_sequence",
        "tool_name",
        "arguments",
        "question",
        "risk",
        "status",
        "requested_at",
        "decided_by",
        "decided_at",
        "scope",
    )
    fields = (*readonly_fields, "edited_arguments", "decision_note")
    actions = ["approve", "approve_for_run", "deny"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def _decide(
        self, request: HttpRequest, queryset: QuerySet[Approval], decision: str, scope: str = "call"
    ) -> None:
        done = 0
        for approval in queryset.filter(status="pending"):
            try:
                approval_decide(
                    user=request.user,
                    trace_id=approval.trace_id,
                    approval_id=approval.pk,
                    decision=decision,
                    arguments=approval.edited_arguments if decision == "approve" else None,
                    note=approval.decision_note,
                    scope=scope,
                )
            except RunError as exc:
                self.message_user(request, f"{approval}: {exc}", messages.ERROR)
                continue
            done += 1
        self.message_user(
            request, f"{decision.capitalize()}d {done} call(s); their traces resume.", messages.SUCCESS
        )

    @admin.action(description="Approve the selected calls (with edited arguments if set)")
    def approve(self, request: HttpRequest, queryset: QuerySet[Approval]) -> None:
        self._decide(request, queryset, "approve")

    @admin.action(description="Approve the selected calls and every later call of their tool in the run")
    def approve_for_run(self, request: HttpRequest, queryset: QuerySet[Approval]) -> None:
        self._decide(request, queryset, "approve", scope="run")

    @admin.action(description="Deny the selected calls")
    def deny(self, request: HttpRequest, queryset: QuerySet[Approval]) -> None:
        self._decide(request, queryset, "deny")


@admin.register(InboxMessage)
class InboxMessageAdmin(admin.ModelAdmin):
    list_display = ("to_trace", "from_agent_id", "conversation_id", "created_at", "read_at")
    list_filter = ("read_at",)
    search_fields = ("to_trace__trace_id", "from_agent_id", "conversation_id")
    raw_id_fields = ("to_trace", "sender")


@admin.register(RemoteAgentConfig)
class RemoteAgentConfigAdmin(admin.ModelAdmin):
    """Remote agents the `agent` tool may call (A2A), each with its own key; the key is write-only here."""

    list_display = ["url", "name", "enabled", "created_at"]
    list_filter = ["enabled"]
    search_fields = ["url", "name"]

    def get_form(self, request: Any, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        form.base_fields["api_key"].widget = forms.PasswordInput(render_value=False)
        form.base_fields[
            "api_key"
        ].help_text = "sent as Authorization: Bearer <key>; leave empty to keep the stored key"
        return form

    def save_model(self, request: Any, obj: RemoteAgentConfig, form: Any, change: bool) -> None:
        if change and not obj.api_key:  # the key is never rendered back: empty means unchanged
            obj.api_key = RemoteAgentConfig.objects.values_list("api_key", flat=True).get(pk=obj.pk)
        super().save_model(request, obj, form, change)

"""Routes of the expert portal. Trace ids contain '@' and '-' but never '/'."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from portal.views import (
    agents,
    approvals,
    branches,
    corrections,
    deletion,
    goal_messages,
    media,
    memory,
    memory_entries,
    observability,
    queues,
    remote,
    review,
    suites,
    trace_page,
    traces,
)

app_name = "portal"

urlpatterns = [
    path("", traces.trace_list, name="trace-list"),
    path("login/", auth_views.LoginView.as_view(template_name="portal/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("traces/live.json", traces.traces_live, name="traces-live"),
    path("traces/new/", traces.trace_new, name="trace-new"),
    path("approvals/", approvals.approvals_inbox, name="approvals"),
    path("traces/<str:trace_id>/", trace_page.trace_detail, name="trace-detail"),
    path("traces/<str:trace_id>/waterfall/", observability.waterfall, name="trace-waterfall"),
    path("traces/<str:trace_id>/panels.json", trace_page.trace_panels, name="trace-panels"),
    path("traces/<str:trace_id>/messages/<int:sequence>/", trace_page.message_fragment, name="message"),
    path(
        "traces/<str:trace_id>/messages/<int:sequence>/request/",
        observability.message_request,
        name="message-request",
    ),
    path(
        "traces/<str:trace_id>/messages/<int:sequence>/media/<int:index>",
        media.message_media,
        name="message-media",
    ),
    path("traces/<str:trace_id>/remote/", remote.remote_sub_trace, name="trace-remote"),
    path(
        "traces/<str:trace_id>/goals/<str:goal_id>/messages/",
        goal_messages.goal_messages,
        name="goal-messages",
    ),
    path("traces/<str:trace_id>/run/", traces.trace_run, name="trace-run"),
    path("traces/<str:trace_id>/stop/", traces.trace_stop_view, name="trace-stop"),
    path("traces/<str:trace_id>/delete/", deletion.trace_delete_view, name="trace-delete"),
    path("traces/<str:trace_id>/answer/", traces.trace_answer_view, name="trace-answer"),
    path("traces/<str:trace_id>/reflect/", traces.trace_reflect_view, name="trace-reflect"),
    path(
        "traces/<str:trace_id>/approvals/<int:approval_id>/",
        approvals.approval_decide_view,
        name="approval-decide",
    ),
    path("traces/<str:trace_id>/scores/", review.trace_score_view, name="trace-score"),  # X6 (issue 23)
    path("traces/<str:trace_id>/compare/", branches.branch_compare, name="branch-compare"),
    path("compare/", branches.trace_compare, name="trace-compare"),
    path(
        "traces/<str:trace_id>/messages/<int:sequence>/edit/",
        branches.message_edit_view,
        name="message-edit",
    ),
    path("traces/<str:trace_id>/corrections/", corrections.correction_new, name="correction-new"),
    path(
        "corrections/<int:correction_id>/verify/",
        corrections.correction_verify_view,
        name="correction-verify",
    ),
    path(
        "corrections/<int:correction_id>/verdict/",
        corrections.correction_verdict_view,
        name="correction-verdict",
    ),
    path("review/", queues.queue_list, name="queues"),  # X6 review queues (issue 23)
    path("review/<int:queue_id>/", queues.queue_detail, name="queue"),
    path("review/<int:queue_id>/items/<int:item_id>/", queues.queue_item, name="queue-item"),
    path(
        "review/<int:queue_id>/items/<int:item_id>/finish/",
        queues.queue_item_finish_view,
        name="queue-finish",
    ),
    path("suites/", suites.suite_list, name="suites"),  # X6 regression suites (issue 23)
    path("suites/<int:suite_id>/", suites.suite_detail, name="suite"),
    path("suites/<int:suite_id>/runs/", suites.suite_run_new, name="suite-run-new"),
    path("suites/runs/<int:run_id>/", suites.suite_run_detail, name="suite-run"),
    path("experiences/", memory.experience_list_view, name="experiences"),
    path("experiences/experiences.md", memory.experiences_download, name="experiences-download"),
    path("experiences/upload/", memory.experiences_upload, name="experiences-upload"),
    path("experiences/<str:code>/edit/", memory.experience_edit, name="experience-edit"),
    path("experiences/<str:code>/<str:action>/", memory.experience_action, name="experience-action"),
    path("library/", memory.library, name="library"),
    path("memory/", memory_entries.memory_list, name="memory"),
    path("memory/memory.md", memory_entries.memory_download, name="memory-download"),
    path("memory/<int:entry_id>/edit/", memory_entries.memory_edit, name="memory-edit"),
    path("memory/<int:entry_id>/delete/", memory_entries.memory_delete, name="memory-delete"),
    path("agents/", agents.agents_text, name="agents-text"),
]

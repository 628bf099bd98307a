"""Routes of the trace API. Trace ids contain '@' and '-' but never '/'."""

from __future__ import annotations

from django.urls import path

import traces.api.converters  # noqa: F401  (registers the "key" converter)
from traces.api import approvals, calls, collaboration, observability, projects, transfer, views

app_name = "traces-api"

urlpatterns = [
    path("projects", projects.ProjectListView.as_view(), name="project-list"),
    path("calls", calls.CallView.as_view(), name="call"),
    path("traces", views.TraceListView.as_view(), name="trace-list"),
    path("traces/running", views.RunningTraceListView.as_view(), name="trace-running"),
    path("traces/import", transfer.TraceImportView.as_view(), name="trace-import"),
    path("traces/<key:trace_id>", views.TraceDetailView.as_view(), name="trace-detail"),
    path("traces/<key:trace_id>/messages", views.TraceMessagesView.as_view(), name="trace-messages"),
    path(
        "traces/<key:trace_id>/messages/<int:sequence>/request",
        observability.MessageRequestView.as_view(),
        name="message-request",
    ),
    path("traces/<key:trace_id>/export", transfer.TraceExportView.as_view(), name="trace-export"),
    path("traces/<key:trace_id>/events", views.TraceEventsView.as_view(), name="trace-events"),
    path("traces/<key:trace_id>/run", views.TraceRunView.as_view(), name="trace-run"),
    path("traces/<key:trace_id>/stop", views.TraceStopView.as_view(), name="trace-stop"),
    path("traces/<key:trace_id>/approvals", approvals.ApprovalListView.as_view(), name="approval-list"),
    path(
        "traces/<key:trace_id>/approvals/<int:approval_id>",
        approvals.ApprovalDecideView.as_view(),
        name="approval-decide",
    ),
    path("traces/<key:trace_id>/answer", collaboration.HumanAnswerView.as_view(), name="trace-answer"),
    path("traces/<key:trace_id>/remote", collaboration.RemoteSubTraceView.as_view(), name="trace-remote"),
]

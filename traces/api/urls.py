"""Routes of the trace API. Trace ids contain '@' and '-' but never '/'."""

from __future__ import annotations

from django.urls import path

from traces.api import approvals, collaboration, views

app_name = "traces-api"

urlpatterns = [
    path("traces", views.TraceListView.as_view(), name="trace-list"),
    path("traces/running", views.RunningTraceListView.as_view(), name="trace-running"),
    path("traces/<str:trace_id>", views.TraceDetailView.as_view(), name="trace-detail"),
    path("traces/<str:trace_id>/messages", views.TraceMessagesView.as_view(), name="trace-messages"),
    path("traces/<str:trace_id>/events", views.TraceEventsView.as_view(), name="trace-events"),
    path("traces/<str:trace_id>/run", views.TraceRunView.as_view(), name="trace-run"),
    path("traces/<str:trace_id>/stop", views.TraceStopView.as_view(), name="trace-stop"),
    path("traces/<str:trace_id>/approvals", approvals.ApprovalListView.as_view(), name="approval-list"),
    path(
        "traces/<str:trace_id>/approvals/<int:approval_id>",
        approvals.ApprovalDecideView.as_view(),
        name="approval-decide",
    ),
    path("traces/<str:trace_id>/answer", collaboration.HumanAnswerView.as_view(), name="trace-answer"),
]

"""Routes of the review API (mounted under /api/)."""

from __future__ import annotations

from django.urls import path

import traces.api.converters  # noqa: F401  (registers the "key" converter)
from review.api import branches, corrections, queues, views

app_name = "review-api"

urlpatterns = [
    path("score-definitions", views.ScoreDefinitionListView.as_view(), name="score-definition-list"),
    path("traces/<key:trace_id>/scores", views.TraceScoresView.as_view(), name="trace-scores"),
    path("review-queues", queues.QueueListView.as_view(), name="queue-list"),
    path("review-queues/<int:queue_id>", queues.QueueDetailView.as_view(), name="queue-detail"),
    path("review-queues/<int:queue_id>/items", queues.QueueItemsView.as_view(), name="queue-items"),
    path(
        "review-queues/<int:queue_id>/items/<int:item_id>", queues.QueueItemView.as_view(), name="queue-item"
    ),
    path("traces/<key:trace_id>/compare", branches.BranchCompareView.as_view(), name="branch-compare"),
    path("compare/traces", branches.TraceCompareView.as_view(), name="trace-compare"),
    path("traces/<key:trace_id>/edits", branches.MessageEditListView.as_view(), name="message-edits"),
    path(
        "traces/<key:trace_id>/messages/<int:sequence>/edit",
        branches.MessageEditView.as_view(),
        name="message-edit",
    ),
    path(
        "traces/<key:trace_id>/messages/<int:sequence>/corrections",
        corrections.MessageCorrectionsView.as_view(),
        name="message-corrections",
    ),
    path(
        "traces/<key:trace_id>/corrections",
        corrections.TraceCorrectionsView.as_view(),
        name="trace-corrections",
    ),
    path(
        "corrections/<int:correction_id>",
        corrections.CorrectionDetailView.as_view(),
        name="correction-detail",
    ),
    path(
        "corrections/<int:correction_id>/verify",
        corrections.CorrectionVerifyView.as_view(),
        name="correction-verify",
    ),
    path(
        "corrections/<int:correction_id>/verdict",
        corrections.CorrectionVerdictView.as_view(),
        name="correction-verdict",
    ),
]

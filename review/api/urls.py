"""Routes of the review API (mounted under /api/)."""

from __future__ import annotations

from django.urls import path

import traces.api.converters  # noqa: F401  (registers the "key" converter)
from review.api import views

app_name = "review-api"

urlpatterns = [
    path("score-definitions", views.ScoreDefinitionListView.as_view(), name="score-definition-list"),
    path("traces/<key:trace_id>/scores", views.TraceScoresView.as_view(), name="trace-scores"),
]

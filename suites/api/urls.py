"""Routes of the suite API (mounted under /api/)."""

from __future__ import annotations

from django.urls import path

from suites.api import views

app_name = "suites-api"

urlpatterns = [
    path("suites", views.SuiteListView.as_view(), name="suite-list"),
    path("suites/<int:suite_id>", views.SuiteDetailView.as_view(), name="suite-detail"),
    path("suites/<int:suite_id>/cases", views.SuiteCasesView.as_view(), name="suite-cases"),
    path("suites/<int:suite_id>/runs", views.SuiteRunsView.as_view(), name="suite-runs"),
    path("suite-runs/<int:run_id>", views.SuiteRunDetailView.as_view(), name="suite-run-detail"),
]

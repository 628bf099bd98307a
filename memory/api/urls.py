"""Routes of the memory API (mounted under /api/)."""

from __future__ import annotations

from django.urls import path

from memory.api import views

app_name = "memory-api"

urlpatterns = [
    path("experiences", views.ExperienceListView.as_view(), name="experience-list"),
    path("experiences/export", views.ExperienceExportView.as_view(), name="experience-export"),
    path("experiences/import", views.ExperienceImportView.as_view(), name="experience-import"),
    path("experiences/<str:code>", views.ExperienceDetailView.as_view(), name="experience-detail"),
    *[
        path(
            f"experiences/<str:code>/{action}",
            views.ExperienceActionView.as_view(action=action),
            name=f"experience-{action}",
        )
        for action in ("approve", "retire", "helpful", "harmful")
    ],
    path("traces/<str:trace_id>/reflect", views.TraceReflectView.as_view(), name="trace-reflect"),
    path("skills", views.SkillListView.as_view(), name="skill-list"),
    path("skills/<str:name>", views.SkillDetailView.as_view(), name="skill-detail"),
]

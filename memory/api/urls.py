"""Routes of the memory API (mounted under /api/)."""

from __future__ import annotations

from django.urls import path

import traces.api.converters  # noqa: F401  (registers the "key" converter)
from memory.api import entries, views

app_name = "memory-api"

urlpatterns = [
    path("experiences", views.ExperienceListView.as_view(), name="experience-list"),
    path("experiences/export", views.ExperienceExportView.as_view(), name="experience-export"),
    path("experiences/import", views.ExperienceImportView.as_view(), name="experience-import"),
    path("experiences/<key:code>", views.ExperienceDetailView.as_view(), name="experience-detail"),
    *[
        path(
            f"experiences/<key:code>/{action}",
            views.ExperienceActionView.as_view(action=action),
            name=f"experience-{action}",
        )
        for action in ("approve", "retire", "helpful", "harmful")
    ],
    path("traces/<key:trace_id>/reflect", views.TraceReflectView.as_view(), name="trace-reflect"),
    path("memory", entries.MemoryListView.as_view(), name="memory-list"),
    path("memory/export", entries.MemoryExportView.as_view(), name="memory-export"),
    path("memory/import", entries.MemoryImportView.as_view(), name="memory-import"),
    path("memory/<int:entry_id>", entries.MemoryDetailView.as_view(), name="memory-detail"),
    path("skills", views.SkillListView.as_view(), name="skill-list"),
    path("skills/<key:name>", views.SkillDetailView.as_view(), name="skill-detail"),
]

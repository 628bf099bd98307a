from __future__ import annotations

from django.urls import path

from tools import api

urlpatterns = [
    path("tools", api.ToolListView.as_view(), name="tool-list"),
]

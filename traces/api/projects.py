"""GET /api/projects: the project directories a run may name (M9)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from traces.api.serializers import ErrorSerializer
from traces.projects import projects


class ProjectSerializer(serializers.Serializer):
    name = serializers.CharField()
    writable = serializers.BooleanField(help_text="whether runs may change its files")


class ProjectListView(APIView):
    @extend_schema(responses={200: ProjectSerializer(many=True), 401: ErrorSerializer})
    def get(self, request: Request) -> Response:
        """The projects a run may name in its `project` setting ("name" or "name/dir"), by name.

        Their paths on the server are not shown.
        """
        listed = [
            {"name": p.name, "writable": p.writable}
            for p in sorted(projects().values(), key=lambda p: p.name)
        ]
        return Response(ProjectSerializer(listed, many=True).data)

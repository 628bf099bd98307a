"""Export a trace (with its sub-traces) as one .tar.gz, and import one (issue 26 item 8)."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from traces.api.views import ERRORS, TRACE_ID, TraceAPIView
from traces.runner import InvalidRun
from traces.services.transfer import trace_export_archive, trace_import


class ImportSerializer(serializers.Serializer):
    archive = serializers.FileField(help_text="a .tar.gz from GET /api/traces/{id}/export")


class ImportedSerializer(serializers.Serializer):
    trace_id = serializers.CharField()
    status = serializers.CharField()


class TraceExportView(TraceAPIView):
    @extend_schema(
        parameters=[TRACE_ID],
        responses={(200, "application/gzip"): OpenApiResponse(OpenApiTypes.BINARY), **ERRORS},
    )
    def get(self, request: Request, trace_id: str) -> HttpResponse:
        """The trace and its sub-traces in seed 004's layout (meta.json, goal.json,
        events.jsonl, messages/) as one .tar.gz."""
        trace = self.visible_trace(request, trace_id)
        data = trace_export_archive(user=request.user, trace_id=trace.trace_id)
        response = HttpResponse(data, content_type="application/gzip")
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in trace.trace_id)[:80]
        response["Content-Disposition"] = f'attachment; filename="trace-{safe}.tar.gz"'
        return response


class TraceImportView(TraceAPIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        request={"multipart/form-data": ImportSerializer}, responses={201: ImportedSerializer, **ERRORS}
    )
    def post(self, request: Request) -> Response:
        """Import an export as your trace: 201, 409 when a trace id in it exists here, 400
        naming the file that is malformed."""
        body = ImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        upload = body.validated_data["archive"]
        if upload.size > 512 * 1024 * 1024:
            raise InvalidRun("archive: at most 512 MB")
        trace = trace_import(user=request.user, source=upload.read())
        return Response({"trace_id": trace.trace_id, "status": trace.status}, status=status.HTTP_201_CREATED)

"""Branch comparison and edit-and-fork endpoints (X6). Thin: parse, call one selector or
service, serialize. Who may compare or edit a trace is who may see it (W4): its owner and
staff; anyone else gets the trace's 404, an anonymous caller a 401."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from review.api import requests as r
from review.api.serializers import MessageEditOutSerializer, comparison_data
from review.compare import branches_compare, traces_compare
from review.edits import message_edit_fork
from review.models import MessageEdit
from traces.api.views import CONTROL_ERRORS, ERRORS, TRACE_ID, TraceAPIView

SEQUENCE = OpenApiParameter("sequence", int, OpenApiParameter.PATH, description="the message to edit")


class BranchCompareView(TraceAPIView):
    @extend_schema(
        parameters=[TRACE_ID, r.BranchCompareQuerySerializer], responses={200: OpenApiTypes.OBJECT, **ERRORS}
    )
    def get(self, request: Request, trace_id: str) -> Response:
        """Two branches of the trace (each named by its last message; b defaults to the head)
        side by side from their common ancestor: aligned rows, diffs, outcome and figures."""
        query = r.BranchCompareQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        trace = self.visible_trace(request, trace_id)
        data = query.validated_data
        return Response(comparison_data(branches_compare(trace=trace, a=data["a"], b=data.get("b"))))


class TraceCompareView(TraceAPIView):
    @extend_schema(parameters=[r.TraceCompareQuerySerializer], responses={200: OpenApiTypes.OBJECT, **ERRORS})
    def get(self, request: Request) -> Response:
        """Two traces of the same task (their main paths) side by side, as for branches."""
        query = r.TraceCompareQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        a = self.visible_trace(request, query.validated_data["a"])
        b = self.visible_trace(request, query.validated_data["b"])
        return Response(comparison_data(traces_compare(a=a, b=b)))


class MessageEditView(TraceAPIView):
    @extend_schema(
        parameters=[TRACE_ID, SEQUENCE],
        request=r.MessageEditSerializer,
        responses={201: MessageEditOutSerializer, **CONTROL_ERRORS},
    )
    def post(self, request: Request, trace_id: str, sequence: int) -> Response:
        """Edit a main-path message: its edited copy starts a new branch (the original stays),
        re-run from there when `rerun` is true. Answers the recorded edit."""
        body = r.MessageEditSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        calls = data.get("tool_calls")
        fork = message_edit_fork(
            user=request.user,
            trace_id=trace_id,
            sequence=sequence,
            content=data.get("content"),
            tool_calls=[dict(c) for c in calls] if calls is not None else None,
            rerun=data["rerun"],
        )
        return Response(MessageEditOutSerializer(fork.edit).data, status=status.HTTP_201_CREATED)


class MessageEditListView(TraceAPIView):
    @extend_schema(parameters=[TRACE_ID], responses={200: MessageEditOutSerializer(many=True), **ERRORS})
    def get(self, request: Request, trace_id: str) -> Response:
        """Who edited which message of the trace, when, and what it said before and after."""
        trace = self.visible_trace(request, trace_id)
        edits = MessageEdit.objects.filter(trace=trace).select_related("editor")
        return Response(MessageEditOutSerializer(edits, many=True).data)

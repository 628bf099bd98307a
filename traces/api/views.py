"""Trace endpoints (W2). Thin: parse, call one selector or service, serialize."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from review.api.requests import ScoredTraceListQuerySerializer
from review.filters import ScoredTraceFilter
from traces.api import requests as r
from traces.api import serializers as s
from traces.api.parsers import BoundedJSONParser, MessagesJSONParser
from traces.api.permissions import visible_traces
from traces.models import ACTIVE_STATUSES, Goal, Trace, TraceStatus
from traces.runner import TraceNotFound
from traces.selectors import trace_events, trace_goal_messages, trace_main_path, trace_messages
from traces.services import delete as delete_services
from traces.services import runs as services

ERRORS = {400: s.ErrorSerializer, 401: s.ErrorSerializer, 404: s.ErrorSerializer, 413: s.ErrorSerializer}
CONTROL_ERRORS = {**ERRORS, 409: s.ErrorSerializer}
TRACE_ID = OpenApiParameter("trace_id", str, OpenApiParameter.PATH, description="Trace id")


class TraceAPIView(APIView):
    """Base for every trace view: bounded JSON bodies, trace lookup scoped to the user."""

    parser_classes = [BoundedJSONParser]

    def visible_trace(self, request: Request, trace_id: str) -> Trace:
        trace = visible_traces(request).filter(pk=trace_id).select_related("owner").first()
        if trace is None:
            raise TraceNotFound(f"trace {trace_id!r} does not exist")
        return trace


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name, "false").strip().lower()
    if value not in ("true", "1", "yes", "false", "0", "no", ""):
        raise ValidationError({name: [f"{name} is true or false, not {value[:40]!r}"]})
    return value in ("true", "1", "yes")


def _started(trace: Trace) -> dict[str, str]:
    return {"trace_id": trace.trace_id, "status": "started"}


class TraceListView(TraceAPIView, generics.GenericAPIView):
    serializer_class = s.TraceSerializer
    parser_classes = [MessagesJSONParser]

    def get_queryset(self) -> QuerySet[Trace]:
        query = ScoredTraceListQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        traces = visible_traces(self.request).select_related("owner").order_by("-created_at", "-trace_id")
        return ScoredTraceFilter(query.validated_data, queryset=traces).qs

    @extend_schema(
        parameters=[ScoredTraceListQuerySerializer], responses={200: s.TraceSerializer(many=True), **ERRORS}
    )
    def get(self, request: Request) -> Response:
        """List the traces you may see, newest first or by score (LimitOffset pagination)."""
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=r.TraceStartSerializer, responses={201: s.ControlResponseSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        """Start a new trace; a worker runs it. Answers at once."""
        body = r.TraceStartSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        trace = services.trace_start(user=request.user, **body.start_arguments())
        return Response(_started(trace), status=status.HTTP_201_CREATED)


class RunningTraceListView(TraceAPIView):
    @extend_schema(responses={200: s.TraceSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        """Traces running now (or queued for a worker), newest first."""
        traces = visible_traces(request).filter(status__in=ACTIVE_STATUSES).select_related("owner")
        return Response(s.TraceSerializer(traces.order_by("-created_at"), many=True).data)


class TraceDetailView(TraceAPIView):
    @extend_schema(parameters=[TRACE_ID], responses={200: s.TraceDetailSerializer, **ERRORS})
    def get(self, request: Request, trace_id: str) -> Response:
        """One trace with its goal tree and sub-traces."""
        trace = self.visible_trace(request, trace_id)
        return Response(s.TraceDetailSerializer(trace).data)

    @extend_schema(
        parameters=[
            TRACE_ID,
            OpenApiParameter(
                "force", bool, description="staff: stop the trace's runs first instead of answering 409"
            ),
        ],
        request=None,
        responses={200: s.TraceDeletedSerializer, **CONTROL_ERRORS},
    )
    def delete(self, request: Request, trace_id: str) -> Response:
        """Delete a trace with its sub-traces, messages, events, workspace and files (owner or staff)."""
        force = _flag(request, "force")
        deleted = delete_services.trace_delete(user=request.user, trace_id=trace_id, force=force)
        return Response({"trace_id": trace_id, "status": "deleted", "deleted": deleted.as_dict()})


class TraceMessagesView(TraceAPIView):
    @extend_schema(
        parameters=[TRACE_ID, r.MessagesQuerySerializer],
        responses={200: s.MessageSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, trace_id: str) -> Response:
        """The main path (root to head) or every message, side branches included, by sequence;
        with `goal`, only the messages recorded under that goal.

        Page through a long trace with `after` (the last sequence you have) and `limit`.
        """
        query = r.MessagesQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        after, limit = query.validated_data["after"], query.validated_data["limit"]
        trace = self.visible_trace(request, trace_id)
        goal_id, main_path = query.validated_data["goal"], query.validated_data["mode"] == "main_path"
        if goal_id is not None:
            if not Goal.objects.filter(trace=trace, goal_id=goal_id).exists():
                raise NotFound(f"trace {trace.trace_id!r} has no goal {goal_id!r}")
            head = trace.head_sequence if main_path else None
            messages: Any = trace_goal_messages(trace_id=trace.trace_id, goal_id=goal_id, head_sequence=head)
            messages = messages.filter(sequence__gt=after)
        elif not main_path:
            messages = trace_messages(trace_id=trace.trace_id).filter(sequence__gt=after)
        else:
            messages = trace_main_path(
                trace_id=trace.trace_id, head_sequence=trace.head_sequence, after_sequence=after
            )
        if limit is not None:
            messages = messages[:limit]
        return Response(s.MessageSerializer(messages, many=True).data)


class TraceEventsView(TraceAPIView):
    @extend_schema(
        parameters=[TRACE_ID, r.EventsQuerySerializer],
        responses={200: s.EventSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, trace_id: str) -> Response:
        """Events after `since` (an event id), in order: the persisted log the live stream replays.

        Page through a long log with `limit`, passing the last event id as the next `since`.
        """
        query = r.EventsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        trace = self.visible_trace(request, trace_id)
        events = trace_events(trace_id=trace.trace_id, since=query.validated_data["since"])
        if query.validated_data["limit"] is not None:
            events = events[: query.validated_data["limit"]]
        return Response(s.EventSerializer(events, many=True).data)


class TraceRunView(TraceAPIView):
    parser_classes = [MessagesJSONParser]

    @extend_schema(
        parameters=[TRACE_ID],
        request=r.TraceRunSerializer,
        responses={202: s.ControlResponseSerializer, **CONTROL_ERRORS},
    )
    def post(self, request: Request, trace_id: str) -> Response:
        """Continue (no after_sequence), rewind (after_sequence + messages) or regenerate (after_sequence, no messages)."""
        body = r.TraceRunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        trace = services.trace_continue(user=request.user, trace_id=trace_id, **body.continue_arguments())
        return Response(_started(trace), status=status.HTTP_202_ACCEPTED)


class TraceStopView(TraceAPIView):
    @extend_schema(
        parameters=[TRACE_ID], request=None, responses={202: s.ControlResponseSerializer, **CONTROL_ERRORS}
    )
    def post(self, request: Request, trace_id: str) -> Response:
        """Stop a running trace: it exits at its next checkpoint; a queued run is stopped at once."""
        trace = services.trace_stop(user=request.user, trace_id=trace_id)
        state = "stopped" if trace.status == TraceStatus.STOPPED else "stopping"
        return Response({"trace_id": trace.trace_id, "status": state}, status=status.HTTP_202_ACCEPTED)

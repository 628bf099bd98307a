"""Review queue endpoints (X6, issue 23): the queues, one queue's items and progress,
adding traces, and marking an item done / skipped. Staff only, as on the portal."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from review.models import ItemStatus, QueueItem, ReviewQueue
from review.queues import queue_progress, queues_with_progress
from review.services import queue_add_traces, queue_create, queue_item_finish
from traces.api.fields import StrictCharField
from traces.api.permissions import IsExpert
from traces.api.views import ERRORS, TraceAPIView
from traces.runner import InvalidRun, RunError

QUEUE_ID = OpenApiParameter("queue_id", int, OpenApiParameter.PATH)
ITEM_ID = OpenApiParameter("item_id", int, OpenApiParameter.PATH)


class QueueNotFound(RunError):
    status = 404


class QueueItemSerializer(serializers.ModelSerializer):
    assignee = serializers.CharField(source="assignee.get_username", allow_null=True, default=None)
    done_by = serializers.CharField(source="done_by.get_username", allow_null=True, default=None)

    class Meta:
        model = QueueItem
        fields = ("id", "trace_id", "position", "status", "assignee", "done_by", "done_at")


class QueueSerializer(serializers.ModelSerializer):
    definitions: serializers.Field = serializers.SlugRelatedField(
        slug_field="name", many=True, read_only=True
    )
    progress = serializers.SerializerMethodField()

    class Meta:
        model = ReviewQueue
        fields = ("id", "name", "description", "filters", "definitions", "created_at", "progress")

    def get_progress(self, queue: ReviewQueue) -> dict[str, int]:
        progress = self.context.get("progress", {}).get(queue.pk) or queue_progress(queue)
        return {
            "total": progress.total,
            "done": progress.done,
            "skipped": progress.skipped,
            "pending": progress.pending,
        }


class QueueCreateSerializer(serializers.Serializer):
    name = StrictCharField(max_length=200)
    description = StrictCharField(required=False, allow_blank=True, default="", max_length=5000)
    definitions = serializers.ListField(child=StrictCharField(max_length=64), required=False, default=list)
    filters = serializers.DictField(child=StrictCharField(max_length=500), required=False, default=dict)
    trace_ids = serializers.ListField(child=StrictCharField(max_length=255), required=False, default=list)
    assignees = serializers.ListField(child=StrictCharField(max_length=150), required=False, default=list)


class QueueAddSerializer(serializers.Serializer):
    trace_ids = serializers.ListField(child=StrictCharField(max_length=255), min_length=1, max_length=500)


class ItemFinishSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=ItemStatus.values)


def _experts(names: list[str]) -> list[Any]:
    found = list(get_user_model().objects.filter(username__in=names, is_staff=True, is_active=True))
    missing = sorted(set(names) - {u.get_username() for u in found})
    if missing:
        raise InvalidRun(f"assignees: no active expert named {', '.join(missing)}")
    return found


class QueueAPIView(TraceAPIView):
    permission_classes = [permissions.IsAuthenticated, IsExpert]

    def queue(self, queue_id: int) -> ReviewQueue:
        found = ReviewQueue.objects.filter(pk=queue_id).first()
        if found is None:
            raise QueueNotFound(f"review queue {queue_id} does not exist")
        return found


class QueueListView(QueueAPIView):
    @extend_schema(responses={200: QueueSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        """Every review queue with its progress, newest first."""
        pairs = queues_with_progress()
        context = {"progress": {q.pk: p for q, p in pairs}}
        return Response(QueueSerializer([q for q, _ in pairs], many=True, context=context).data)

    @extend_schema(request=QueueCreateSerializer, responses={201: QueueSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        """A queue of the traces `filters` select (the trace list's parameters) and/or
        `trace_ids`, shared round-robin among `assignees` (experts' usernames)."""
        body = QueueCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        queue = queue_create(
            user=request.user,
            name=data["name"],
            description=data["description"],
            definitions=data["definitions"],
            filters=data["filters"],
            trace_ids=data["trace_ids"],
            assignees=_experts(data["assignees"]),
        )
        return Response(QueueSerializer(queue).data, status=status.HTTP_201_CREATED)


class QueueDetailView(QueueAPIView):
    @extend_schema(parameters=[QUEUE_ID], responses={200: QueueSerializer, **ERRORS})
    def get(self, request: Request, queue_id: int) -> Response:
        queue = self.queue(queue_id)
        data = dict(QueueSerializer(queue).data)
        items = queue.items.select_related("assignee", "done_by").order_by("position", "id")
        data["items"] = QueueItemSerializer(items, many=True).data
        return Response(data)


class QueueItemsView(QueueAPIView):
    @extend_schema(
        parameters=[QUEUE_ID], request=QueueAddSerializer, responses={200: QueueSerializer, **ERRORS}
    )
    def post(self, request: Request, queue_id: int) -> Response:
        """Append traces (those already in the queue stay where they are)."""
        queue = self.queue(queue_id)
        body = QueueAddSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        added = queue_add_traces(user=request.user, queue=queue, trace_ids=body.validated_data["trace_ids"])
        return Response({**QueueSerializer(queue).data, "added": added})


class QueueItemView(QueueAPIView):
    @extend_schema(
        operation_id="review_queue_item_finish",
        parameters=[QUEUE_ID, ITEM_ID],
        request=ItemFinishSerializer,
        responses={200: QueueItemSerializer, **ERRORS},
    )
    def post(self, request: Request, queue_id: int, item_id: int) -> Response:
        """Mark an item done or skipped (or pending again)."""
        queue = self.queue(queue_id)
        item = queue.items.filter(pk=item_id).first()
        if item is None:
            raise QueueNotFound(f"review queue {queue_id} has no item {item_id}")
        body = ItemFinishSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        item = queue_item_finish(user=request.user, item=item, status=body.validated_data["status"])
        return Response(QueueItemSerializer(item).data)

"""ListTasks: the caller's top-level traces as tasks, most recently updated first
(the status timestamp, A2A CORE-LIST-003), cursor-paginated.

The page token is the (updated_at, trace_id) of the page's last task, base64-encoded:
the next page starts strictly after it in the same order (a task updated while a
client pages moves to the front and is not repeated). Sub-traces (delegations, questions
to humans) are not tasks of their own: they are parts of their parent's task.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any

from a2a.types import a2a_pb2 as pb
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import validate_page_size
from django.db.models import Q, QuerySet

from traces.a2a_protocol import tasks
from traces.models import Trace
from traces.selectors import traces_visible_to


def _token(trace: Trace) -> str:
    raw = json.dumps([trace.updated_at.isoformat(), trace.trace_id])
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _after(token: str) -> Q:
    try:
        updated, trace_id = json.loads(base64.urlsafe_b64decode(token.encode()))
        when = datetime.fromisoformat(updated)
    except (ValueError, TypeError, binascii.Error):
        raise InvalidParamsError(message="page_token is not one this server gave") from None
    return Q(updated_at__lt=when) | Q(updated_at=when, trace_id__lt=trace_id)


def _filtered(user: Any, request: pb.ListTasksRequest) -> QuerySet[Trace]:
    found = traces_visible_to(user).filter(parent_trace__isnull=True)
    if request.context_id:
        found = found.filter(
            Q(context__a2a__context_id=request.context_id)
            | Q(pk=request.context_id, context__a2a__context_id__isnull=True)
        )
    if request.status:
        found = tasks.traces_in_state(found, request.status)
    if request.HasField("status_timestamp_after"):
        found = found.filter(updated_at__gt=request.status_timestamp_after.ToDatetime(tzinfo=UTC))
    return found


def tasks_list(*, user: Any, request: pb.ListTasksRequest) -> pb.ListTasksResponse:
    size = DEFAULT_LIST_TASKS_PAGE_SIZE
    if request.HasField("page_size"):
        validate_page_size(request.page_size)
        size = request.page_size
    history_length = request.history_length if request.HasField("history_length") else None
    found = _filtered(user, request)
    total = found.count()
    ordered = found.order_by("-updated_at", "-trace_id")
    if request.page_token:
        ordered = ordered.filter(_after(request.page_token))
    page = list(ordered[: size + 1])
    more, page = len(page) > size, page[:size]
    response = pb.ListTasksResponse(
        page_size=size,
        total_size=total,
        next_page_token=_token(page[-1]) if more else "",
    )
    with_artifacts = request.include_artifacts if request.HasField("include_artifacts") else False
    response.tasks.extend(
        tasks.task_of(trace, history_length=history_length, with_artifacts=with_artifacts) for trace in page
    )
    return response

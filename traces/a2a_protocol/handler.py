"""The A2A operations on traces: the SDK's RequestHandler, served by its JSON-RPC and
HTTP+JSON dispatchers (traces/a2a_protocol/app.py). Thin: each operation calls the
send module, a service or a read, through database_sync_to_async.

Push notifications and the extended agent card are not offered (the card says so);
their operations answer PushNotificationNotSupportedError and
UnsupportedOperationError (A2A CORE-CAP-001, CORE-CAP-003).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from typing import Any

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler, validate_request_params
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import validate_history_length
from channels.db import database_sync_to_async
from django.conf import settings

from traces.a2a_protocol import listing, send, tasks, updates
from traces.models import ACTIVE_STATUSES, Trace, TraceStatus
from traces.runner import RunConflict, TraceNotFound
from traces.services.runs import trace_stop, trace_stop_waiting

S = pb.TaskState


class AgentsiteUser(User):
    """The Django user the request's token named (traces/a2a_protocol/app.py)."""

    def __init__(self, user: Any) -> None:
        self.django_user = user

    @property
    def is_authenticated(self) -> bool:
        return bool(getattr(self.django_user, "is_authenticated", False))

    @property
    def user_name(self) -> str:
        return str(self.django_user.get_username()) if self.is_authenticated else ""


def user_of(context: ServerCallContext) -> Any:
    user = context.user
    if not isinstance(user, AgentsiteUser) or not user.is_authenticated:
        raise PermissionError("an A2A call reached the handler without an authenticated user")
    return user.django_user


def _history_length(config: Any) -> int | None:
    validate_history_length(config)
    return config.history_length if config is not None and config.HasField("history_length") else None


def _task(*, user: Any, trace_id: str, history_length: int | None) -> pb.Task | None:
    trace = tasks.visible_task(user, trace_id)
    return tasks.task_of(trace, history_length=history_length) if trace is not None else None


def _status(trace_id: str) -> str:
    return Trace.objects.values_list("status", flat=True).get(pk=trace_id)


def _cancel(*, user: Any, trace_id: str) -> pb.Task:
    trace = tasks.visible_task(user, trace_id)
    if trace is None:
        raise TaskNotFoundError(message=f"task {trace_id!r} does not exist")
    state = tasks.task_state(trace)
    if state in tasks.TERMINAL_STATES or (state == S.TASK_STATE_INPUT_REQUIRED and trace.status != "waiting"):
        raise TaskNotCancelableError(
            message=f"task {trace_id!r} is {pb.TaskState.Name(state)} and cannot be canceled"
        )
    try:
        if trace.status == TraceStatus.WAITING:
            trace = trace_stop_waiting(user=user, trace_id=trace_id, reason="canceled by an A2A client")
        else:
            trace = trace_stop(user=user, trace_id=trace_id)
    except (RunConflict, TraceNotFound) as exc:
        raise TaskNotCancelableError(message=str(exc)) from None
    return tasks.task_of(trace)


class TraceRequestHandler(RequestHandler):
    """A2A tasks are traces (traces/a2a_protocol/tasks.py has the state mapping)."""

    @validate_request_params
    async def on_get_task(self, params: pb.GetTaskRequest, context: ServerCallContext) -> pb.Task | None:
        found = await database_sync_to_async(_task)(
            user=user_of(context), trace_id=params.id, history_length=_history_length(params)
        )
        if found is None:
            raise TaskNotFoundError(message=f"task {params.id!r} does not exist")
        return found

    @validate_request_params
    async def on_list_tasks(
        self, params: pb.ListTasksRequest, context: ServerCallContext
    ) -> pb.ListTasksResponse:
        _history_length(params)
        return await database_sync_to_async(listing.tasks_list)(user=user_of(context), request=params)

    @validate_request_params
    async def on_cancel_task(
        self, params: pb.CancelTaskRequest, context: ServerCallContext
    ) -> pb.Task | None:
        return await database_sync_to_async(_cancel)(user=user_of(context), trace_id=params.id)

    @validate_request_params
    async def on_message_send(
        self, params: pb.SendMessageRequest, context: ServerCallContext
    ) -> pb.Task | pb.Message:
        user = user_of(context)
        history_length = _history_length(params.configuration)
        trace, _ = await database_sync_to_async(send.message_send)(user=user, request=params)
        if not params.configuration.return_immediately:
            await self._settled(trace.trace_id)
        found = await database_sync_to_async(_task)(
            user=user, trace_id=trace.trace_id, history_length=history_length
        )
        if found is None:  # deleted meanwhile
            raise TaskNotFoundError(message=f"task {trace.trace_id!r} does not exist")
        return found

    async def _settled(self, trace_id: str) -> None:
        """Wait until the task is no longer submitted or working (it ended or needs
        input), at most AGENT_A2A_BLOCKING_TIMEOUT seconds (then it answers as it is)."""
        deadline = time.monotonic() + settings.AGENT_A2A_BLOCKING_TIMEOUT
        read = database_sync_to_async(_status)
        while await read(trace_id) in ACTIVE_STATUSES and time.monotonic() < deadline:
            await asyncio.sleep(settings.AGENT_A2A_POLL_SECONDS)

    @validate_request_params
    async def on_message_send_stream(
        self, params: pb.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[updates.Update]:
        user = user_of(context)
        trace, cursor = await database_sync_to_async(send.message_send)(user=user, request=params)
        task = await database_sync_to_async(_task)(
            user=user, trace_id=trace.trace_id, history_length=_history_length(params.configuration)
        )
        if task is not None:
            yield task
        async for update in updates.stream(trace.trace_id, cursor):
            yield update

    @validate_request_params
    async def on_subscribe_to_task(
        self, params: pb.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[updates.Update]:
        found = await database_sync_to_async(updates.snapshot)(user=user_of(context), trace_id=params.id)
        if found is None:
            raise TaskNotFoundError(message=f"task {params.id!r} does not exist")
        trace, task = found
        if task.status.state in tasks.TERMINAL_STATES:
            raise UnsupportedOperationError(
                message=f"task {params.id!r} is {pb.TaskState.Name(task.status.state)}; "
                "a task in a terminal state has no updates to subscribe to (GetTask reads it)"
            )
        yield task
        async for update in updates.stream(trace.trace_id, trace.last_event_id):
            yield update

    async def on_create_task_push_notification_config(
        self, params: pb.TaskPushNotificationConfig, context: ServerCallContext
    ) -> pb.TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: pb.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> pb.TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: pb.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> pb.ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: pb.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: pb.GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> pb.AgentCard:
        # CORE-CAP-003: the card says extendedAgentCard false, so UnsupportedOperationError
        raise UnsupportedOperationError(message="this agent has no extended agent card")

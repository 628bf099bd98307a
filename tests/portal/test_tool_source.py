"""The trace page names the MCP server a tool call went to (issue 20): the tool_result
event's `source`, as traces/runner/calls.py copies it from the result's metadata."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from tests.factories import make_trace, make_user
from traces.models import TraceEvent

pytestmark = pytest.mark.django_db


def test_the_timeline_shows_which_server_a_tool_call_went_to(client: Any) -> None:
    owner = make_user("owner")
    trace = make_trace(owner, messages=[("user", "count")])
    for event_id, payload in enumerate(
        [
            {"name": "mcp__counter__increment", "is_error": False, "source": "mcp:counter"},
            {"name": "read", "is_error": False},
        ],
        start=1,
    ):
        TraceEvent.objects.create(
            trace=trace, event_id=event_id, type="tool_result", payload=payload, created_at=timezone.now()
        )
    client.force_login(owner)
    page = client.get(f"/traces/{trace.pk}/").content.decode()
    assert page.count('class="chip small ev-source"') == 1  # the built-in call has no source
    assert ">mcp:counter</span>" in page

"""Messages by goal (seed 004 TraceStore `get_messages_by_goal`): the API's `goal` filter and the portal's goal page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.scripted_llm import Reply, ToolCall
from traces.models import Goal, Message, Trace
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@pytest.fixture
def rewound(runner, llm, integrator) -> tuple[str, str, int]:
    """A trace with goal "Survey", whose list_files call was rewound off the main path.

    Returns (trace id, the goal's id, the sequence of the rewound tool result)."""
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("goal", {"action": "add", "description": "Survey"})]),
            Reply(text="first"),
        ],
    )
    trace_id = runner.run_result(user("survey"), RunConfig(uid=str(integrator.pk))).trace_id
    cut = Message.objects.get(trace_id=trace_id, role="assistant", content="first").sequence
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})]), Reply(text="second")])
    runner.run_result(user("look at the files"), RunConfig(trace_id=trace_id))
    listed = Message.objects.get(trace_id=trace_id, role="tool", name="list_files").sequence
    llm.script("scripted", [Reply(text="third")])
    third = runner.run_result(user("never mind"), RunConfig(trace_id=trace_id, after_sequence=cut))
    assert third.status == "completed"
    goal_id = Goal.objects.get(trace_id=trace_id, description="Survey").goal_id
    Trace.objects.filter(pk=trace_id).update(owner=integrator)
    return trace_id, goal_id, listed


def test_the_goal_filter_gives_the_goals_messages_on_the_main_path_or_on_every_branch(
    rewound, api_client, integrator
):
    trace_id, goal_id, listed = rewound
    client = api_client(integrator)
    url = f"/api/traces/{trace_id}/messages"

    main = client.get(url, {"goal": goal_id}).json()
    every = client.get(url, {"goal": goal_id, "mode": "all"}).json()

    expected_every = list(
        Message.objects.filter(trace_id=trace_id, goal_id=goal_id)
        .order_by("sequence")
        .values_list("sequence", flat=True)
    )
    path = [m["sequence"] for m in client.get(url).json()]
    assert [m["sequence"] for m in every] == expected_every and listed in expected_every
    assert [m["sequence"] for m in main] == [s for s in expected_every if s in path]
    assert listed not in [m["sequence"] for m in main]  # rewound off the main path
    assert "first" in [m["content"] for m in main]
    assert {m["goal_id"] for m in main + every} == {goal_id}
    paged = client.get(url, {"goal": goal_id, "mode": "all", "after": expected_every[0], "limit": 1}).json()
    assert [m["sequence"] for m in paged] == expected_every[1:2]


def test_an_unknown_goal_is_404_and_another_users_trace_stays_hidden(
    rewound, api_client, stranger, integrator
):
    trace_id, goal_id, _ = rewound
    missing = api_client(integrator).get(f"/api/traces/{trace_id}/messages", {"goal": "999"})
    assert missing.status_code == 404
    assert missing.json() == {"error": f"trace {trace_id!r} has no goal '999'", "code": "not_found"}
    hidden = api_client(stranger).get(f"/api/traces/{trace_id}/messages", {"goal": goal_id})
    assert hidden.status_code == 404
    too_long = api_client(integrator).get(f"/api/traces/{trace_id}/messages", {"goal": "x" * 65})
    assert too_long.status_code == 400 and "goal" in too_long.json()["fields"]


def test_the_portal_shows_a_goals_messages_linked_from_the_plan(rewound, integrator, stranger):
    trace_id, goal_id, listed = rewound
    client = Client()
    client.force_login(integrator)
    page = client.get(f"/traces/{trace_id}/").content.decode()
    link = f"/traces/{trace_id}/goals/{goal_id}/messages/"
    assert f'href="{link}"' in page

    main = client.get(link).content.decode()
    every = client.get(link, {"all": "1"}).content.decode()
    assert "Goal 1: Survey" in main and "first" in main
    assert "list_files" not in main.split('id="messages"')[1]
    assert "list_files" in every.split('id="messages"')[1]  # the rewound call, on a side branch
    assert client.get(f"/traces/{trace_id}/goals/999/messages/").status_code == 404
    other = Client()
    other.force_login(stranger)
    assert other.get(link).status_code == 404
    assert Client().get(link).status_code == 302  # to the login page

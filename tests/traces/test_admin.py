from __future__ import annotations

import re

import pytest

from tests.scripted_llm import Reply, ToolCall
from traces.models import Message, Trace
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def expert_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("expert", "expert@example.com", "pw-expert-123")
    client.force_login(user)
    return client


def test_admin_lists_and_shows_a_trace_with_its_goals_and_messages(expert_client, runner, llm):
    llm.script(
        "scripted",
        [Reply(tool_calls=[ToolCall("goal", {"action": "add", "description": "Plan it"})]), Reply(text="ok")],
    )
    result = runner.run_result([{"role": "user", "content": "admin check"}], RunConfig(name="Admin check"))

    listing = expert_client.get("/admin/traces/trace/?status__exact=completed")
    assert listing.status_code == 200 and b"Admin check" in listing.content
    detail = expert_client.get(f"/admin/traces/trace/{result.trace_id}/change/")
    assert detail.status_code == 200 and b"Plan it" in detail.content
    messages = expert_client.get(f"/admin/traces/message/?q={result.trace_id}")
    assert messages.status_code == 200 and f"{result.trace_id}-0003".encode() in messages.content
    events = expert_client.get("/admin/traces/traceevent/?type__exact=final")
    assert events.status_code == 200 and result.trace_id.encode() in events.content


def test_admin_stop_action_flags_running_traces(expert_client):
    trace = Trace.objects.create(trace_id="t-run", status="running")
    done = Trace.objects.create(trace_id="t-done", status="completed")
    response = expert_client.post(
        "/admin/traces/trace/",
        {"action": "stop_traces", "_selected_action": [trace.pk, done.pk]},
        follow=True,
    )
    assert response.status_code == 200 and b"Asked 1 running trace" in response.content
    assert Trace.objects.get(pk="t-run").stop_requested
    assert not Trace.objects.get(pk="t-done").stop_requested


def test_admin_rewinds_a_trace_at_a_message_with_new_text_and_regenerates(
    expert_client, runner, llm, inline_worker
):
    from traces.selectors import trace_main_path

    llm.script("scripted", ["first answer"])
    result = runner.run_result([{"role": "user", "content": "hello"}], RunConfig())
    user_message = Message.objects.get(trace_id=result.trace_id, sequence=2)
    url = "/admin/traces/message/"

    form = expert_client.post(url, {"action": "rewind_here", "_selected_action": [user_message.pk]})
    assert form.status_code == 200 and b"Rewind and run" in form.content
    llm.script("scripted", ["rewound answer"])
    with inline_worker():
        done = expert_client.post(
            url,
            {
                "action": "rewind_here",
                "_selected_action": [user_message.pk],
                "apply": "1",
                "text": "say it again",
            },
            follow=True,
        )
    assert b"Rewound trace" in done.content
    path = trace_main_path(trace_id=result.trace_id)
    assert [m.content for m in path if m.role in ("user", "assistant")][-2:] == [
        "say it again",
        "rewound answer",
    ]

    llm.script("scripted", ["regenerated answer"])
    with inline_worker():
        expert_client.post(
            url, {"action": "regenerate_from_here", "_selected_action": [user_message.pk]}, follow=True
        )
    path = trace_main_path(trace_id=result.trace_id)
    assert path[-1].content == "regenerated answer" and path[-1].parent_sequence in (2, path[-2].sequence)
    assert "say it again" not in [m.content for m in path]  # the rewound branch is off the main path now

    two = expert_client.post(
        url, {"action": "regenerate_from_here", "_selected_action": [m.pk for m in path[:2]]}, follow=True
    )
    assert b"Select exactly one message." in two.content


def test_admin_approves_a_tool_for_the_rest_of_the_run_and_shows_the_run_settings(expert_client, runner, llm):
    from traces.models import Approval

    llm.script("scripted", [Reply(tool_calls=[ToolCall("write", {"path": "a.txt", "content": "x"})])])
    waiting = runner.run_result(
        [{"role": "user", "content": "write"}],
        RunConfig(name="gated", confirm_policy="ask-risky", max_iterations=6),
    )
    approval = Approval.objects.get(trace_id=waiting.trace_id)

    detail = expert_client.get(f"/admin/traces/trace/{waiting.trace_id}/change/")
    assert b"ask-risky" in detail.content and b"max_iterations" in detail.content
    response = expert_client.post(
        "/admin/traces/approval/",
        {"action": "approve_for_run", "_selected_action": [approval.pk]},
        follow=True,
    )

    assert response.status_code == 200 and b"Approved 1 call(s)" in response.content
    approval.refresh_from_db()
    assert (approval.status, approval.scope) == ("approved", "run")
    assert Trace.objects.get(pk=waiting.trace_id).context["approved_tools"] == {"write": approval.pk}


def test_the_changelist_cuts_long_names_and_keeps_numbers_on_one_line(expert_client):
    name = "Summarise every quarterly report of the last ten years for the board, by region " * 2
    Trace.objects.create(trace_id="t-long", name=name.strip(), status="completed", total_tokens=1234567)

    page = expert_client.get("/admin/traces/trace/").content.decode()

    assert f'title="{name.strip()}"' in page  # whole on hover
    shown = re.search(r'<span title="[^"]*">([^<]*)</span>', page.split('class="field-short_name"')[1])
    assert shown and len(shown.group(1)) <= 60 and shown.group(1).endswith("…")
    assert "1,234,567" in page and 'title="t-long"' in page
    assert "traces/admin.css" in page

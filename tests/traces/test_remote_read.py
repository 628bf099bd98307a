"""Reading a remote sub-trace from its parent (issue 26 item 5) when it cannot be read:
not a child (404), its agent not configured or down (503), never a 500; the page
renders a remote conversation sanitised. The read that succeeds is in
tests/e2e/test_remote_agents.py (two live instances)."""

from __future__ import annotations

import urllib.parse

import pytest
from django.template.loader import render_to_string
from django.test import Client

from tests.factories import make_trace
from traces.collaboration.remote import RemoteTrace

pytestmark = pytest.mark.django_db

REMOTE = "agent://127.0.0.1:9/task-1"


@pytest.fixture
def parent(integrator):
    return make_trace(
        integrator, context={"sub_trace_calls": {"call-1": {"mode": "delegate", "sub_trace_ids": [REMOTE]}}}
    )


def url(trace, remote_id: str = REMOTE) -> str:
    return f"/api/traces/{trace.trace_id}/remote?id={urllib.parse.quote(remote_id, safe='')}"


def test_a_remote_child_whose_agent_is_down_is_a_503_with_the_reason(
    api_client, integrator, parent, settings
):
    settings.AGENT_REMOTE_AGENTS = {"127.0.0.1:9": "key"}
    settings.AGENT_REMOTE_REQUEST_TIMEOUT = 2
    answer = api_client(integrator).get(url(parent))
    assert answer.status_code == 503 and answer.json()["code"] == "remote_unavailable"
    assert "unreachable" in answer.json()["error"] and "key" not in answer.json()["error"]


def test_an_unconfigured_agent_is_a_503_and_a_stranger_or_a_non_child_a_404(
    api_client, integrator, stranger, parent, settings
):
    settings.AGENT_REMOTE_AGENTS = {}
    unconfigured = api_client(integrator).get(url(parent))
    assert unconfigured.status_code == 503 and "no remote agent is configured" in unconfigured.json()["error"]
    assert api_client(stranger).get(url(parent)).status_code == 404
    other = api_client(integrator).get(url(parent, "agent://127.0.0.1:9/other"))
    assert other.status_code == 404 and set(other.json()) == {"error", "code"}
    assert api_client(integrator).get(f"/api/traces/{parent.trace_id}/remote").status_code == 400
    assert api_client().get(url(parent)).status_code == 401


def test_the_portal_page_says_why_or_404s(integrator, stranger, parent, settings):
    settings.AGENT_REMOTE_AGENTS = {}
    client = Client()
    client.force_login(integrator)
    page = client.get(f"/traces/{parent.trace_id}/remote/?id={urllib.parse.quote(REMOTE)}")
    assert page.status_code == 503 and "no remote agent is configured" in page.content.decode()
    assert client.get(f"/traces/{parent.trace_id}/remote/?id=agent://x/y").status_code == 404
    client.force_login(stranger)
    assert client.get(f"/traces/{parent.trace_id}/remote/?id={urllib.parse.quote(REMOTE)}").status_code == 404


def test_the_page_renders_the_remote_conversation_sanitised(parent):
    found = RemoteTrace(
        remote_id=REMOTE,
        agent="peer",
        status="completed",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "agent", "content": "<script>x()</script>**teal**"},
        ],
        message_count=2,
    )
    html = render_to_string(
        "portal/remote_trace.html", {"trace": parent, "remote_id": REMOTE, "remote": found, "error": ""}
    )
    assert "<strong>teal</strong>" in html and "<script>x()" not in html and "2 messages" in html

"""Who may see and steer which trace (W4): expert (staff), integrator, stranger, anonymous."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from tests.factories import make_trace
from traces.models import Trace

pytestmark = pytest.mark.django_db

CHAT = [("user", "hi"), ("assistant", "hello")]


def create_token(username: str) -> str:
    out = StringIO()
    call_command("create_token", username, stdout=out)
    return out.getvalue().strip()


def token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_anonymous_requests_are_refused_with_401(api_client, integrator):
    trace = make_trace(integrator)
    client = api_client()

    for method, url in [
        ("get", "/api/traces"),
        ("get", "/api/traces/running"),
        ("get", f"/api/traces/{trace.trace_id}"),
        ("post", "/api/traces"),
        ("post", f"/api/traces/{trace.trace_id}/run"),
        ("post", f"/api/traces/{trace.trace_id}/stop"),
    ]:
        response = getattr(client, method)(url, {}, format="json")
        assert response.status_code == 401, url
        assert response.json()["code"] == "not_authenticated"
        assert response["WWW-Authenticate"] == "Token"


def test_create_token_prints_a_key_that_authenticates(integrator):
    key = create_token("integrator")

    assert len(key) == 40
    response = token_client(key).get("/api/traces")
    assert response.status_code == 200


def test_create_token_rotates_the_old_key_out(integrator):
    old = create_token("integrator")
    new = create_token("integrator")

    assert old != new
    assert token_client(old).get("/api/traces").status_code == 401
    assert token_client(new).get("/api/traces").status_code == 200


def test_create_token_for_an_unknown_user_fails_clearly(db):
    with pytest.raises(CommandError, match="no user named 'ghost'"):
        call_command("create_token", "ghost", stdout=StringIO())


def test_a_bad_token_is_401(db):
    response = token_client("0" * 40).get("/api/traces")

    assert response.status_code == 401
    assert response.json() == {"error": "Invalid token.", "code": "authentication_failed"}


def test_session_login_works_for_the_portal(integrator):
    client = APIClient()
    assert client.login(username="integrator", password="integrator-pw")

    assert client.get("/api/traces").status_code == 200


def test_a_user_lists_only_their_own_traces(api_client, integrator, stranger):
    mine = make_trace(integrator)
    make_trace(stranger)

    rows = api_client(integrator).get("/api/traces").json()["results"]

    assert [r["trace_id"] for r in rows] == [mine.trace_id]


def test_stranger_cannot_see_the_integrators_trace(api_client, integrator, stranger):
    trace = make_trace(integrator, messages=CHAT, status="running", heartbeat_at=timezone.now())
    client = api_client(stranger)

    assert client.get("/api/traces").json()["count"] == 0
    assert client.get("/api/traces/running").json() == []
    for suffix in ("", "/messages", "/events"):
        response = client.get(f"/api/traces/{trace.trace_id}{suffix}")
        assert response.status_code == 404
        assert response.json()["error"] == f"trace {trace.trace_id!r} does not exist"


def test_stranger_cannot_steer_the_integrators_trace(api_client, integrator, stranger, llm):
    done = make_trace(integrator, messages=CHAT)
    running = make_trace(integrator, messages=CHAT, status="running", heartbeat_at=timezone.now())
    client = api_client(stranger)

    run = client.post(
        f"/api/traces/{done.trace_id}/run", {"messages": [{"role": "user", "content": "x"}]}, format="json"
    )
    stop = client.post(f"/api/traces/{running.trace_id}/stop")

    assert run.status_code == 404 and stop.status_code == 404
    assert Trace.objects.get(pk=done.pk).status == "completed"
    assert Trace.objects.get(pk=running.pk).stop_requested is False


def test_expert_sees_and_steers_every_trace(api_client, expert, integrator, stranger):
    theirs = make_trace(integrator, status="running", heartbeat_at=timezone.now())
    other = make_trace(stranger)
    client = api_client(expert)

    listed = {r["trace_id"] for r in client.get("/api/traces").json()["results"]}
    assert listed == {theirs.trace_id, other.trace_id}
    assert client.get(f"/api/traces/{theirs.trace_id}").json()["owner"] == "integrator"
    assert client.post(f"/api/traces/{theirs.trace_id}/stop").status_code == 202
    assert Trace.objects.get(pk=theirs.pk).stop_requested is True


def test_a_trace_started_by_token_belongs_to_the_tokens_user(
    integrator, llm, django_capture_on_commit_callbacks
):
    client = token_client(create_token("integrator"))

    with django_capture_on_commit_callbacks(execute=False):
        response = client.post("/api/traces", {"task": "hi"}, format="json")

    assert response.status_code == 201
    assert Trace.objects.get(pk=response.json()["trace_id"]).owner == integrator

"""Notifications: signed webhooks and e-mail when a run waits, needs attention or fails.

Real runs through the scripted model; a real HTTP receiver on 127.0.0.1; Django's
locmem mail backend; django-q2 tasks run inline at commit (`inline_worker`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import runpy
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core import mail
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from memory.presets import Preset, preset_save
from tests.factories import make_user
from tests.scripted_llm import Reply, ToolCall
from traces.models import Approval, Trace, TraceEvent
from traces.notifications.webhooks import verify_signature
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db

SECRET = "whsec-test-not-a-real-secret"
PUBLIC = "https://agents.example.test"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


class Receiver:
    """An HTTP server that records every POST; answers 500 to the first `fail_first`."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.fail_first = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.requests.append(Received(self.path, headers, body, time.monotonic()))
                status = 500 if len(receiver.requests) <= receiver.fail_first else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def payloads(self) -> list[dict[str, Any]]:
        return [json.loads(r.body) for r in self.requests]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def notify(settings: Any, receiver: Receiver) -> Receiver:
    """Webhooks to the receiver (a token in its URL, as chat webhooks have), fast retries."""
    settings.AGENT_NOTIFY_WEBHOOK_URLS = [receiver.url("/hooks/agentsite?token=url-token")]
    settings.AGENT_NOTIFY_WEBHOOK_SECRET = SECRET
    settings.AGENT_NOTIFY_RETRIES = 3
    settings.AGENT_NOTIFY_BACKOFF = 0.05
    settings.AGENT_NOTIFY_BACKOFF_MAX = 0.5
    settings.AGENT_NOTIFY_TIMEOUT = 5.0
    settings.AGENT_PUBLIC_URL = PUBLIC
    settings.AGENT_NOTIFY_EMAIL = False
    return receiver


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def start_waiting_run(runner: Any, llm: Any, owner: Any, **config: Any) -> Trace:
    llm.script(
        "scripted", [Reply(tool_calls=[ToolCall("write", {"path": "out.txt", "content": "model text"})])]
    )
    result = runner.run_result(
        user("please save the report"),
        RunConfig(confirm_policy="ask-risky", owner_id=owner.pk, **config),
    )
    return Trace.objects.get(pk=result.trace_id)


def expected_signature(timestamp: str, body: bytes) -> str:
    mac = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def test_a_waiting_approval_posts_a_signed_webhook_with_ids_and_links_but_no_arguments(
    runner, llm, integrator, inline_worker, notify
):
    with inline_worker():
        trace = start_waiting_run(runner, llm, integrator)

    (request,) = notify.requests
    timestamp, body = request.headers["x-agentsite-timestamp"], request.body
    assert request.path == "/hooks/agentsite?token=url-token"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-agentsite-signature"] == expected_signature(timestamp, body)
    assert abs(int(timestamp) - time.time()) < 60
    signed = {
        "secret": SECRET,
        "timestamp": timestamp,
        "signature_header": expected_signature(timestamp, body),
    }
    assert verify_signature(body=body, **signed)
    assert not verify_signature(body=body, **signed, now=int(timestamp) + 301)  # a replay, later
    assert not verify_signature(body=body.replace(b"waiting", b"xaiting"), **signed)
    assert not verify_signature(body=body, **{**signed, "secret": "another secret"})

    approval = Approval.objects.get(trace=trace)
    payload = json.loads(body)
    assert (payload["kind"], payload["trace_id"], payload["status"]) == (
        "waiting_approval",
        trace.trace_id,
        "waiting",
    )
    assert payload["portal"] == f"{PUBLIC}/traces/{trace.trace_id}/"
    assert payload["api"] == f"{PUBLIC}/api/traces/{trace.trace_id}"
    assert payload["approvals"] == [
        {
            "approval_id": approval.pk,
            "trace_id": trace.trace_id,
            "tool": "write",
            "risk": "risky",
            "api": f"{PUBLIC}/api/traces/{trace.trace_id}/approvals/{approval.pk}",
        }
    ]
    for private in (b"model text", b"out.txt", b"save the report", SECRET.encode()):
        assert private not in body
    assert request.headers["x-agentsite-delivery"] == payload["id"]
    event = TraceEvent.objects.get(trace=trace, type="notification")
    assert event.payload == {
        "id": payload["id"],
        "kind": "waiting_approval",
        "keys": [f"approval:{approval.pk}"],
    }
    assert trace.status == "waiting" and trace.run_owner == ""


def test_a_receiver_answering_500_is_retried_with_growing_waits_until_it_accepts(
    runner, llm, integrator, inline_worker, notify
):
    notify.fail_first = 2

    with inline_worker():
        start_waiting_run(runner, llm, integrator)

    assert len(notify.requests) == 3
    assert len({r.body for r in notify.requests}) == 1
    assert len({r.headers["x-agentsite-delivery"] for r in notify.requests}) == 1
    for request in notify.requests:  # each attempt signed for its own timestamp
        timestamp = request.headers["x-agentsite-timestamp"]
        assert request.headers["x-agentsite-signature"] == expected_signature(timestamp, request.body)
    first_wait = notify.requests[1].at - notify.requests[0].at
    second_wait = notify.requests[2].at - notify.requests[1].at
    assert first_wait >= 0.04 and second_wait >= 0.09  # backoff 0.05 s, doubling


def test_a_receiver_that_keeps_failing_is_given_up_after_the_attempt_limit_and_logged(
    runner, llm, integrator, inline_worker, notify, settings, caplog
):
    notify.fail_first = 100
    settings.AGENT_NOTIFY_RETRIES = 2
    caplog.set_level(logging.INFO, logger="traces.notifications")

    with inline_worker():
        trace = start_waiting_run(runner, llm, integrator)

    assert len(notify.requests) == 3
    trace.refresh_from_db()
    assert trace.status == "waiting" and trace.run_owner == ""  # the run is untouched
    given_up = [r for r in caplog.records if "given up" in r.getMessage()]
    assert len(given_up) == 1 and given_up[0].levelno == logging.WARNING
    assert "after 3 attempts: HTTP 500" in given_up[0].getMessage()
    assert SECRET not in caplog.text and "url-token" not in caplog.text


def test_an_unreachable_webhook_is_retried_then_given_up_while_the_others_get_theirs(
    runner, llm, integrator, inline_worker, notify, settings, caplog
):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    settings.AGENT_NOTIFY_WEBHOOK_URLS = [f"http://127.0.0.1:{closed}/hook", notify.url("/ok")]
    settings.AGENT_NOTIFY_RETRIES = 1

    with inline_worker():
        start_waiting_run(runner, llm, integrator)

    assert [r.path for r in notify.requests] == ["/ok"]
    assert "given up after 2 attempts: ConnectError" in caplog.text


def test_a_failed_run_notifies_with_only_the_clipped_first_line_of_its_error(
    runner, llm, integrator, inline_worker, notify
):
    llm.script("scripted", [Reply(status=400, error="refused " + "x" * 300 + "\nMODEL OUTPUT on line two")])

    with inline_worker():
        result = runner.run_result(user("do it"), RunConfig(owner_id=integrator.pk, stream=False))

    assert result.status == "failed"
    (payload,) = notify.payloads()
    assert (payload["kind"], payload["status"], payload["trace_id"]) == ("failed", "failed", result.trace_id)
    assert len(payload["reason"]) <= 201 and payload["reason"].endswith("…")
    assert "MODEL OUTPUT" not in notify.requests[0].body.decode()


def test_a_run_the_sweep_gives_up_on_notifies_failed(integrator, inline_worker, notify):
    from datetime import timedelta

    from django.utils import timezone

    from traces.services.sweep import runs_sweep_stale

    stale = timezone.now() - timedelta(hours=1)
    trace = Trace.objects.create(
        trace_id="t-dead",
        status="running",
        owner=integrator,
        run_token=3,
        heartbeat_at=stale,
        updated_at=stale,
    )

    with inline_worker():
        report = runs_sweep_stale()

    assert report.failed == [trace.trace_id]
    (payload,) = notify.payloads()
    assert (payload["kind"], payload["trace_id"]) == ("failed", trace.trace_id)
    assert "worker died" in payload["reason"]


@pytest.mark.parametrize(("kinds", "told"), [(None, "attention"), (["waiting_answer", "failed"], "failed")])
def test_a_run_flagged_by_a_loop_notifies_attention_or_failed_as_the_deployment_picks(
    runner, llm, integrator, inline_worker, notify, settings, kinds, told
):
    if kinds is not None:
        settings.AGENT_NOTIFY_EVENTS = kinds
    settings.AGENT_LOOP_WARNING = 2
    settings.AGENT_LOOP_CRITICAL = 3
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {"path": "."})])] * 5)

    with inline_worker():
        result = runner.run_result(user("look"), RunConfig(owner_id=integrator.pk, max_iterations=10))

    (payload,) = notify.payloads()
    assert (payload["kind"], payload["status"]) == (told, "failed")
    assert payload["reason"].startswith("loop detected")
    assert Trace.objects.get(pk=result.trace_id).needs_attention


def test_an_ask_human_wait_notifies_with_the_question(runner, llm, integrator, inline_worker, notify):
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall("ask_human", {"question": "Deploy to staging or prod?", "to": "ops lead"})
                ]
            )
        ],
    )

    with inline_worker():
        result = runner.run_result(user("deploy the app"), RunConfig(owner_id=integrator.pk))

    child = Trace.objects.get(parent_trace_id=result.trace_id)
    (payload,) = notify.payloads()
    assert (payload["kind"], payload["status"], payload["approvals"]) == ("waiting_answer", "waiting", [])
    assert payload["questions"] == [
        {
            "trace_id": child.trace_id,
            "question": "Deploy to staging or prod?",
            "portal": f"{PUBLIC}/traces/{child.trace_id}/",
            "answer_api": f"{PUBLIC}/api/traces/{child.trace_id}/answer",
        }
    ]


def test_kinds_the_deployment_did_not_pick_are_not_sent(
    runner, llm, integrator, inline_worker, notify, settings
):
    settings.AGENT_NOTIFY_EVENTS = ["failed"]

    with inline_worker():
        trace = start_waiting_run(runner, llm, integrator)

    assert notify.requests == []
    assert not TraceEvent.objects.filter(trace=trace, type="notification").exists()


def test_waiting_again_on_the_same_approval_does_not_notify_twice(
    runner, llm, integrator, inline_worker, notify
):
    with inline_worker():
        trace = start_waiting_run(runner, llm, integrator)
        again = runner.run_result([], RunConfig(trace_id=trace.trace_id))  # the call is still undecided

    assert again.status == "waiting"
    assert len(notify.requests) == 1
    assert TraceEvent.objects.filter(trace=trace, type="notification").count() == 1


def test_a_sub_agents_approval_is_told_once_by_the_waiting_parent(
    runner, llm, integrator, inline_worker, notify
):
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("agent", {"task": "write out.txt"})]),
            Reply(tool_calls=[ToolCall("write", {"path": "out.txt", "content": "from the child"})]),
        ],
    )

    with inline_worker():
        parent = runner.run_result(
            user("delegate the write"), RunConfig(confirm_policy="ask-risky", owner_id=integrator.pk)
        )

    child = Trace.objects.get(parent_trace_id=parent.trace_id)
    approval = Approval.objects.get()
    (payload,) = notify.payloads()
    assert (payload["trace_id"], payload["kind"]) == (parent.trace_id, "waiting_approval")
    assert [(a["approval_id"], a["trace_id"]) for a in payload["approvals"]] == [
        (approval.pk, child.trace_id)
    ]
    assert payload["approvals"][0]["api"].endswith(f"/api/traces/{parent.trace_id}/approvals/{approval.pk}")
    assert not TraceEvent.objects.filter(trace=child, type="notification").exists()


def test_a_presets_own_webhook_receives_its_runs_notifications(
    runner, llm, integrator, inline_worker, notify, settings
):
    settings.AGENT_NOTIFY_WEBHOOK_URLS = []
    preset_save("notified", Preset(extra={"notify_webhooks": [notify.url("/preset-hook")]}))

    with inline_worker():
        start_waiting_run(runner, llm, integrator)  # the default preset names no webhook
        trace = start_waiting_run(runner, llm, integrator, agent_type="notified")

    assert [(r.path, json.loads(r.body)["trace_id"]) for r in notify.requests] == [
        ("/preset-hook", trace.trace_id)
    ]
    assert json.loads(notify.requests[0].body)["agent_type"] == "notified"


def test_email_goes_to_the_owner_and_each_active_expert_separately(
    runner, llm, integrator, expert, inline_worker, settings
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.AGENT_NOTIFY_EMAIL = True
    settings.AGENT_PUBLIC_URL = PUBLIC
    integrator.email = "owner@example.test"
    integrator.save()
    expert.email = "Expert@example.test"
    expert.save()
    make_user("quiet-expert", staff=True)  # no address
    retired = make_user("retired-expert", staff=True)
    retired.email, retired.is_active = "retired@example.test", False
    retired.save()
    plain = make_user("plain")
    plain.email = "plain@example.test"
    plain.save()

    with inline_worker():
        trace = start_waiting_run(runner, llm, integrator)

    assert sorted(m.to[0] for m in mail.outbox) == ["Expert@example.test", "owner@example.test"]
    assert all(len(m.to) == 1 for m in mail.outbox)
    message = mail.outbox[0]
    assert message.subject == f"[agentsite] trace {trace.trace_id} waits for an approval"
    assert f"{PUBLIC}/traces/{trace.trace_id}/" in message.body and "write" in message.body
    assert "model text" not in message.body and "out.txt" not in message.body


def test_nothing_is_sent_or_recorded_when_notifications_are_not_configured(
    runner, llm, integrator, expert, inline_worker, receiver, settings
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    expert.email = "expert@example.test"
    expert.save()
    assert settings.AGENT_NOTIFY_WEBHOOK_URLS == [] and settings.AGENT_NOTIFY_EMAIL is False

    with inline_worker():
        trace = start_waiting_run(runner, llm, integrator)
        llm.script("scripted", [Reply(status=400, error="refused")])
        failed = runner.run_result(user("fail"), RunConfig(owner_id=integrator.pk, stream=False))

    assert failed.status == "failed"
    assert receiver.requests == [] and mail.outbox == []
    assert not TraceEvent.objects.filter(
        trace_id__in=[trace.trace_id, failed.trace_id], type="notification"
    ).exists()


def test_delivery_is_a_queued_task_holding_neither_url_nor_address(
    runner, llm, integrator, notify, settings, django_capture_on_commit_callbacks, workspace_root
):
    if "orm" not in settings.Q_CLUSTER:
        pytest.skip("the queue is Redis here; this test reads django-q2's ORM broker")
    from django_q.models import OrmQ

    with django_capture_on_commit_callbacks(execute=True):
        start_waiting_run(runner, llm, integrator)

    assert notify.requests == []  # the run ended without waiting for the receiver
    (queued,) = OrmQ.objects.all()
    task = queued.task
    assert task["func"] == "traces.notifications.webhooks.deliver_webhook"
    assert "url-token" not in json.dumps(task["args"])
    assert import_string(task["func"])(*task["args"]) is True
    assert len(notify.requests) == 1


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"AGENT_NOTIFY_WEBHOOK_URLS": "https://hooks.example.test/x"}, "needs AGENT_NOTIFY_WEBHOOK_SECRET"),
        (
            {
                "AGENT_NOTIFY_WEBHOOK_URLS": "ftp://hooks.example.test/t0ken",
                "AGENT_NOTIFY_WEBHOOK_SECRET": "s",
            },
            r"1 entries are not http\(s\) URLs$",
        ),
        ({"AGENT_NOTIFY_EVENTS": "failed,finished"}, "unknown kinds finished"),
        ({"AGENT_NOTIFY_RETRIES": "-1"}, "AGENT_NOTIFY_RETRIES=-1 must be >= 0"),
        ({"AGENT_NOTIFY_EMAIL": "sometimes"}, "not a boolean"),
        ({"AGENT_PUBLIC_URL": "agents.example.test"}, "is not an http"),
    ],
)
def test_bad_notification_settings_stop_start_up_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], message: str
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)

    with pytest.raises(ImproperlyConfigured, match=message):
        runpy.run_module("agentsite.settings.service")

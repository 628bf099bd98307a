"""AGENT_CONTEXT_HOOKS (R7, seed 004 「Context Injection Hooks」): hooks named in settings reach
every runner (a worker's run, `run_agent`), and the two built-in examples."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core import checks
from django.utils import timezone

from tests.factories import make_trace, make_user
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall
from traces.context_hooks import running_time_reminder, system_alerts
from traces.models import Message, TraceEvent
from traces.runner.context import default_context_hooks

ROOT = Path(__file__).resolve().parents[2]
REMINDER = "traces.context_hooks.running_time_reminder"
ALERTS = "traces.context_hooks.system_alerts"


def test_the_built_in_hooks_are_off_by_default(settings):
    assert running_time_reminder not in default_context_hooks()
    assert system_alerts not in default_context_hooks()
    settings.AGENT_CONTEXT_HOOKS = [REMINDER]
    assert default_context_hooks()[-1] is running_time_reminder


@pytest.mark.django_db
def test_a_worker_run_injects_the_hooks_named_in_settings(
    api_client, integrator, llm, inline_worker, settings
):
    settings.AGENT_CONTEXT_HOOKS = [REMINDER]
    settings.AGENT_REMINDER_MINUTES = 0
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})]), Reply(text="done")])

    with inline_worker():
        response = api_client(integrator).post(
            "/api/traces", {"messages": [{"role": "user", "content": "look"}]}, format="json"
        )

    injected = Message.objects.filter(trace_id=response.json()["trace_id"], kind="context").get()
    assert "## Reminder" in injected.content and "running for 0 minutes" in injected.content
    first_request = llm.requests_for("scripted")[0]["messages"]
    assert any("running for 0 minutes" in str(m.get("content")) for m in first_request)


@pytest.mark.e2e
def test_run_agent_injects_the_hooks_named_in_the_environment(
    tmp_path: Path, scripted_llm_server: ScriptedLLM
):
    import os

    scripted_llm_server.reset()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "DATABASE_URL"))}
    env.update(
        SQLITE_PATH=str(tmp_path / "cli.sqlite3"),
        AGENT_WORKSPACE_ROOT=str(tmp_path / "ws"),
        AGENT_MODEL="openai/scripted",
        AGENT_UTILITY_MODEL="openai/utility",
        AGENT_API_BASE=scripted_llm_server.url,
        AGENT_API_KEY="sk-test-not-a-secret",
        AGENT_CONTEXT_HOOKS=ALERTS,
        AGENT_ALERT_DISK_PERCENT="0",  # every disk is at least 0% used: the alert always shows
    )
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    scripted_llm_server.script("scripted", ["ok"])

    done = subprocess.run(
        [sys.executable, "manage.py", "run_agent", "hello"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    sent = scripted_llm_server.requests_for("scripted")[0]["messages"]
    alerts = [m["content"] for m in sent if "## System Alerts" in str(m.get("content"))]
    assert alerts and "disk" in alerts[0] and "% used where workspaces live" in alerts[0]


@pytest.mark.django_db
def test_the_reminder_counts_from_the_latest_run_segment(settings):
    settings.AGENT_REMINDER_MINUTES = 30
    trace = make_trace(make_user("owner"), created_at=timezone.now() - timedelta(days=2))
    assert "running for 2880 minutes" in (running_time_reminder(trace, None) or "")

    TraceEvent.objects.create(
        trace=trace, event_id=1, type="run_started", created_at=timezone.now() - timedelta(minutes=45)
    )
    assert "running for 45 minutes" in (running_time_reminder(trace, None) or "")
    TraceEvent.objects.create(
        trace=trace, event_id=2, type="run_started", created_at=timezone.now() - timedelta(minutes=5)
    )
    assert running_time_reminder(trace, None) is None  # a continue started five minutes ago


def test_system_alerts_stay_quiet_under_their_thresholds(settings, tmp_path):
    settings.AGENT_WORKSPACE_ROOT = tmp_path / "not-yet-created"
    settings.AGENT_ALERT_DISK_PERCENT = 101
    settings.AGENT_ALERT_LOAD_PER_CPU = 10_000.0
    assert system_alerts(None, None) is None  # type: ignore[arg-type]
    settings.AGENT_ALERT_LOAD_PER_CPU = 0.0
    settings.AGENT_ALERT_DISK_PERCENT = 0
    alert = system_alerts(None, None)  # type: ignore[arg-type]
    assert alert is not None and alert.startswith("## System Alerts\n\n- ⚠️ disk")


def test_a_bad_hook_path_fails_the_system_check(settings):
    settings.AGENT_CONTEXT_HOOKS = [
        REMINDER,
        "traces.context_hooks.no_such_hook",
        "traces.context_hooks.settings",
    ]
    errors = [e for e in checks.run_checks() if e.id == "traces.E003"]
    assert [e.msg.split(":")[1].strip() for e in errors] == [
        "'traces.context_hooks.no_such_hook' cannot be used",
        "'traces.context_hooks.settings' cannot be used",
    ]
    assert "not callable" in errors[1].msg

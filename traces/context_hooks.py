"""Two context hooks a deployment may name in AGENT_CONTEXT_HOOKS (seed 004 「Context Injection Hooks」).

Neither is registered by default. Each is a `ContextHook`: given the trace and its
goal tree, it returns a short Markdown section for the periodic context injection
(R7), or None. They only remind; the model decides whether to act.

- `system_alerts`: the host this run works on is short of disk space under
  AGENT_WORKSPACE_ROOT, or its load is above its CPU count (the seed's monitor hook).
- `running_time_reminder`: this run segment has gone on for at least
  AGENT_REMINDER_MINUTES (the seed's timer hook).
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from traces.goal_tree import GoalTree
from traces.models import Trace, TraceEvent


def system_alerts(trace: Trace, goal_tree: GoalTree | None) -> str | None:
    """Alerts about the machine the run works on, or None when there are none."""
    alerts = [alert for alert in (_disk_alert(), _load_alert()) if alert]
    if not alerts:
        return None
    lines = [f"- ⚠️ {alert}" for alert in alerts]
    return "## System Alerts\n\n" + "\n".join(lines)


def _disk_alert() -> str | None:
    root = settings.AGENT_WORKSPACE_ROOT
    while not root.exists() and root != root.parent:  # a first run's root may not exist yet
        root = root.parent
    usage = shutil.disk_usage(root)
    percent = round(usage.used * 100 / usage.total) if usage.total else 0
    if percent < settings.AGENT_ALERT_DISK_PERCENT:
        return None
    free_mb = usage.free // (1024 * 1024)
    return f"disk {percent}% used where workspaces live ({free_mb} MB free): avoid writing large files"


def _load_alert() -> str | None:
    try:
        load = os.getloadavg()[0]
    except OSError:  # not every platform reports a load average
        return None
    cpus = os.cpu_count() or 1
    if load <= cpus * settings.AGENT_ALERT_LOAD_PER_CPU:
        return None
    return f"load {load:.1f} on {cpus} CPUs: commands will run slowly"


def running_time_reminder(trace: Trace, goal_tree: GoalTree | None) -> str | None:
    """A reminder once the current run segment has run AGENT_REMINDER_MINUTES or more."""
    minutes = int((timezone.now() - segment_started_at(trace)).total_seconds() // 60)
    if minutes < settings.AGENT_REMINDER_MINUTES:
        return None
    return f"## Reminder\n\n⏰ This task has been running for {minutes} minutes: check your progress against the plan."


def segment_started_at(trace: Trace) -> datetime:
    """When this run segment began: its `run_started` event, or the trace's creation before one is stored."""
    started = (
        TraceEvent.objects.filter(trace_id=trace.trace_id, type="run_started")
        .order_by("-event_id")
        .values_list("created_at", flat=True)
        .first()
    )
    return started or trace.created_at

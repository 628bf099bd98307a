"""Recall (M8): the utility model picks notes in parallel with the first step, then the
dedup and tool-usage filters, and the survivors in every later request with their age."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import litellm  # noqa: F401  (imported before the clock starts: the first import takes seconds)
import pytest
from django.test import Client
from django.utils import timezone

from memory.entries.gate import Draft
from memory.entries.recall import is_manual_for, staleness, tools_in_use
from memory.entries.selectors import Scope
from memory.entries.services import memory_entry_write
from memory.models import MemoryEntry
from tests.scripted_llm import Reply, ToolCall
from traces.models import TraceEvent
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db

FREEZE = "Rule: no merges during the freeze.\nWhy: release on 2026-12-01.\nHow to apply: hold pull requests."


def note(
    owner: Any, type: str, name: str, content: str, description: str = "", days_old: int = 0
) -> MemoryEntry:
    saved = timezone.now() - timedelta(days=days_old)
    draft = Draft(type=type, name=name, description=description, keywords=[], content=content)
    return memory_entry_write(scope=Scope(owner_id=owner.pk), draft=draft, saved_at=saved)[0]


def recalled(request: Any) -> str | None:
    return next(
        (
            m["content"]
            for m in request.messages
            if m["role"] == "user" and m["content"].startswith("Recalled from memory")
        ),
        None,
    )


def test_recall_runs_beside_the_first_step_and_is_filtered(runner, llm, integrator, workspace_root):
    freeze = note(integrator, "project", "release freeze", FREEZE, "merging during the release", days_old=40)
    manual = note(
        integrator, "reference", "grep flags", "Search with the regex flag.", "how to use grep well"
    )
    gotcha = note(
        integrator, "reference", "grep gotcha", "It skips hidden folders.", "grep usage caveat: a known bug"
    )
    read_already = note(integrator, "user", "languages", "Reads French and English.", "reply languages")
    ids = [freeze.pk, manual.pk, gotcha.pk, read_already.pk]

    # A warm-up run first: the process's first litellm call loads its provider modules.
    runner.run_result([{"role": "user", "content": "warm up"}], RunConfig(enable_memory=False, name="w"))
    llm.reset()
    llm.script("utility", Reply(text=json.dumps({"ids": ids}), delay=1.0))
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall("read_memory", {"ref": "languages"}),
                    ToolCall("grep", {"pattern": "TODO"}),
                ]
            ),
            Reply(tool_calls=[ToolCall("list_files", {})]),
            "done",
        ],
    )
    started = time.monotonic()
    result = runner.run_result(
        [{"role": "user", "content": "Can I merge my branch?"}], RunConfig(owner_id=integrator.pk, name="r")
    )

    (utility,) = llm.requests_for("utility")
    first, second, third = llm.requests_for("scripted")
    # The first step did not wait for the utility model's 1 s answer.
    assert first.received_at - started < 0.5
    assert first.received_at - utility.received_at < 0.5
    assert "release freeze: merging during the release" in utility.messages[0]["content"]
    assert FREEZE not in utility.messages[0]["content"]  # names and descriptions only
    assert recalled(first) is None
    text = recalled(second)
    assert text is not None and text == recalled(third)
    assert f"#{freeze.pk} project/release freeze" in text
    assert "saved 40 days ago; verify before relying on it" in text
    assert "  Why: release on 2026-12-01." in text
    assert f"#{gotcha.pk} reference/grep gotcha" in text and "saved today" in text
    assert "grep flags" not in text  # the manual of a tool in use
    assert "languages" not in text  # its body was already read in this run

    (event,) = TraceEvent.objects.filter(trace_id=result.trace_id, type="memory_recalled")
    assert event.payload == {
        "entries": [
            {"id": e.pk, "name": e.name, "type": e.type, "saved_at": e.saved_at.isoformat()}
            for e in (freeze, gotcha)
        ],
        "dropped": {"dedup": 1, "tool_usage": 1},
    }
    # The trace page's side panel lists them, linked to the Memory page.
    client = Client()
    client.force_login(integrator)
    answer = client.get(f"/traces/{result.trace_id}/panels.json", {"names": "side"}).json()
    side = answer["panels"]["side"]
    assert "Recalled from memory" in side
    assert f'/memory/?q=release%20freeze#memory-{freeze.pk}"' in side and "project/release freeze" in side
    assert f"#memory-{gotcha.pk}" in side and f"#memory-{manual.pk}" not in side
    assert "Left out: 1 already in the conversation, 1 manual of a tool in use." in side


def test_a_failed_tool_is_not_in_use():
    messages = [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "a", "function": {"name": "grep"}},
                {"id": "b", "function": {"name": "read"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "3 matches"},
        {"role": "tool", "tool_call_id": "b", "content": "Error\n\nno such file"},
    ]
    assert tools_in_use(messages) == {"grep"}


@pytest.mark.parametrize(
    ("type", "description", "manual"),
    [
        ("reference", "how to use grep", True),
        ("reference", "grep 用法", True),
        ("reference", "grep usage, beware of a bug", False),
        ("reference", "how to use bash", False),
        ("user", "how to use grep", False),
        ("reference", "how to use greptile", False),
    ],
)
def test_manuals_of_tools_in_use(type, description, manual):
    entry = MemoryEntry(type=type, name="notes", description=description, content="x")
    assert is_manual_for(entry, {"grep"}) is manual


def test_staleness():
    now = timezone.now()
    assert staleness(now - timedelta(hours=3), now) == "saved today"
    assert staleness(now - timedelta(days=1), now) == "saved 1 day ago; verify before relying on it"


def test_a_failed_recall_leaves_the_run_alone(runner, llm, integrator, workspace_root):
    note(integrator, "user", "style", "Terse.")
    llm.script("utility", Reply(status=500, error="down"))
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})]), "done"])
    result = runner.run_result(
        [{"role": "user", "content": "hi"}], RunConfig(owner_id=integrator.pk, name="r")
    )
    assert result.status == "completed"
    assert all(recalled(r) is None for r in llm.requests_for("scripted"))

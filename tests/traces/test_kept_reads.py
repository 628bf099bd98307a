"""Reads kept per process for a second (agentsite/kept.py, issue 18): what every run
reads and an operator rarely changes is read once a second, a save here is seen at
once, a write this process is not told of within the second, and a run after the
first reads none of it."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from agentsite.kept import _every
from memory.models import AgentPreset
from memory.presets import _stored, get_preset
from traces.collaboration.remote import configured_agents
from traces.models import Trace
from traces.remote_agents import RemoteAgentConfig
from traces.runner import RunConfig
from traces.services.agents_text import user_agents_update

pytestmark = pytest.mark.django_db(transaction=True)  # reads are kept only outside a transaction

KEPT_TABLES = (
    "memory_agentpreset",
    "traces_remoteagentconfig",
    "traces_useragents",
    "memory_experience",
    "memory_memoryentry",
    "suites_caserun",
)


def reads_of(queries: CaptureQueriesContext, table: str) -> int:
    return sum(f'"{table}"' in q["sql"] for q in queries.captured_queries)


def test_a_preset_is_read_once_a_second_and_a_save_here_is_seen_at_once():
    AgentPreset.objects.create(name="shopper", description="buys things")
    with CaptureQueriesContext(connection) as queries:
        first, again = get_preset("shopper"), get_preset("shopper")
    assert first.description == "buys things" and again is first
    assert reads_of(queries, "memory_agentpreset") == 1

    row = AgentPreset.objects.get(name="shopper")
    row.description = "sells things"
    row.save()  # post_save here drops what the process holds
    assert get_preset("shopper").description == "sells things"


def test_a_preset_changed_without_a_signal_shows_within_the_interval(monkeypatch):
    monkeypatch.setattr(_stored, "fresh", 0.3)
    AgentPreset.objects.create(name="shopper", description="buys things")
    assert get_preset("shopper").description == "buys things"

    # An update() sends no signal, as another process's save looks from here.
    AgentPreset.objects.filter(name="shopper").update(description="sells things")
    assert get_preset("shopper").description == "buys things"
    time.sleep(0.35)
    assert get_preset("shopper").description == "sells things"


def test_a_read_inside_a_transaction_is_not_kept():
    with transaction.atomic():
        AgentPreset.objects.create(name="draft", description="never committed")
        assert get_preset("draft").description == "never committed"
        transaction.set_rollback(True)  # no signal tells the kept reads of a rollback

    with pytest.raises(KeyError, match="unknown preset 'draft'"):
        get_preset("draft")


def test_remote_agents_saved_or_deleted_here_are_seen_at_once():
    assert configured_agents() == []
    row = RemoteAgentConfig.objects.create(url="http://peer:8000/", name="peer", api_key="k")
    assert [(a.base_url, a.name) for a in configured_agents()] == [("http://peer:8000", "peer")]
    row.delete()
    assert configured_agents() == []


def test_a_runs_after_the_first_read_none_of_the_kept_rows(runner, llm, integrator, monkeypatch):
    for kept in _every:  # a test process's first run may take longer than a second
        monkeypatch.setattr(kept, "fresh", 60.0)
    AgentPreset.objects.create(name="shopper", description="buys things")
    user_agents_update(user=integrator, text="Answer in French.")
    llm.script("scripted", ["bonjour", "encore"])
    config = RunConfig(owner_id=integrator.pk, agent_type="shopper", name="kept")
    assert runner.run_result([{"role": "user", "content": "hi"}], config).status == "completed"

    with CaptureQueriesContext(connection) as queries:
        second = runner.run_result([{"role": "user", "content": "hi again"}], config)
    assert second.status == "completed"
    assert {table: reads_of(queries, table) for table in KEPT_TABLES} == dict.fromkeys(KEPT_TABLES, 0)
    # The user's text still reached the model, and the lease was given up in the final
    # commit: no statement of its own.
    assert "Answer in French." in str(llm.requests_for("scripted")[-1].messages[0]["content"])
    assert Trace.objects.get(pk=second.trace_id).run_owner == ""
    assert not any(
        q["sql"].startswith('UPDATE "traces_trace" SET "run_owner"') for q in queries.captured_queries
    )


def test_a_users_text_saved_in_the_portal_reaches_the_next_run_at_once(runner, llm, integrator):
    user_agents_update(user=integrator, text="Answer in French.")
    llm.script("scripted", ["bonjour", "hello"])
    config = RunConfig(owner_id=integrator.pk, name="kept")
    runner.run_result([{"role": "user", "content": "hi"}], config)
    user_agents_update(user=integrator, text="Answer in English.")  # update_or_create: a save here
    runner.run_result([{"role": "user", "content": "hi"}], config)

    systems: list[Any] = [str(r.messages[0]["content"]) for r in llm.requests_for("scripted")]
    assert "Answer in French." in systems[0] and "Answer in English." in systems[1]

"""The memory index kept per process for a second (memory/entries/index_cache.py on
agentsite/kept.py, issue 18):
one read per scope and second, a save here seen at once, a write it was not told of within
the second, nothing kept from inside a transaction."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memory.entries import index_cache
from memory.entries.gate import Draft
from memory.entries.index_cache import scope_index
from memory.entries.selectors import Scope
from memory.entries.services import memory_entry_write
from memory.models import MemoryEntry
from tests.scripted_llm import Reply, ToolCall
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db(transaction=True)  # the index is kept only outside a transaction


def write(scope: Scope, name: str) -> MemoryEntry:
    draft = Draft(type="user", name=name, content="x", description="", keywords=[])
    return memory_entry_write(scope=scope, draft=draft)[0]


def entry_reads(queries: CaptureQueriesContext) -> int:
    return sum('FROM "memory_memoryentry"' in q["sql"] for q in queries.captured_queries)


def test_a_scope_is_read_once_a_second_and_a_save_here_is_seen_at_once(integrator):
    scope = Scope(owner_id=integrator.pk)
    write(scope, "style")

    with CaptureQueriesContext(connection) as queries:
        first = scope_index(scope)
        again = scope_index(scope)
    assert first is not None and "user/style" in first.text
    assert again is first and entry_reads(queries) == 1

    write(scope, "timezone")  # post_save in this process drops what it holds
    index = scope_index(scope)
    assert index is not None and "user/timezone" in index.text

    MemoryEntry.objects.filter(name="timezone").delete()
    index = scope_index(scope)
    assert index is not None and "timezone" not in index.text


def test_a_write_this_process_is_not_told_of_shows_within_the_interval(integrator, monkeypatch):
    monkeypatch.setattr(index_cache._kept, "fresh", 0.3)
    scope = Scope(owner_id=integrator.pk)
    write(scope, "style")
    assert "user/style" in scope_index(scope).text  # type: ignore[union-attr]

    # An update() sends no signal, as another process's save looks from here.
    MemoryEntry.objects.filter(name="style").update(name="manner")
    assert "user/style" in scope_index(scope).text  # type: ignore[union-attr]
    time.sleep(0.35)
    assert "user/manner" in scope_index(scope).text  # type: ignore[union-attr]


def test_a_read_inside_a_transaction_is_not_kept(integrator):
    scope = Scope(owner_id=integrator.pk)
    with transaction.atomic():
        write(scope, "draft")
        assert "user/draft" in scope_index(scope).text  # type: ignore[union-attr]
        transaction.set_rollback(True)  # no signal tells the kept indexes of a rollback

    with CaptureQueriesContext(connection) as queries:
        assert scope_index(scope) is None
    assert entry_reads(queries) == 1


def test_a_runs_calls_read_the_index_once_and_see_its_own_save(runner, llm, integrator):
    write(Scope(owner_id=integrator.pk), "style")
    llm.script("utility", json.dumps({"ids": []}))
    note = {"type": "user", "name": "timezone", "content": "Works from Lisbon."}
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("list_files", {})]),
            Reply(tool_calls=[ToolCall("write_memory", note)]),
            "done",
        ],
    )
    with CaptureQueriesContext(connection) as queries:
        result = runner.run_result(
            [{"role": "user", "content": "help me"}], RunConfig(owner_id=integrator.pk, name="memory run")
        )
    assert result.status == "completed"

    indexes: list[Any] = [
        next(m["content"] for m in r.messages if str(m.get("content")).startswith("Memory index"))
        for r in llm.requests_for("scripted")
    ]
    assert ["user/timezone" in index for index in indexes] == [False, False, True]
    # The run's first call: one read for recall's candidates and the index. Its second
    # call reads nothing (a second old at most); the save's drop makes the third read.
    assert entry_reads(queries) == 3  # 1 + the write's own lookup + the third call's read (5 without)

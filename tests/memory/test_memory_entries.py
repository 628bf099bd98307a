"""Memory entries (M8): the write_memory and read_memory tools in real runs, overwrite by
type and name, scopes, and the index in every model request with its two caps."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory.entries.gate import Draft
from memory.entries.index import MAX_BYTES, MAX_LINES, memory_index
from memory.entries.selectors import Scope, memory_entries_in_scope
from memory.entries.services import memory_entry_write
from memory.models import MemoryEntry
from tests.scripted_llm import Reply, ToolCall
from traces.models import Message
from traces.runner import RunConfig

pytestmark = pytest.mark.django_db

FEEDBACK = "Rule: answer in French.\nWhy: the team reads French.\nHow to apply: every reply to this user."


def write(
    scope: Scope, type: str = "user", name: str = "style", content: str = "Prefers terse answers.", **kw: Any
):
    draft = Draft(type=type, name=name, content=content, description=kw.pop("description", ""), keywords=[])
    return memory_entry_write(scope=scope, draft=draft, **kw)[0]


def run(runner: Any, owner: Any, task: str = "help me", **config: Any) -> Any:
    return runner.run_result(
        [{"role": "user", "content": task}], RunConfig(owner_id=owner.pk, name="memory run", **config)
    )


def tool_results(trace_id: str) -> list[str]:
    return list(
        Message.objects.filter(trace_id=trace_id, role="tool")
        .order_by("sequence")
        .values_list("content", flat=True)
    )


def index_of(request: Any) -> str | None:
    return next(
        (
            m["content"]
            for m in request.messages
            if m["role"] == "user" and m["content"].startswith("Memory index")
        ),
        None,
    )


def test_write_memory_saves_a_note_for_the_traces_owner(runner, llm, integrator):
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall(
                        "write_memory",
                        {
                            "type": "feedback",
                            "name": "Language",
                            "content": FEEDBACK,
                            "description": "reply language",
                            "keywords": ["french"],
                        },
                    )
                ]
            ),
            "noted",
        ],
    )
    result = run(runner, integrator)

    entry = MemoryEntry.objects.get()
    assert (entry.owner, entry.type, entry.name, entry.keywords, entry.trace_id) == (
        integrator,
        "feedback",
        "Language",
        ["french"],
        result.trace_id,
    )
    assert tool_results(result.trace_id) == [
        f"Saved memory #{entry.pk}\n\nSaved the feedback note 'Language' (#{entry.pk}, saved {entry.saved_at:%Y-%m-%d})."
    ]


def test_a_refused_note_comes_back_to_the_model_with_every_reason(runner, llm, integrator):
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall(
                        "write_memory",
                        {
                            "type": "project",
                            "name": "freeze",
                            "content": "The freeze started last week; see docs/RELEASE.md",
                        },
                    )
                ]
            ),
            "ok",
        ],
    )
    result = run(runner, integrator)

    (content,) = tool_results(result.trace_id)
    assert content.startswith("Error")
    assert "memory not saved: it contains a file path ('docs/RELEASE.md')" in content
    assert "missing: 'Rule:', 'Why:', 'How to apply:'" in content
    assert "a project entry needs absolute dates, not relative ones ('last week')" in content
    assert not MemoryEntry.objects.exists()


def test_the_same_type_and_name_overwrites_ignoring_case(integrator):
    scope = Scope(owner_id=integrator.pk)
    first = write(scope, name="Style", content="Prefers terse answers.")
    again = write(scope, name="  STYLE ", content="Prefers long answers.")
    other_type = write(scope, type="reference", name="style", content="The style guide is the team wiki.")

    assert again.pk == first.pk
    assert MemoryEntry.objects.get(pk=first.pk).content == "Prefers long answers."
    assert other_type.pk != first.pk
    assert MemoryEntry.objects.count() == 2


def test_scopes_keep_owners_and_projects_apart(integrator, stranger):
    mine = write(Scope(owner_id=integrator.pk), name="a")
    write(Scope(owner_id=stranger.pk), name="b")
    in_project = write(
        Scope(owner_id=integrator.pk, project="web"), type="reference", name="c", content="Wiki."
    )
    user_note = write(Scope(owner_id=integrator.pk, project="web"), name="d")
    write(Scope(owner_id=integrator.pk, project="api"), type="reference", name="e", content="Board.")

    assert user_note.project == ""  # notes about the person follow them into every project
    assert in_project.project == "web"
    seen = set(memory_entries_in_scope(Scope(owner_id=integrator.pk, project="web")))
    assert seen == {mine, in_project, user_note}
    assert set(memory_entries_in_scope(Scope(owner_id=integrator.pk))) == {mine, user_note}


def test_read_memory_returns_a_body_by_id_or_name(runner, llm, integrator):
    entry = write(Scope(owner_id=integrator.pk), type="feedback", name="Language", content=FEEDBACK)
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("read_memory", {"ref": f"#{entry.pk}"})]),
            Reply(tool_calls=[ToolCall("read_memory", {"ref": "language"})]),
            Reply(tool_calls=[ToolCall("read_memory", {"ref": "nothing like it"})]),
            "done",
        ],
    )
    result = run(runner, integrator)

    by_id, by_name, missing = tool_results(result.trace_id)
    assert FEEDBACK in by_id and by_id == by_name
    assert missing.startswith("Error") and "no memory note has the id or name 'nothing like it'" in missing


def test_read_memory_does_not_read_another_users_note(runner, llm, integrator, stranger):
    theirs = write(Scope(owner_id=stranger.pk), name="secret", content="Their note.")
    llm.script("scripted", [Reply(tool_calls=[ToolCall("read_memory", {"ref": str(theirs.pk)})]), "done"])
    result = run(runner, integrator)
    assert "no memory note" in tool_results(result.trace_id)[0]


def test_the_index_is_in_every_model_request_and_follows_writes(runner, llm, integrator):
    write(Scope(owner_id=integrator.pk), name="style", description="how to answer")
    llm.script("utility", json.dumps({"ids": []}))
    llm.script(
        "scripted",
        [
            Reply(
                tool_calls=[
                    ToolCall(
                        "write_memory", {"type": "user", "name": "timezone", "content": "Works from Lisbon."}
                    )
                ]
            ),
            Reply(tool_calls=[ToolCall("read", {"path": "nothing.txt"})]),
            "done",
        ],
    )
    run(runner, integrator)

    requests = llm.requests_for("scripted")
    assert len(requests) == 3
    indexes = [index_of(r) for r in requests]
    assert all(indexes)
    assert "user/style — how to answer" in indexes[0] and "timezone" not in indexes[0]
    assert "user/timezone" in indexes[1] and "user/timezone" in indexes[2]
    # right after the system prompt, before the task; never stored
    assert [m["role"] for m in requests[0].messages[:3]] == ["system", "user", "user"]
    assert not Message.objects.filter(content__startswith="Memory index").exists()


def test_no_index_without_entries_or_with_memory_off(runner, llm, integrator):
    run(runner, integrator)
    write(Scope(owner_id=integrator.pk), name="style")
    llm.script("utility", json.dumps({"ids": []}))
    run(runner, integrator, enable_memory=False)
    assert [index_of(r) for r in llm.requests_for("scripted")] == [None, None]


def entries(count: int, *, description: str = "") -> list[MemoryEntry]:
    return [
        MemoryEntry(pk=i + 1, type="user", name=f"note {i}", description=description, content="x")
        for i in range(count)
    ]


def test_the_index_stops_at_200_lines_and_says_how_many_were_left_out():
    index = memory_index(entries(250), total=250)
    assert index is not None
    lines = index.text.splitlines()
    assert len(lines) == MAX_LINES
    assert len(index.shown) == MAX_LINES - 2  # the header and the note take two
    assert lines[-1].startswith(f"({250 - len(index.shown)} older entries left out of this index")


def test_the_index_stops_at_25_kb_first_when_lines_are_long():
    index = memory_index(entries(150, description="d" * 400), total=150)
    assert index is not None
    assert len(index.text.encode()) <= MAX_BYTES
    assert len(index.text.splitlines()) < MAX_LINES
    assert index.left_out == 150 - len(index.shown) > 0
    assert f"({index.left_out} older entries left out" in index.text


def test_the_index_counts_entries_it_did_not_read_as_left_out():
    index = memory_index(entries(3), total=10)
    assert index is not None and index.left_out == 7 and "(7 older entries left out" in index.text
    assert memory_index([], total=0) is None

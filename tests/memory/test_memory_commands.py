"""`export_memory` and `import_memory` (M8): a user's entries as memory.md and back,
through the same Markdown round trip as the portal and the API."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from memory.entries.gate import Draft
from memory.entries.selectors import Scope
from memory.entries.services import memory_entry_write
from memory.models import MemoryEntry

pytestmark = pytest.mark.django_db

FREEZE = "Rule: no merges during the freeze.\nWhy: release on 2026-12-01.\nHow to apply: hold pull requests."


def write(owner_id: int | None, type: str, name: str, content: str, project: str = "") -> MemoryEntry:
    draft = Draft(type=type, name=name, description=f"about {name}", keywords=["k"], content=content)
    return memory_entry_write(scope=Scope(owner_id=owner_id, project=project), draft=draft)[0]


def export(*args: str) -> str:
    out = StringIO()
    call_command("export_memory", *args, stdout=out)
    return out.getvalue()


def rows(owner_id: int | None) -> list[tuple[Any, ...]]:
    return sorted(
        MemoryEntry.objects.filter(owner_id=owner_id).values_list(
            "type", "name", "description", "keywords", "project", "content", "saved_at"
        )
    )


def test_export_then_import_for_another_user_is_lossless(integrator, expert, tmp_path):
    write(integrator.pk, "project", "release freeze", FREEZE, project="shop")
    write(integrator.pk, "reference", "tricky\n---", "Body with\n---\na delimiter line.")
    write(expert.pk, "user", "not exported", "Someone else's note.")
    text = export("--owner", integrator.username)
    assert "release freeze" in text and "not exported" not in text

    path = tmp_path / "memory.md"
    path.write_text(text, encoding="utf-8")
    out = StringIO()
    call_command("import_memory", str(path), "--owner", expert.username, stdout=out)
    assert "2 created, 0 replaced" in out.getvalue()
    assert [r for r in rows(expert.pk) if r[1] != "not exported"] == rows(integrator.pk)
    # Importing again replaces each entry of the same project, type and name.
    out = StringIO()
    call_command("import_memory", str(path), "--owner", expert.username, stdout=out)
    assert "0 created, 2 replaced" in out.getvalue()
    assert export("--owner", expert.username).count("---\ntype:") == 3


def test_without_an_owner_the_entries_of_runs_without_one(integrator, tmp_path):
    write(None, "user", "terminal note", "From a run_agent run.")
    write(integrator.pk, "user", "mine", "Not this one.")
    path = tmp_path / "out.md"
    call_command("export_memory", str(path), stderr=StringIO())
    text = path.read_text(encoding="utf-8")
    assert "terminal note" in text and "mine" not in text


def test_a_refused_entry_imports_nothing_and_names_itself(integrator, tmp_path):
    good = export_of(integrator, "user", "fine", "A good note.")
    bad = export_of(integrator, "feedback", "no why", FREEZE)
    MemoryEntry.objects.all().delete()
    bad = bad.replace("Why: release on 2026-12-01.\n", "")
    path = tmp_path / "memory.md"
    path.write_text(good + bad, encoding="utf-8")
    with pytest.raises(CommandError, match=r"entry 2 \('no why'\): .*nothing was imported"):
        call_command("import_memory", str(path), "--owner", integrator.username)
    assert not MemoryEntry.objects.exists()


def export_of(user: Any, type: str, name: str, content: str) -> str:
    entry = write(user.pk, type, name, content)
    text = export("--owner", user.username)
    entry.delete()
    return text


def test_unknown_owner_and_malformed_file_are_refused(integrator, tmp_path):
    with pytest.raises(CommandError, match="--owner: no user 'nobody'"):
        export("--owner", "nobody")
    path = tmp_path / "memory.md"
    path.write_text("type: user\n", encoding="utf-8")
    with pytest.raises(CommandError, match="line 1: expected '---'.*nothing was imported"):
        call_command("import_memory", str(path), "--owner", integrator.username)

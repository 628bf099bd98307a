"""Memory entries over the API (M8): CRUD with the owner rule, the gate's 400, memory.md
export and import, and the lossless Markdown round trip."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.entries import markdown
from memory.entries.markdown import EntryData
from memory.models import MemoryEntry

pytestmark = pytest.mark.django_db

FEEDBACK = "Rule: answer in French.\nWhy: the team reads French.\nHow to apply: every reply."


def create(client, **fields):
    body = {"type": "user", "name": "style", "content": "Prefers terse answers.", **fields}
    return client.post("/api/memory", body, format="json")


def test_crud_of_ones_own_entries(api_client, integrator):
    client = api_client(integrator)
    created = create(client, keywords=["tone"], description="how to answer")
    assert created.status_code == 201, created.json()
    entry_id = created.json()["id"]
    assert created.json()["owner"] == "integrator" and created.json()["keywords"] == ["tone"]

    assert client.get(f"/api/memory/{entry_id}").json()["content"] == "Prefers terse answers."
    assert [e["id"] for e in client.get("/api/memory").json()["results"]] == [entry_id]

    patched = client.patch(f"/api/memory/{entry_id}", {"content": "Prefers long answers."}, format="json")
    assert patched.status_code == 200 and patched.json()["content"] == "Prefers long answers."

    again = create(client, name="STYLE", content="Terse again.")
    assert again.status_code == 200 and again.json()["id"] == entry_id  # replaced, same id

    assert client.delete(f"/api/memory/{entry_id}").status_code == 204
    assert not MemoryEntry.objects.exists()


def test_others_entries_are_404_and_staff_see_all(api_client, integrator, stranger, expert):
    entry_id = create(api_client(integrator)).json()["id"]
    other = api_client(stranger)
    for response in (
        other.get(f"/api/memory/{entry_id}"),
        other.patch(f"/api/memory/{entry_id}", {"content": "x"}, format="json"),
        other.delete(f"/api/memory/{entry_id}"),
    ):
        assert response.status_code == 404
        assert response.json() == {"error": f"memory entry {entry_id} does not exist", "code": "not_found"}
    assert other.get("/api/memory").json()["results"] == []
    assert [e["id"] for e in api_client(expert).get("/api/memory").json()["results"]] == [entry_id]
    assert api_client(expert).get(f"/api/memory/{entry_id}").status_code == 200
    assert api_client().get("/api/memory").status_code in (401, 403)
    assert api_client(integrator).get(f"/api/memory/{2**70}").status_code == 404


def test_the_gate_and_conflicts_answer_in_the_error_shape(api_client, integrator):
    client = api_client(integrator)
    refused = create(client, type="feedback", content="Use git push --force.")
    assert refused.status_code == 400
    body = refused.json()
    assert body["code"] == "memory_refused"
    assert (
        "git command ('git push')" in body["error"]
        and "missing: 'Rule:', 'Why:', 'How to apply:'" in body["error"]
    )

    first = create(client, name="a").json()["id"]
    create(client, name="b")
    clash = client.patch(f"/api/memory/{first}", {"name": "B"}, format="json")
    assert clash.status_code == 409 and clash.json()["code"] == "conflict"


def test_export_and_import_round_trip(api_client, integrator, stranger):
    client = api_client(integrator)
    create(client, type="feedback", name="Language", content=FEEDBACK, keywords=["french", "tone"])
    create(
        client,
        type="reference",
        name='board: "INGEST"',
        content="---\nTracked on the INGEST board.\n\\---",
        project="web",
    )
    exported = client.get("/api/memory/export")
    assert exported.status_code == 200 and exported["Content-Type"].startswith("text/markdown")
    text = exported.content.decode()

    other = api_client(stranger)
    imported = other.post("/api/memory/import", text, content_type="text/markdown")
    assert imported.json() == {"created": 2, "replaced": 0}
    assert other.get("/api/memory/export").content.decode() == text
    assert other.post("/api/memory/import", {"text": text}, format="json").json() == {
        "created": 0,
        "replaced": 2,
    }

    bad = other.post("/api/memory/import", {"text": "---\ntype: user\n"}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "malformed_memory"


def test_markdown_round_trip_is_lossless():
    entries = [
        EntryData(
            type="project",
            name='freeze: "Q4" ---',
            content="Rule: x\n---\n\\---\n\n  indented\nWhy: y\nHow to apply: z\n",
            description="línea — 说明",
            keywords=["a, b", "c"],
            project="web",
            saved_at=datetime(2026, 11, 23, 8, 0, 0, 123456, tzinfo=UTC),
        ),
        EntryData(type="user", name="empty", content="", saved_at=None),
    ]
    text = markdown.render(entries)
    assert markdown.parse(text) == entries
    assert markdown.render(markdown.parse(text)) == text


def test_malformed_markdown_names_the_line():
    with pytest.raises(markdown.MemoryFileError, match="line 2: expected one of type"):
        markdown.parse("---\nbogus: 1\n---\nbody\n")
    with pytest.raises(markdown.MemoryFileError, match="line 1: expected '---'"):
        markdown.parse("hello\n")

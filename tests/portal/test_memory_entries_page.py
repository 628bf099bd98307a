"""The portal's memory page (M8): a user lists, edits and deletes only their own entries;
experts see everyone's; edits pass the write gate."""

from __future__ import annotations

import pytest

from memory.entries.gate import Draft
from memory.entries.selectors import Scope
from memory.entries.services import memory_entry_write
from memory.models import MemoryEntry

pytestmark = pytest.mark.django_db


def note(owner, name: str, content: str = "Prefers terse answers.") -> MemoryEntry:
    draft = Draft(type="user", name=name, description=f"about {name}", keywords=["k"], content=content)
    return memory_entry_write(scope=Scope(owner_id=owner.pk), draft=draft)[0]


@pytest.fixture
def browser(client):
    def login(user):
        client.force_login(user)
        return client

    return login


def test_a_user_lists_only_their_entries_and_experts_all(browser, integrator, stranger, expert):
    note(integrator, "mine")
    note(stranger, "theirs")
    page = browser(integrator).get("/memory/")
    assert page.status_code == 200
    assert b"mine" in page.content and b"theirs" not in page.content
    assert b'href="/memory/"' in page.content  # the nav link
    everyone = browser(expert).get("/memory/")
    assert b"mine" in everyone.content and b"theirs" in everyone.content


def test_edit_and_delete_own_entry(browser, integrator):
    entry = note(integrator, "style")
    client = browser(integrator)
    assert b"Prefers terse answers." in client.get(f"/memory/{entry.pk}/edit/").content
    saved = client.post(
        f"/memory/{entry.pk}/edit/",
        {
            "type": "user",
            "name": "Style",
            "description": "d",
            "keywords": "a, b",
            "project": "",
            "content": "Long.",
        },
    )
    assert saved.status_code == 302
    entry.refresh_from_db()
    assert (entry.name, entry.keywords, entry.content) == ("Style", ["a", "b"], "Long.")

    refused = client.post(
        f"/memory/{entry.pk}/edit/",
        {
            "type": "user",
            "name": "Style",
            "description": "",
            "keywords": "",
            "project": "",
            "content": "import os",
        },
    )
    assert refused.status_code == 200 and b"Not saved: it contains a code statement" in refused.content

    assert client.post(f"/memory/{entry.pk}/delete/").status_code == 302
    assert not MemoryEntry.objects.exists()


def test_someone_elses_entry_is_404(browser, integrator, stranger):
    entry = note(integrator, "mine")
    client = browser(stranger)
    assert client.get(f"/memory/{entry.pk}/edit/").status_code == 404
    assert client.post(f"/memory/{entry.pk}/edit/", {"content": "x"}).status_code == 404
    assert client.post(f"/memory/{entry.pk}/delete/").status_code == 404
    assert MemoryEntry.objects.filter(pk=entry.pk).exists()
    assert b"mine" not in client.get("/memory/memory.md").content


def test_download_memory_md(browser, integrator):
    note(integrator, "style")
    response = browser(integrator).get("/memory/memory.md")
    assert response["Content-Type"].startswith("text/markdown")
    assert b'name: "style"' in response.content

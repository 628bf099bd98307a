"""Memory entries in the admin (M8): listed, searched, and edited through the write gate."""

from __future__ import annotations

import pytest

from memory.models import MemoryEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, expert):
    expert.is_superuser = True
    expert.save()
    client.force_login(expert)
    return client


def form(owner, **fields):
    values = {
        "owner": owner.pk,
        "project": "",
        "type": "user",
        "name": "style",
        "description": "",
        "keywords": "[]",
        "content": "Prefers terse answers.",
        "saved_at_0": "2026-11-23",
        "saved_at_1": "08:00:00",
        "trace": "",
    }
    return {**values, **fields}


def test_the_admin_adds_lists_and_searches_entries(admin_client, integrator):
    added = admin_client.post("/admin/memory/memoryentry/add/", form(integrator, keywords='["tone"]'))
    assert added.status_code == 302
    entry = MemoryEntry.objects.get()
    assert (entry.owner, entry.keywords) == (integrator, ["tone"])
    listing = admin_client.get("/admin/memory/memoryentry/", {"q": "terse"})
    assert b"style" in listing.content


def test_the_admin_refuses_what_the_gate_refuses(admin_client, integrator):
    refused = admin_client.post(
        "/admin/memory/memoryentry/add/", form(integrator, type="feedback", content="See settings.py")
    )
    assert refused.status_code == 200
    assert b"memory not saved: it contains a file path" in refused.content
    assert b"missing: &#x27;Rule:&#x27;" in refused.content
    assert not MemoryEntry.objects.exists()

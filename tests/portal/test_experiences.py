"""The experience review queue, experiences.md and the library page (P4)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memory.models import Experience, ExperienceStatus
from memory.services import experience_create
from tests.factories import make_trace

pytestmark = pytest.mark.django_db


def draft(**fields):
    return experience_create(rule="Compute sums with a script.", condition="tables", **fields)


def test_the_queue_shows_drafts_with_evidence_links(browser_client, expert, integrator):
    trace = make_trace(integrator, messages=[("user", "a"), ("assistant", "b"), ("user", "c")])
    experience = draft(
        trace=trace,
        evidence={"trace_id": trace.trace_id, "messages": [{"sequence": 3, "message_id": "x"}]},
    )
    page = browser_client(expert).get("/experiences/").content.decode()
    assert experience.code in page and "review queue" in page
    assert f'href="/traces/{trace.trace_id}/?head=3#m3"' in page


def test_plain_users_see_only_approved_and_cannot_review(browser_client, integrator, expert):
    hidden = draft()
    shown = draft(status=ExperienceStatus.APPROVED)
    client = browser_client(integrator)
    page = client.get("/experiences/", {"status": "all"}).content.decode()
    assert shown.code in page and hidden.code not in page
    assert "Approve" not in page
    assert client.post(f"/experiences/{shown.code}/retire/").status_code == 403
    assert client.post(f"/experiences/{shown.code}/edit/", {"rule": "x"}).status_code == 403


def test_expert_approves_retires_and_votes(browser_client, expert):
    experience = draft()
    client = browser_client(expert)
    page = client.post(f"/experiences/{experience.code}/approve/", follow=True).content.decode()
    assert "approved" in page
    experience.refresh_from_db()
    assert experience.status == ExperienceStatus.APPROVED and experience.reviewed_by == expert

    client.post(f"/experiences/{experience.code}/helpful/")
    client.post(f"/experiences/{experience.code}/harmful/")
    client.post(f"/experiences/{experience.code}/retire/")
    experience.refresh_from_db()
    assert (experience.helpful, experience.harmful, experience.status) == (1, 1, ExperienceStatus.RETIRED)


def test_expert_edits_an_experience(browser_client, expert):
    experience = draft()
    client = browser_client(expert)
    client.post(
        f"/experiences/{experience.code}/edit/",
        {"rule": "New rule", "condition": "when", "category": "tool_usage", "intent": "Data Analysis, csv"},
    )
    experience.refresh_from_db()
    assert experience.rule == "New rule" and experience.category == "tool_usage"
    assert experience.tags["intent"] == ["data_analysis", "csv"]
    page = client.post(f"/experiences/{experience.code}/edit/", {"rule": " "}, follow=True).content.decode()
    assert "cannot be empty" in page


def test_download_and_upload_experiences_md(browser_client, expert):
    experience = draft(status=ExperienceStatus.APPROVED)
    client = browser_client(expert)
    response = client.get("/experiences/experiences.md")
    assert response["Content-Type"].startswith("text/markdown")
    text = response.content.decode()
    assert experience.code in text

    Experience.objects.all().delete()
    upload = SimpleUploadedFile("experiences.md", text.encode(), content_type="text/markdown")
    page = client.post("/experiences/upload/", {"file": upload}, follow=True).content.decode()
    assert "Imported: 1 new, 0 updated" in page
    assert Experience.objects.get(code=experience.code).rule == experience.rule

    bad = SimpleUploadedFile(
        "experiences.md", b"---\nnot: [closed\n---\nbody\n", content_type="text/markdown"
    )
    page = client.post("/experiences/upload/", {"file": bad}, follow=True).content.decode()
    assert "Nothing was imported" in page


def test_library_lists_skills_and_presets_with_admin_links(browser_client, expert):
    page = browser_client(expert).get("/library/").content.decode()
    assert "planning" in page and "explore" in page
    assert "/admin/memory/agentpreset/" in page


def test_a_condition_starting_with_when_reads_when_once(browser_client, expert):
    saved = experience_create(rule="Read the log first.", condition="whenever the build fails")
    older = draft()  # a row written before conditions were normalised, as it is stored
    Experience.objects.filter(pk=older.pk).update(condition="When the tests are flaky")
    older.refresh_from_db()

    assert saved.condition == "the build fails"
    page = browser_client(expert).get("/experiences/").content.decode()
    assert '<span class="muted">When</span> the build fails' in page
    assert '<span class="muted">When</span> the tests are flaky' in page
    assert "When</span> When" not in page and "When</span> when" not in page
    assert f"[{older.code}] When the tests are flaky: Compute" in older.prompt_line()


def test_the_trace_page_shows_why_each_experience_was_injected(browser_client, integrator):
    from traces.models import TraceEvent

    trace = make_trace(integrator, messages=[("user", "write the report file")])
    why = {
        "code": "ex_042",
        "score": 2.61,
        "relevance": 1.8,
        "parts": {"text": 1.8},
        "matched": {"intent": ["write_file"], "state": [], "words": ["report", "<b>file</b>"]},
        "fusion": {
            "lexical_rank": 2,
            "embedding_rank": 1,
            "cosine": 0.71,
            "fused": 0.04892,
            "rrf_k": 60,
            "embedding_weight": 2.0,
        },
    }
    TraceEvent.objects.create(
        trace=trace,
        event_id=1,
        type="experiences_retrieved",
        payload={"tags": {}, "retrieved": ["ex_042"], "why": [why], "floor": 0.75},
    )

    page = browser_client(integrator).get(f"/traces/{trace.trace_id}/").content.decode()

    assert "Experiences given to the agent" in page and "ex_042" in page
    assert "score 2.61 · relevance 1.8 (floor 0.75)" in page
    assert '<span class="badge">write_file</span>' in page
    assert (
        "fused 0.04892: lexical rank 2, embedding rank 1 (cosine 0.71), embedding order weighed 2.0" in page
    )
    assert "report, &lt;b&gt;file&lt;/b&gt;" in page and "<b>file</b>" not in page  # inert

"""The experiences API (W2, M5): experts curate, integrators read approved ones."""

from __future__ import annotations

import pytest

from memory.models import Experience

pytestmark = pytest.mark.django_db


def test_integrators_read_only_approved_experiences(api_client, integrator, make_experience):
    approved = make_experience(rule="approved", tags={"intent": ["debug"]})
    draft = make_experience(rule="draft", status="draft")
    client = api_client(integrator)

    listing = client.get("/api/experiences").json()
    assert [row["code"] for row in listing["results"]] == [approved.code]
    assert client.get(f"/api/experiences/{approved.code}").json()["rule"] == "approved"
    assert client.get(f"/api/experiences/{draft.code}").status_code == 404
    assert client.patch(f"/api/experiences/{approved.code}", {"rule": "x"}, format="json").status_code == 403
    assert client.post("/api/experiences", {"rule": "x"}, format="json").status_code == 403
    assert client.post(f"/api/experiences/{approved.code}/approve").status_code == 403
    assert client.delete(f"/api/experiences/{approved.code}").status_code == 403
    assert api_client().get("/api/experiences").status_code == 401


def test_experts_review_queue_create_edit_and_delete(api_client, expert, make_experience):
    draft = make_experience(rule="draft", status="draft", category="environment")
    make_experience(rule="approved")
    client = api_client(expert)

    queue = client.get("/api/experiences", {"status": "draft"}).json()
    assert [row["code"] for row in queue["results"]] == [draft.code]
    created = client.post(
        "/api/experiences",
        {"rule": "Pin versions.", "condition": "installing packages", "tags": {"intent": ["Install Deps"]}},
        format="json",
    )
    assert created.status_code == 201
    body = created.json()
    assert (
        body["code"] == "ex_003" and body["status"] == "draft" and body["tags"]["intent"] == ["install_deps"]
    )
    edited = client.patch(f"/api/experiences/{draft.code}", {"rule": "better", "helpful": 4}, format="json")
    assert edited.json()["rule"] == "better" and edited.json()["helpful"] == 4
    bad = client.patch(f"/api/experiences/{draft.code}", {"tags": {"colour": []}}, format="json")
    assert bad.status_code == 400 and "tags" in bad.json()["error"]
    assert client.get("/api/experiences", {"tag": "install deps"}).json()["count"] == 1
    assert client.get("/api/experiences", {"category": "environment"}).json()["count"] == 1
    assert client.delete(f"/api/experiences/{draft.code}").status_code == 204
    assert not Experience.objects.filter(code=draft.code).exists()


def test_expert_actions_approve_retire_and_votes(api_client, expert, make_experience):
    experience = make_experience(rule="r", status="draft")
    client = api_client(expert)

    approved = client.post(f"/api/experiences/{experience.code}/approve").json()
    assert approved["status"] == "approved" and approved["reviewed_at"]
    assert client.post(f"/api/experiences/{experience.code}/helpful").json()["helpful"] == 1
    assert client.post(f"/api/experiences/{experience.code}/harmful").json()["harmful"] == 1
    assert client.post(f"/api/experiences/{experience.code}/retire").json()["status"] == "retired"
    experience.refresh_from_db()
    assert experience.reviewed_by == expert
    assert client.post("/api/experiences/ex_999/approve").status_code == 404


def test_download_and_upload_experiences_md(api_client, expert, integrator, make_experience):
    make_experience(rule="approved one")
    make_experience(rule="draft one", status="draft")

    download = api_client(expert).get("/api/experiences/export")
    assert download.status_code == 200 and download["Content-Type"].startswith("text/markdown")
    text = download.content.decode()
    assert "approved one" in text and "draft one" in text
    assert "draft one" not in api_client(integrator).get("/api/experiences/export").content.decode()

    Experience.objects.all().delete()
    upload = api_client(expert).post("/api/experiences/import", text, content_type="text/markdown")
    assert upload.status_code == 200 and upload.json() == {"created": ["ex_001", "ex_002"], "updated": []}
    again = api_client(expert).post("/api/experiences/import", {"text": text}, format="json")
    assert again.json() == {"created": [], "updated": ["ex_001", "ex_002"]}

    broken = text + "\n---\nid: ex_003\ntags: [oops\n---\nbody\n"
    refused = api_client(expert).post("/api/experiences/import", broken, content_type="text/markdown")
    assert refused.status_code == 400
    assert refused.json()["code"] == "malformed_experiences" and refused.json()["line"] > 1
    assert Experience.objects.count() == 2
    assert (
        api_client(integrator).post("/api/experiences/import", {"text": text}, format="json").status_code
        == 403
    )


def test_openapi_schema_lists_the_memory_endpoints(api_client, expert):
    schema = api_client(expert).get("/api/schema/", {"format": "json"}).json()
    for path in (
        "/api/experiences",
        "/api/experiences/{code}/approve",
        "/api/traces/{trace_id}/reflect",
        "/api/skills",
    ):
        assert path in schema["paths"]

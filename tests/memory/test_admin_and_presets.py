"""Admin review of experiences (M1, M5) and presets in the database (M7, T5)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from memory.models import AgentPreset as StoredPreset
from memory.models import Experience
from memory.presets import UnknownPreset, get_preset, preset_names
from tests.factories import make_trace
from tests.scripted_llm import Reply, ToolCall
from traces.runner import InvalidRun, RunConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, expert):
    expert.is_superuser = True
    expert.save()
    client.force_login(expert)
    return client


def test_admin_lists_filters_and_searches_experiences(admin_client, make_experience):
    make_experience(rule="Use wc -l.", category="tool_usage", tags={"intent": ["count_lines"]})
    make_experience(rule="Ask before deleting.", status="draft", source="feedback")

    for query, expected, absent in [
        ("status__exact=draft", b"Ask before deleting", b"Use wc -l"),
        ("category__exact=tool_usage", b"Use wc -l", b"Ask before deleting"),
        ("source__exact=feedback", b"Ask before deleting", b"Use wc -l"),
        ("tag=intent%3Acount_lines", b"Use wc -l", b"Ask before deleting"),
        ("q=deleting", b"Ask before deleting", b"Use wc -l"),
    ]:
        page = admin_client.get(f"/admin/memory/experience/?{query}")
        assert page.status_code == 200
        assert expected in page.content and absent not in page.content, query


def test_admin_detail_links_the_evidence(admin_client, make_experience, integrator):
    trace = make_trace(integrator, messages=[("user", "go"), ("assistant", "went")])
    experience = make_experience(
        rule="r",
        trace=trace,
        evidence={
            "trace_id": trace.trace_id,
            "messages": [{"sequence": 2, "message_id": f"{trace.trace_id}-0002"}],
        },
    )

    page = admin_client.get(f"/admin/memory/experience/{experience.pk}/change/").content.decode()

    assert f'href="/admin/traces/trace/{trace.trace_id}/change/"' in page
    assert f'href="/admin/traces/message/{trace.trace_id}-0002/change/">#2</a>' in page


def test_admin_bulk_approve_retire_and_vote_editing(admin_client, expert, make_experience):
    first = make_experience(rule="a", status="draft")
    second = make_experience(rule="b", status="draft")

    admin_client.post(
        "/admin/memory/experience/", {"action": "approve", "_selected_action": [first.pk, second.pk]}
    )
    assert set(Experience.objects.values_list("status", flat=True)) == {"approved"}
    assert Experience.objects.get(pk=first.pk).reviewed_by == expert
    admin_client.post("/admin/memory/experience/", {"action": "retire", "_selected_action": [first.pk]})
    assert Experience.objects.get(pk=first.pk).status == "retired"

    changelist = {
        "form-TOTAL_FORMS": "2",
        "form-INITIAL_FORMS": "2",
        "form-0-id": first.pk,
        "form-0-helpful": "7",
        "form-0-harmful": "1",
        "form-1-id": second.pk,
        "form-1-helpful": "0",
        "form-1-harmful": "2",
        "_save": "Save",
    }
    assert admin_client.post("/admin/memory/experience/", changelist).status_code == 302
    assert Experience.objects.get(pk=first.pk).helpful == 7
    assert Experience.objects.get(pk=second.pk).harmful == 2


def test_admin_adds_an_experience_with_the_next_code(admin_client, make_experience):
    make_experience(rule="existing")
    response = admin_client.post(
        "/admin/memory/experience/add/",
        {
            "status": "draft",
            "category": "logic_flow",
            "scope": "",
            "tags": '{"state": [], "intent": ["plan"]}',
            "condition": "",
            "rule": "Plan first.",
            "source": "manual",
            "confidence": "0.5",
            "helpful": "0",
            "harmful": "0",
            "evidence": "{}",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    assert Experience.objects.get(rule="Plan first.").code == "ex_002"


def test_builtin_presets_are_stored_and_editable(admin_client):
    assert set(StoredPreset.objects.values_list("name", flat=True)) >= {"default", "explore", "analyst"}
    page = admin_client.get("/admin/memory/agentpreset/")
    assert page.status_code == 200 and b"explore" in page.content

    StoredPreset.objects.filter(name="explore").update(max_iterations=2)
    assert get_preset("explore").max_iterations == 2


def test_load_presets_command_stores_presets_for_every_process(tmp_path):
    path = tmp_path / "presets.json"
    path.write_text(
        json.dumps(
            {"reviewer": {"allowed_tools": ["read", "grep"], "max_iterations": 4, "skills": ["research"]}}
        ),
        encoding="utf-8",
    )
    out = io.StringIO()
    call_command("load_presets", str(path), stdout=out)

    assert "stored 1 preset(s): reviewer" in out.getvalue()
    preset = get_preset("reviewer")
    assert preset.allowed_tools == ["read", "grep"] and preset.max_iterations == 4
    assert "reviewer" in preset_names()
    path.write_text(json.dumps({"x": {"colour": "red"}}), encoding="utf-8")
    with pytest.raises(CommandError, match="unknown field"):
        call_command("load_presets", str(path))
    with pytest.raises(UnknownPreset, match="known presets: .*reviewer"):
        get_preset("nope")


def test_the_runner_enforces_a_stored_preset(runner, llm):
    StoredPreset.objects.create(
        name="reader",
        allowed_tools=["read", "list_files", "bash"],
        denied_tools=["bash"],
        max_iterations=2,
        temperature=0.1,
        skills=[],
    )
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("bash", {"command": "ls"})]),
            Reply(tool_calls=[ToolCall("list_files", {})]),
        ],
    )

    result = runner.run_result([{"role": "user", "content": "x"}], RunConfig(name="n", agent_type="reader"))

    first = llm.requests_for("scripted")[0]
    offered = sorted(t["function"]["name"] for t in first.body["tools"])
    assert offered == ["list_files", "read"]
    assert first.body["temperature"] == 0.1
    assert "## Skill:" not in first.messages[0]["content"]
    bash_result = next(m for m in llm.requests_for("scripted")[1].messages if m["role"] == "tool")
    assert "Unknown tool 'bash'" in bash_result["content"]  # denied: not executable either
    assert result.status == "stopped" and result.error.startswith("step limit: 2 steps")
    with pytest.raises(InvalidRun, match="unknown preset"):
        runner.run_result([{"role": "user", "content": "x"}], RunConfig(agent_type="missing"))


def test_admin_merges_tags_across_spellings(admin_client, make_experience):
    from memory.retrieval import experience_search

    first = make_experience(rule="a", tags={"state": ["container_image"], "intent": ["ship"]})
    second = make_experience(rule="b", tags={"state": ["Container images", "ci"]})
    untouched = make_experience(rule="c", tags={"state": ["gpu"]})
    selected = [first.pk, second.pk, untouched.pk]

    refused = admin_client.post(
        "/admin/memory/experience/",
        {"action": "merge_tags", "_selected_action": selected, "tags_from": "", "tags_into": "x"},
        follow=True,
    )
    assert "Name the tags to merge" in refused.content.decode()
    admin_client.post(
        "/admin/memory/experience/",
        {
            "action": "merge_tags",
            "_selected_action": selected,
            "tags_from": "container image, docker_images",
            "tags_into": "docker image",
        },
    )

    first.refresh_from_db()
    second.refresh_from_db()
    untouched.refresh_from_db()
    assert first.tags == {"state": ["docker_image"], "intent": ["ship"]}
    assert second.tags == {"state": ["docker_image", "ci"], "intent": []}
    assert untouched.tags == {"state": ["gpu"], "intent": []}
    found = experience_search(tags={"state": ["docker image"]}, k=5)
    assert {s.experience.code for s in found} == {first.code, second.code}

"""Trace export / import (issue 26 item 8): seed 004's layout, round trip through the API
and the commands, sub-traces included; bad archives are 400s, an existing id a 409."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from django.core.management import CommandError, call_command

from tests.scripted_llm import Reply, ToolCall
from traces.models import Goal, Message, Trace, TraceEvent
from traces.runner import RunConfig
from traces.services.delete import trace_delete

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished(runner, llm, integrator):
    """A run that planned, delegated to a sub-agent and answered."""
    llm.script(
        "scripted",
        [
            Reply(tool_calls=[ToolCall("goal", {"add": "count the files"})]),
            Reply(tool_calls=[ToolCall("agent", {"task": "count the files"})]),
            "there are none",  # the sub-agent
            "none at all",
        ],
    )
    result = runner.run_result(
        [{"role": "user", "content": "count files"}], RunConfig(owner_id=integrator.pk)
    )
    assert result.status == "completed"
    return Trace.objects.get(pk=result.trace_id)


def snapshot(trace_ids):
    rows = {}
    for tid in trace_ids:
        t = Trace.objects.get(pk=tid)
        rows[tid] = {
            "trace": (t.task, t.status, t.parent_trace_id, t.total_tokens, t.head_sequence, t.context),
            "messages": list(
                Message.objects.filter(trace_id=tid)
                .order_by("sequence")
                .values_list(
                    "message_id", "role", "sequence", "parent_sequence", "content", "tool_calls", "created_at"
                )
            ),
            "goals": list(
                Goal.objects.filter(trace_id=tid).values_list(
                    "goal_id", "description", "status", "sub_trace_ids"
                )
            ),
            "events": list(
                TraceEvent.objects.filter(trace_id=tid)
                .order_by("event_id")
                .values_list("event_id", "type", "payload")
            ),
        }
    return rows


def test_an_exported_trace_imports_into_another_place_unchanged(api_client, integrator, expert, finished):
    child = Trace.objects.get(parent_trace_id=finished.trace_id)
    before = snapshot([finished.trace_id, child.trace_id])
    assert before[finished.trace_id]["goals"] and before[child.trace_id]["messages"]

    exported = api_client(integrator).get(f"/api/traces/{finished.trace_id}/export")
    assert exported.status_code == 200 and exported["Content-Type"] == "application/gzip"
    archive = exported.content
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = set(tar.getnames())
    root = finished.trace_id
    assert {f"{root}/meta.json", f"{root}/goal.json", f"{root}/events.jsonl"} <= names
    assert f"{root}/messages/{root}-0001.json" in names and f"{child.trace_id}/meta.json" in names

    trace_delete(user=expert, trace_id=root)
    assert not Trace.objects.filter(pk__in=[root, child.trace_id]).exists()
    upload = io.BytesIO(archive)
    upload.name = "trace.tar.gz"
    imported = api_client(expert).post("/api/traces/import", {"archive": upload}, format="multipart")
    assert imported.status_code == 201, imported.json()
    assert imported.json() == {"trace_id": root, "status": "completed"}
    after = snapshot([root, child.trace_id])
    for tid in before:
        for key in before[tid]:
            assert after[tid][key] == before[tid][key], (tid, key)
    assert Trace.objects.get(pk=root).owner == expert  # the importer owns it

    upload.seek(0)
    again = api_client(expert).post("/api/traces/import", {"archive": upload}, format="multipart")
    assert again.status_code == 409 and "exists here already" in again.json()["error"]


def _tar(files: dict[str, str]) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    buffer.name = "x.tar.gz"
    return buffer


@pytest.mark.parametrize(
    ("upload", "reason"),
    [
        (io.BytesIO(b"not a tar at all"), "not a readable .tar.gz"),
        (_tar({"t/meta.json": "{nope"}), "t/meta.json: not JSON"),
        (_tar({"t/meta.json": json.dumps({"trace_id": "t"})}), "not an agentsite trace export"),
        (
            _tar(
                {
                    "t/meta.json": json.dumps(
                        {"format": "agentsite-trace/1", "trace_id": "t", "total_tokens": "many"}
                    )
                }
            ),
            "total_tokens",
        ),
        (_tar({"readme.txt": "hi"}), "no trace in it"),
    ],
)
def test_bad_archives_are_400s_naming_the_fault(api_client, integrator, upload, reason):
    if not getattr(upload, "name", None):
        upload.name = "x.tar.gz"
    answer = api_client(integrator).post("/api/traces/import", {"archive": upload}, format="multipart")
    assert answer.status_code == 400 and reason in answer.json()["error"], answer.json()
    assert not Trace.objects.filter(pk="t").exists()


def test_a_stranger_cannot_export_and_an_import_of_a_running_trace_arrives_stopped(
    api_client, stranger, integrator, finished, tmp_path
):
    assert api_client(stranger).get(f"/api/traces/{finished.trace_id}/export").status_code == 404
    assert api_client().post("/api/traces/import", {}).status_code == 401
    call_command("export_trace", finished.trace_id, str(tmp_path / "out"))
    meta = tmp_path / "out" / finished.trace_id / "meta.json"
    data = json.loads(meta.read_text())
    assert "run_token" not in data and data["owner"] == "integrator"
    data["status"] = "running"
    meta.write_text(json.dumps(data))
    Trace.objects.filter(pk__in=[finished.trace_id, f"{finished.trace_id}@x"]).delete()
    Trace.objects.filter(parent_trace_id=finished.trace_id).delete()
    call_command("import_trace", str(tmp_path / "out"), "--user", "stranger")
    imported = Trace.objects.get(pk=finished.trace_id)
    assert imported.status == "stopped" and "imported while its run" in imported.error_message
    assert imported.owner == stranger
    with pytest.raises(CommandError, match="exists here already"):
        call_command("import_trace", str(tmp_path / "out"), "--user", "stranger")

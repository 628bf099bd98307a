"""Deleting a trace and pruning old ones (issue 25): the API's authorisation matrix, runs
in flight refused, a recursive delete that leaves no row or file behind (counted), the
portal's confirmation, the admin, and `prune_traces` (dry run, batches, 10,000 traces)."""

from __future__ import annotations

import io
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from memory.models import Experience
from tests.factories import make_trace
from traces.media.blobs import blob_path, blob_put
from traces.media.parts import MEDIA_PREFIX
from traces.models import Approval, Goal, InboxMessage, Message, Trace, TraceEvent, TraceStatus
from traces.runner.tool_api import workspace_for
from traces.services.delete import trace_delete, traces_prune

pytestmark = pytest.mark.django_db


def rows_of(ids: list[str]) -> dict[str, int]:
    return {
        "traces": Trace.objects.filter(pk__in=ids).count(),
        "messages": Message.objects.filter(trace_id__in=ids).count(),
        "events": TraceEvent.objects.filter(trace_id__in=ids).count(),
        "goals": Goal.objects.filter(trace_id__in=ids).count(),
        "approvals": Approval.objects.filter(trace_id__in=ids).count(),
        "inbox": InboxMessage.objects.filter(to_trace_id__in=ids).count(),
    }


def furnish(trace: Trace) -> None:
    """An event, a goal, an approval and an inbox message, as a run and its users leave them."""
    now = timezone.now()
    TraceEvent.objects.create(trace=trace, event_id=1, type="started", payload={}, created_at=now)
    Goal.objects.create(trace=trace, goal_id="1", description="the goal", position=0)
    Approval.objects.create(
        trace=trace, tool_call_id=f"call-{uuid.uuid4().hex[:8]}", message_sequence=1, tool_name="write"
    )
    InboxMessage.objects.create(to_trace=trace, from_agent_id="peer", content="a note")


@pytest.fixture
def tree(integrator: Any, workspace_root: Path, settings: Any, tmp_path: Path) -> dict[str, Any]:
    """A root with a child and a grandchild, each furnished, a workspace with files and a
    spill file, an image only it uses and one another trace uses too, and an experience."""
    settings.AGENT_MEDIA_ROOT = tmp_path / "media"
    own_image, shared_image = blob_put(b"only-this-trace"), blob_put(b"shared")
    root = make_trace(
        integrator,
        messages=[
            ("user", [{"type": "image_url", "image_url": {"url": MEDIA_PREFIX + own_image}}]),
            ("assistant", f"see {MEDIA_PREFIX}{shared_image}"),
        ],
    )
    child = make_trace(
        integrator, trace_id=f"{root.pk}@explore-001", parent_trace=root, messages=[("user", "go")]
    )
    grandchild = make_trace(
        integrator, trace_id=f"{child.pk}@delegate-001", parent_trace=child, messages=[("user", "deeper")]
    )
    for trace in (root, child, grandchild):
        furnish(trace)
    workspace = workspace_for(root.pk)
    (workspace / "notes.md").write_text("files the run made")
    (workspace / ".agentsite" / "spill").mkdir(parents=True)
    (workspace / ".agentsite" / "spill" / f"{Message.make_id(child.pk, 1)}.txt").write_text("spilled")
    other = make_trace(integrator, messages=[("user", f"{MEDIA_PREFIX}{shared_image}")])
    furnish(other)
    (workspace_for(other.pk) / "keep.txt").write_text("another trace's file")
    experience = Experience.objects.create(
        code="ex_901", rule="check the path", trace=root, evidence={"trace_id": root.pk, "messages": []}
    )
    return {
        "root": root,
        "ids": [root.pk, child.pk, grandchild.pk],
        "workspace": workspace,
        "other": other,
        "own_image": own_image,
        "shared_image": shared_image,
        "experience": experience,
    }


def test_a_recursive_delete_leaves_no_row_and_no_file_of_the_tree(
    tree: dict[str, Any], api_client: Any
) -> None:
    root, ids, other = tree["root"], tree["ids"], tree["other"]
    assert rows_of(ids) == {"traces": 3, "messages": 4, "events": 3, "goals": 3, "approvals": 3, "inbox": 3}
    before_other = rows_of([other.pk])

    response = api_client(root.owner).delete(f"/api/traces/{root.pk}")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "deleted"
    assert body["deleted"] == {
        "traces": 3, "messages": 4, "events": 3, "goals": 3, "approvals": 3, "inbox": 3,
        "files": 2, "blobs": 1,  # notes.md and the spill file; the image only this trace used
    }  # fmt: skip
    assert rows_of(ids) == dict.fromkeys(("traces", "messages", "events", "goals", "approvals", "inbox"), 0)
    assert not tree["workspace"].exists()
    assert not blob_path(tree["own_image"]).exists()
    assert blob_path(tree["shared_image"]).exists()  # another trace still shows it
    assert rows_of([other.pk]) == before_other
    assert (workspace_for(other.pk) / "keep.txt").read_text() == "another trace's file"
    experience = Experience.objects.get(pk=tree["experience"].pk)
    assert experience.rule == "check the path" and experience.trace_id is None
    assert experience.evidence["trace_id"] == root.pk and experience.evidence_deleted
    assert experience.evidence_trace_id is None  # nothing links to the deleted trace


def test_deleting_a_sub_trace_keeps_its_root_and_the_shared_workspace(tree: dict[str, Any]) -> None:
    root, child_id = tree["root"], tree["ids"][1]
    deleted = trace_delete(user=root.owner, trace_id=child_id)
    assert (deleted.traces, deleted.files) == (2, 1)  # the child and grandchild; the child's spill file
    assert Trace.objects.filter(pk__in=tree["ids"]).count() == 1
    assert (tree["workspace"] / "notes.md").exists()


@pytest.mark.parametrize(
    ("who", "expected"),
    [("owner", 200), ("expert", 200), ("stranger", 404), ("anonymous", 401)],
)
def test_who_may_delete(
    who: str, expected: int, integrator: Any, expert: Any, stranger: Any, api_client: Any
) -> None:
    trace = make_trace(integrator, messages=[("user", "hi")])
    user = {"owner": integrator, "expert": expert, "stranger": stranger, "anonymous": None}[who]
    response = api_client(user).delete(f"/api/traces/{trace.pk}")
    assert response.status_code == expected, response.content
    assert set(response.json()) >= (
        {"trace_id", "status", "deleted"} if expected == 200 else {"error", "code"}
    )
    assert Trace.objects.filter(pk=trace.pk).exists() == (expected != 200)


def test_a_trace_with_a_run_in_flight_is_refused_unless_staff_force_it(
    integrator: Any, expert: Any, api_client: Any, workspace_root: Path
) -> None:
    running = make_trace(integrator, status=TraceStatus.RUNNING, heartbeat_at=timezone.now())
    queued = make_trace(integrator, status=TraceStatus.QUEUED)
    child_waiting = make_trace(
        integrator, trace_id=f"{running.pk}@human-001", parent_trace=running, status=TraceStatus.WAITING
    )

    refused = api_client(integrator).delete(f"/api/traces/{running.pk}")
    assert refused.status_code == 409 and "stop it first" in refused.json()["error"]
    assert (
        api_client(integrator).delete(f"/api/traces/{queued.pk}?force=true").status_code == 409
    )  # not staff
    bad = api_client(expert).delete(f"/api/traces/{queued.pk}?force=maybe")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"
    assert Trace.objects.filter(pk__in=[running.pk, queued.pk, child_waiting.pk]).count() == 3

    forced = api_client(expert).delete(f"/api/traces/{queued.pk}?force=true")  # a queued run stops at once
    assert forced.status_code == 200, forced.content
    assert not Trace.objects.filter(pk=queued.pk).exists()


def test_the_portal_confirms_naming_what_goes_then_deletes(tree: dict[str, Any], client: Any) -> None:
    root = tree["root"]
    client.force_login(root.owner)
    page = client.get(f"/traces/{root.pk}/delete/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "2 sub-traces" in text and "4 messages" in text and "workspace and spill files" in text
    assert Trace.objects.filter(pk=root.pk).exists()  # the GET deleted nothing
    done = client.post(f"/traces/{root.pk}/delete/")
    assert done.status_code == 302 and done.url == "/"
    assert not Trace.objects.filter(pk__in=tree["ids"]).exists()


def test_the_admin_deletes_through_the_service(
    tree: dict[str, Any], django_user_model: Any, client: Any
) -> None:
    client.force_login(
        django_user_model.objects.create_superuser("admin", "admin@example.com", "pw-admin-123")
    )
    root = tree["root"]
    confirm = client.post(
        "/admin/traces/trace/", {"action": "delete_selected", "_selected_action": [root.pk]}
    )
    assert confirm.status_code == 200 and b"2 sub-trace(s): 4 messages" in confirm.content
    done = client.post(
        "/admin/traces/trace/", {"action": "delete_selected", "_selected_action": [root.pk], "post": "yes"}
    )
    assert done.status_code == 302
    assert rows_of(tree["ids"])["traces"] == 0 and not tree["workspace"].exists()


def old(trace: Trace, days: int) -> Trace:
    Trace.objects.filter(pk=trace.pk).update(updated_at=timezone.now() - timedelta(days=days))
    return trace


def test_prune_dry_run_changes_nothing_and_prune_keeps_what_it_must(
    tree: dict[str, Any], integrator: Any
) -> None:
    old(tree["root"], 40)
    recent = make_trace(integrator, messages=[("user", "new")])
    old_running = old(make_trace(integrator, status=TraceStatus.RUNNING), 40)
    old_failed = old(make_trace(integrator, status=TraceStatus.FAILED, messages=[("user", "x")]), 40)
    everything = list(Trace.objects.values_list("pk", flat=True))

    out = io.StringIO()
    call_command("prune_traces", "--older-than", "30d", "--dry-run", stdout=out)
    assert "would delete 2 root traces" in out.getvalue() and "4 traces" in out.getvalue()
    assert sorted(Trace.objects.values_list("pk", flat=True)) == sorted(everything)
    assert tree["workspace"].exists()

    out = io.StringIO()
    call_command("prune_traces", "--older-than", "30d", "--status", "completed", stdout=out)
    assert "deleted 1 root traces" in out.getvalue()
    left = set(Trace.objects.values_list("pk", flat=True))
    assert left == {recent.pk, old_running.pk, old_failed.pk, tree["other"].pk}

    with pytest.raises(CommandError, match="unit"):
        call_command("prune_traces", "--older-than", "30 days")
    with pytest.raises(CommandError, match="never pruned"):
        call_command("prune_traces", "--older-than", "1d", "--status", "running")


def test_prune_on_10000_old_traces_keeps_the_running_ones(integrator: Any, workspace_root: Path) -> None:
    long_ago = timezone.now() - timedelta(days=90)
    Trace.objects.bulk_create(
        Trace(
            trace_id=f"old-{index:05d}",
            task="t",
            status=TraceStatus.COMPLETED if index % 500 else TraceStatus.RUNNING,
            owner=integrator,
            created_at=long_ago,
            updated_at=long_ago,
        )
        for index in range(10_000)
    )
    Message.objects.bulk_create(
        Message(
            message_id=Message.make_id(f"old-{index:05d}", 1),
            trace_id=f"old-{index:05d}",
            role="user",
            sequence=1,
            content="x",
        )
        for index in range(0, 10_000, 7)
    )

    summary = traces_prune(older_than=timedelta(days=30), batch=500)

    assert len(summary.trace_ids) == 9_980 and summary.traces == 9_980
    assert summary.messages == 1_429 - 3  # every 7th trace had one; 3 of those (0, 3500, 7000) run
    left = Trace.objects.all()
    assert left.count() == 20 and set(left.values_list("status", flat=True)) == {TraceStatus.RUNNING}
    assert Message.objects.exclude(trace_id__in=left.values("pk")).count() == 0

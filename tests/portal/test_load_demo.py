"""`manage.py load_demo`: demo data without a model key (issue 5 item 8)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from memory.models import Experience, ExperienceStatus
from tests.factories import make_user
from traces.models import Approval, ApprovalStatus, Trace, TraceStatus
from traces.selectors import trace_main_path, trace_messages

pytestmark = pytest.mark.django_db


def test_load_demo_builds_every_kind_of_trace(settings):
    settings.AGENT_MODEL = None  # no model: nothing here may call one
    make_user("expert", staff=True)
    call_command("load_demo")

    sales = Trace.objects.get(name="Quarterly sales summary")
    main = [m.sequence for m in trace_main_path(trace_id=sales.trace_id)]
    everything = [m.sequence for m in trace_messages(trace_id=sales.trace_id)]
    # #7 is the branch the rewind left behind, #12-13 the reflection's side branch
    assert main == [1, 2, 3, 4, 5, 6, 8, 9, 10, 11]
    assert everything == list(range(1, 14))
    assert sales.goals.filter(parent_id="2").exists()
    root = sales.goals.get(goal_id="2")
    assert root.self_stats["total_tokens"] > 0
    assert root.cumulative_stats["message_count"] > root.self_stats["message_count"]  # with goal 2.1

    research = Trace.objects.get(name="Competitor pricing scan")
    child = research.sub_traces.get()
    assert research.goals.get(goal_id="1").sub_trace_ids == [child.trace_id]

    waiting = Trace.objects.get(name="Delete merged deployment branches", status=TraceStatus.WAITING)
    assert Approval.objects.get(trace=waiting).status == ApprovalStatus.PENDING
    asking = Trace.objects.get(name="Schedule the database migration", status=TraceStatus.WAITING)
    assert asking.sub_traces.get().agent_type == "human"
    assert Trace.objects.filter(needs_attention=True, status=TraceStatus.FAILED).count() == 1
    statuses = set(Experience.objects.values_list("status", flat=True))
    assert statuses == {ExperienceStatus.DRAFT, ExperienceStatus.APPROVED, ExperienceStatus.RETIRED}
    for trace in Trace.objects.all():
        assert list(trace.events.values_list("event_id", flat=True)) == list(
            range(1, trace.last_event_id + 1)
        )


def test_load_demo_refuses_twice_unless_reset():
    make_user("expert", staff=True)
    call_command("load_demo")
    with pytest.raises(CommandError, match="--reset"):
        call_command("load_demo")
    call_command("load_demo", reset=True)
    assert Trace.objects.filter(uid="demo", parent_trace__isnull=True).count() == 6
    assert Experience.objects.count() == 5


def test_demo_times_agree_the_question_was_asked_when_its_run_began_to_wait():
    make_user("expert", staff=True)
    call_command("load_demo")

    asking = Trace.objects.get(name="Schedule the database migration")
    question = asking.sub_traces.get()
    assert question.created_at == question.updated_at == asking.updated_at
    assert timezone.now() - question.created_at > timedelta(hours=1)  # "asked 2 hours ago", not 0 minutes
    assert set(question.messages.values_list("created_at", flat=True)) == {asking.updated_at}
    assert set(question.events.values_list("created_at", flat=True)) == {asking.updated_at}
    for trace in Trace.objects.all():
        assert trace.created_at <= trace.updated_at, trace.name
        times = [*trace.messages.values_list("created_at", flat=True)]
        times += [*trace.events.values_list("created_at", flat=True)]
        times += [*trace.approvals.values_list("requested_at", flat=True)]
        assert all(trace.created_at <= t <= trace.updated_at for t in times), trace.name

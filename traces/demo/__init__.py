"""Demo data: realistic traces and experiences written directly, no model key needed.

A completed trace with a rewind branch, goals with stats and a reflection side
branch (`runs.sales_report`); a trace that delegated to a sub-trace; one waiting
for an expert's approval, one for an answer (ask_human); one flagged by loop
detection; a stopped one; and experiences in draft, approved and retired
(`experiences.py`). Rows are built by `builder.DemoTrace`. Demo traces carry
uid "demo"; `demo_load` replaces what an earlier load wrote.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from memory.models import Experience, ExperienceSource
from traces.demo import runs
from traces.demo.builder import DEMO_UID
from traces.demo.experiences import experiences
from traces.models import Trace

# The demo's experiences that point at no trace, found by these conditions.
_UNLINKED_CONDITIONS = ["deleting branches, tags or history", "any task"]


def demo_traces() -> QuerySet[Trace]:
    """Every trace the demo wrote, sub-traces included."""
    return Trace.objects.filter(uid=DEMO_UID)


@transaction.atomic
def demo_load(*, owner: Any) -> tuple[int, int]:
    """Replace the demo data with a fresh set owned by `owner`; (traces, experiences) written."""
    Experience.objects.filter(trace__uid=DEMO_UID).delete()
    Experience.objects.filter(
        condition__in=_UNLINKED_CONDITIONS, trace__isnull=True, source=ExperienceSource.MANUAL
    ).delete()
    demo_traces().delete()
    base = timezone.now() - timedelta(hours=6)
    sales, refs = runs.sales_report(owner, base)
    runs.competitor_research(owner, base + timedelta(hours=1))
    flaky = runs.flaky_test(owner, base + timedelta(hours=2))
    runs.stopped_run(owner, base + timedelta(hours=3))
    runs.migration_window(owner, base + timedelta(hours=4))
    runs.branch_cleanup(owner, base + timedelta(hours=5))
    created = experiences(sales, refs, flaky)
    return demo_traces().count(), len(created)

"""The trace list's filters (traces/filters.py), shared by the API and the portal."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import make_trace
from traces.filters import PortalTraceFilter, TraceFilter
from traces.models import Trace, TraceStatus

pytestmark = pytest.mark.django_db


def names(filterset: type[TraceFilter], **data: Any) -> list[str]:
    return sorted(filterset(data, queryset=Trace.objects.all()).qs.values_list("name", flat=True))


def test_blank_and_unreadable_values_filter_nothing(integrator):
    make_trace(integrator, name="one")
    make_trace(integrator, name="two", status=TraceStatus.FAILED)

    assert names(TraceFilter, status="", q="", agent_type="") == ["one", "two"]
    assert names(TraceFilter, status="sleeping") == ["one", "two"]
    assert names(TraceFilter, status="failed") == ["two"]


def test_attention_means_waiting_or_flagged(integrator):
    make_trace(integrator, name="waits", status=TraceStatus.WAITING)
    make_trace(integrator, name="flagged", status=TraceStatus.FAILED, needs_attention=True)
    make_trace(integrator, name="fine")

    assert names(TraceFilter, status="attention") == ["flagged", "waits"]


def test_parent_none_lists_top_level_traces_and_an_id_lists_its_children(integrator):
    top = make_trace(integrator, name="top")
    make_trace(integrator, name="child", parent_trace=top)

    assert names(TraceFilter, parent="none") == ["top"]
    assert names(TraceFilter, parent=top.trace_id) == ["child"]


def test_the_portal_search_also_finds_a_trace_by_its_id(integrator):
    trace = make_trace(integrator, name="report", task="count the files", trace_id="abc-123-xyz")

    assert names(TraceFilter, q="FILES") == names(PortalTraceFilter, q="files") == ["report"]
    assert names(TraceFilter, q="123-x") == []
    assert names(PortalTraceFilter, q="123-x") == [trace.name]

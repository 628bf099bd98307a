"""The trace list's filters (W2, P1), shared by `GET /api/traces` and the portal's list.

Who sees which traces is not a filter: callers pass `traces_visible_to(user)` as
the queryset. The API checks its query first (`TraceListQuerySerializer`, strict
and described in the schema); the portal passes its GET parameters as they come,
where a blank or unknown value filters nothing.
"""

from __future__ import annotations

from typing import ClassVar

import django_filters
from django.db.models import Q, QuerySet

from traces.models import Trace, TraceStatus

ATTENTION = "attention"  # waiting for an expert, or flagged by a guard (the portal's filter)
TOP_LEVEL = "none"  # parent=none: traces that are nobody's sub-trace


def needs_expert() -> Q:
    """Traces an expert should look at: waiting (an approval or an answer) or flagged."""
    return Q(needs_attention=True) | Q(status=TraceStatus.WAITING)


class TraceFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(
        choices=[*TraceStatus.choices, (ATTENTION, "needs attention")], method="filter_status"
    )
    agent_type = django_filters.CharFilter()
    uid = django_filters.CharFilter()
    parent = django_filters.CharFilter(method="filter_parent", help_text="a trace id, or 'none'")
    q = django_filters.CharFilter(method="filter_text", help_text="text in the name or task")

    search_fields: ClassVar[tuple[str, ...]] = ("name", "task")

    class Meta:
        model = Trace
        fields: ClassVar[list[str]] = []

    def filter_status(self, traces: QuerySet[Trace], name: str, value: str) -> QuerySet[Trace]:
        return traces.filter(needs_expert() if value == ATTENTION else Q(status=value))

    def filter_parent(self, traces: QuerySet[Trace], name: str, value: str) -> QuerySet[Trace]:
        if value == TOP_LEVEL:
            return traces.filter(parent_trace__isnull=True)
        return traces.filter(parent_trace_id=value)

    def filter_text(self, traces: QuerySet[Trace], name: str, value: str) -> QuerySet[Trace]:
        match = Q()
        for field in self.search_fields:
            match |= Q(**{f"{field}__icontains": value})
        return traces.filter(match)


class PortalTraceFilter(TraceFilter):
    """The portal's search box also finds a trace by (part of) its id."""

    search_fields = ("name", "task", "trace_id")

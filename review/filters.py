"""The trace list filtered and sorted by score (X6), for `GET /api/traces` and the portal.

Filters and the sort look at trace-level scores (not message scores) of ONE
definition, named by `score`: `score_min` / `score_max` bound the value (numeric
and boolean, where true is 1), `score_label` matches a category (or "true"/"false"),
`scored=false` keeps the traces nobody scored with it; `ordering=score` / `-score`
sorts by the average of experts' values (`score_average`, annotated
whenever `score` is given), unscored traces last.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Avg, Exists, F, OuterRef, Q, QuerySet

from review.models import Score
from traces.filters import PortalTraceFilter, TraceFilter
from traces.models import Trace

SCORE_ORDERINGS = ("score", "-score")


class ScoreFilterMixin(django_filters.FilterSet):
    score = django_filters.CharFilter(method="filter_nothing", help_text="a score definition's name")
    score_min = django_filters.NumberFilter(method="filter_nothing")
    score_max = django_filters.NumberFilter(method="filter_nothing")
    score_label = django_filters.CharFilter(method="filter_nothing")
    scored = django_filters.BooleanFilter(method="filter_nothing")
    ordering = django_filters.ChoiceFilter(
        choices=[(o, o) for o in SCORE_ORDERINGS],
        method="filter_nothing",
        help_text="by the `score` definition",
    )

    def filter_nothing(self, traces: QuerySet[Trace], name: str, value: Any) -> QuerySet[Trace]:
        return traces  # all score parameters act together in filter_queryset

    def filter_queryset(self, queryset: QuerySet[Trace]) -> QuerySet[Trace]:
        traces = super().filter_queryset(queryset)
        data = self.form.cleaned_data
        if not data.get("score"):
            return traces
        return scored_traces(
            traces,
            definition=data["score"],
            minimum=data.get("score_min"),
            maximum=data.get("score_max"),
            label=data.get("score_label") or "",
            scored=data.get("scored"),
            ordering=data.get("ordering") or "",
        )


def scored_traces(
    traces: QuerySet[Trace],
    *,
    definition: str,
    minimum: Any = None,
    maximum: Any = None,
    label: str = "",
    scored: bool | None = None,
    ordering: str = "",
) -> QuerySet[Trace]:
    scores = Score.objects.filter(trace=OuterRef("pk"), definition__name=definition, message__isnull=True)
    if minimum is not None:
        scores = scores.filter(value__gte=minimum)
    if maximum is not None:
        scores = scores.filter(value__lte=maximum)
    if label:
        scores = scores.filter(label=label)
    narrowed = minimum is not None or maximum is not None or bool(label)
    if scored is False:
        traces = traces.exclude(Exists(scores))
    elif narrowed or scored:
        traces = traces.filter(Exists(scores))
    mine = Q(scores__definition__name=definition, scores__message__isnull=True)
    traces = traces.annotate(score_average=Avg("scores__value", filter=mine))
    if ordering in SCORE_ORDERINGS:
        average = F("score_average")
        first = average.asc(nulls_last=True) if ordering == "score" else average.desc(nulls_last=True)
        traces = traces.order_by(first, "-created_at", "-trace_id")
    return traces


class ScoredTraceFilter(ScoreFilterMixin, TraceFilter):
    pass


class PortalScoredTraceFilter(ScoreFilterMixin, PortalTraceFilter):
    pass

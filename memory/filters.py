"""The experience list's filters (W2, P4), shared by `/api/experiences` (and its
export) and the portal's review queue, through `memory/selectors.py:experience_list`.

Who sees which experiences is not a filter: the selector starts from
`experiences_visible_to(user)`. The API checks its query first
(`ExperienceListQuerySerializer`); a blank or unknown value here filters nothing.
"""

from __future__ import annotations

from typing import ClassVar

import django_filters
from django.db.models import Q, QuerySet

from memory.models import Experience, ExperienceSource, ExperienceStatus, canonical_tag


class ExperienceFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=ExperienceStatus.choices)
    category = django_filters.CharFilter()
    source = django_filters.ChoiceFilter(choices=ExperienceSource.choices)
    tag = django_filters.CharFilter(method="filter_tag", help_text="a state or intent tag")
    q = django_filters.CharFilter(method="filter_text", help_text="words in the condition or rule")

    class Meta:
        model = Experience
        fields: ClassVar[list[str]] = []

    def filter_tag(self, experiences: QuerySet[Experience], name: str, value: str) -> QuerySet[Experience]:
        tag = f" {canonical_tag(value)} "  # the indexes hold " tag tag ", canonical (build_indexes)
        return experiences.filter(Q(intent_index__contains=tag) | Q(state_index__contains=tag))

    def filter_text(self, experiences: QuerySet[Experience], name: str, value: str) -> QuerySet[Experience]:
        return experiences.filter(Q(condition__icontains=value) | Q(rule__icontains=value))

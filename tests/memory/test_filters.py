"""The experience list's filters (memory/filters.py), shared by the API and the portal."""

from __future__ import annotations

from typing import Any

import pytest

from memory.filters import ExperienceFilter
from memory.models import Experience, ExperienceStatus
from memory.services import experience_create

pytestmark = pytest.mark.django_db


def codes(**data: Any) -> list[str]:
    return list(
        ExperienceFilter(data, queryset=Experience.objects.all())
        .qs.order_by("code")
        .values_list("code", flat=True)
    )


def test_tags_are_matched_as_normalised_words_and_text_in_condition_or_rule():
    wc = experience_create(
        rule="Count lines with wc -l.", condition="text files", tags={"intent": ["count_lines"], "state": []}
    )
    sums = experience_create(
        rule="Compute sums with a script.", condition="tables", status=ExperienceStatus.APPROVED
    )

    assert codes(tag="Count Lines") == [wc.code]
    assert codes(tag="count") == []  # a whole tag, not part of one
    assert codes(q="TABLES") == codes(q="script") == [sums.code]
    assert codes(status="approved") == [sums.code]
    assert codes(status="", q="", tag="", category="") == [wc.code, sums.code]

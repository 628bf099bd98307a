"""The write gate of memory entries (M8): what it lets through and what it refuses, and why."""

from __future__ import annotations

from datetime import date

import pytest

from memory.entries.gate import Draft, MemoryRefused, check

STRUCTURED = "Rule: answer in French.\nWhy: the team reads French.\nHow to apply: every reply to this user."
TODAY = date(2026, 11, 23)


def draft(type: str = "user", content: str = "Prefers short answers.", **fields: object) -> Draft:
    values: dict[str, object] = {"name": "style", "description": "", "keywords": [], **fields}
    return Draft(type=type, content=content, **values)  # type: ignore[arg-type]


def refusal(d: Draft) -> str:
    with pytest.raises(MemoryRefused) as caught:
        check(d, today=TODAY)
    return str(caught.value)


@pytest.mark.parametrize(
    "entry",
    [
        draft("user", "Senior data scientist; new to the frontend; prefers terse answers."),
        draft("feedback", STRUCTURED),
        draft("project", STRUCTURED + "\nThe freeze starts on 2026-12-01."),
        draft("project", "Rule：冻结从 2026-12-01 开始。\nWhy：发布。\nHow to apply：不要合并。"),
        draft(
            "reference",
            "Bugs are tracked in the INGEST board; dashboards at https://grafana.example.com/d/api.json",
        ),
        draft("user", "Uses and/or prefers input/output diagrams; 50% = half."),
    ],
)
def test_the_gate_lets_memorable_notes_through(entry):
    assert check(entry, today=TODAY).content == entry.content.strip()


def test_the_gate_trims_names_keywords_and_type():
    checked = check(draft(" User ", name="  prefers   terse ", keywords=[" a  b ", "", "c"]), today=TODAY)
    assert (checked.type, checked.name, checked.keywords) == ("user", "prefers terse", ["a b", "c"])


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("Use this:\n```python\nprint(1)\n```", "fenced code block"),
        ("~~~\nls\n~~~", "fenced code block"),
        ("def handler(event):", "code statement ('def handler(')"),
        ("class Foo(Base):", "code statement"),
        ("import os", "code statement ('import os')"),
        ("from django.db import models", "code statement"),
        ("timeout = 30", "code statement ('timeout = 3"),
        ("const x = 1", "code statement"),
        ("The config lives in settings.py", "file path ('settings.py')"),
        ("See /etc/nginx/nginx.conf for it", "file path"),
        ("Logs are under C:\\logs", "file path"),
        ("Edit docs/API.md first", "file path ('docs/API.md')"),
        ("Run git push --force after rebasing", "git command ('git push')"),
        ("We git commit with -s", "git command ('git commit')"),
    ],
)
def test_the_gate_refuses_findable_things(content, reason):
    assert reason in refusal(draft("user", content))


def test_the_gate_checks_the_name_and_description_too():
    assert "file path ('main.py')" in refusal(draft(description="about main.py"))
    assert "git command" in refusal(draft(name="git rebase habits"))


@pytest.mark.parametrize("type", ["feedback", "project"])
def test_structured_types_need_rule_why_and_how_to_apply(type):
    message = refusal(draft(type, "Rule: answer in French.\nWhy: the team reads French."))
    assert f"a {type} entry's content must have the lines 'Rule:', 'Why:' and 'How to apply:'" in message
    assert "missing: 'How to apply:'" in message
    assert "missing: 'Rule:', 'Why:', 'How to apply:'" in refusal(draft(type, "Answer in French."))


def test_user_and_reference_entries_need_no_structure():
    check(draft("user", "Answer in French."), today=TODAY)
    check(draft("reference", "Answer in French."), today=TODAY)


@pytest.mark.parametrize(
    "phrase",
    [
        "yesterday",
        "Tomorrow",
        "today",
        "last week",
        "next month",
        "2 days ago",
        "three weeks ago",
        "in 3 days",
        "上周",
        "昨天",
        "明天",
        "下个月",
        "3天前",
        "两周后",
        "去年",
    ],
)
def test_project_entries_refuse_relative_dates(phrase):
    message = refusal(draft("project", f"{STRUCTURED}\nThe freeze started {phrase}."))
    assert "a project entry needs absolute dates, not relative ones" in message
    assert repr(phrase) in message
    assert "today is 2026-11-23: write the date itself" in message


def test_relative_dates_are_fine_outside_project_entries():
    check(draft("user", "Said yesterday that they prefer tabs."), today=TODAY)
    check(draft("feedback", STRUCTURED + "\n上周 was busy."), today=TODAY)


def test_every_fault_is_named_at_once():
    message = refusal(Draft(type="note", name="", description="", keywords=[], content=""))
    assert "type must be one of user, feedback, project, reference (got 'note')" in message
    assert "name is empty" in message
    assert "content is empty" in message

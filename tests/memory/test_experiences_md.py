"""experiences.md (M2): lossless round trip, line-numbered errors, atomic import, commands."""

from __future__ import annotations

import datetime as dt
import io
import random

import pytest
from django.core.management import CommandError, call_command

from memory.experiences_md import ExperienceData, ExperiencesFileError, parse, render
from memory.models import Experience
from memory.services import experiences_export, experiences_import
from tests.factories import make_trace

WORDS = [
    "docker",
    "build",
    "cache",
    "文件",
    "naïve",
    "große",
    "emoji🙂",
    "x",
    "`code`",
    "a: b",
    "#tag",
    '"q"',
]
LINES = [
    "Use the cache.",
    "---",
    "\\---",
    "  indented code",
    "",
    "- a list item",
    "## Heading",
    "key: value",
    "中文的规则,带标点。",
    "trailing spaces   ",
    "tab\tseparated",
]


def random_experience(rng: random.Random, number: int) -> ExperienceData:
    body_lines = [rng.choice(LINES) for _ in range(rng.randint(1, 6))]
    body = "\n".join(body_lines).strip("\n") or "fallback rule"
    created = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(
        seconds=rng.randint(0, 10**7), microseconds=7
    )
    return ExperienceData(
        code=f"ex_{number:03d}",
        rule=body,
        category=rng.choice(["tool_usage", "logic_flow", "environment"]),
        tags={
            "state": sorted({rng.choice(["large_file", "dirty_repo", "docker", "中文"]) for _ in range(2)}),
            "intent": [rng.choice(["batch_edit", "optimization", "debug"])],
        },
        condition=" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6))),
        scope=rng.choice(["", "agent:explore"]),
        source=rng.choice(["execution", "feedback", "manual"]),
        status=rng.choice(["draft", "approved", "retired"]),
        confidence=rng.choice([0.5, 0.25, 1.0, 0.0]),
        helpful=rng.randint(0, 20),
        harmful=rng.randint(0, 3),
        usage_count=rng.randint(0, 9),
        outcome_runs=4,
        outcome_successes=rng.randint(0, 4),
        evidence=rng.choice(
            [{}, {"trace_id": "trace-ü", "messages": [{"sequence": 5, "message_id": "trace-ü-0005"}]}]
        ),
        created_at=created,
        updated_at=created + dt.timedelta(hours=1),
    )


@pytest.mark.parametrize("seed", range(25))
def test_render_then_parse_is_lossless(seed):
    rng = random.Random(seed)
    experiences = [random_experience(rng, n) for n in range(1, rng.randint(2, 8))]

    text = render(experiences)
    parsed = parse(text)

    assert [e.comparable() for e in parsed] == [e.comparable() for e in experiences]
    assert render(parsed) == text


def test_the_seeds_hand_written_block_parses():
    text = """---
id: ex_001
trace_id: trace-xxx
category: tool_usage
tags: {state: ["large_file", "dirty_repo"], intent: ["batch_edit", "safe_modify"]}
metrics: {helpful: 12, harmful: 0}
created_at: 2026-02-12 15:30
---
Edit large files with `edit` and a unique anchor, never rewrite them whole.
"""
    [block] = parse(text)
    assert block.code == "ex_001"
    assert block.evidence == {"trace_id": "trace-xxx"}
    assert block.tags == {"state": ["large_file", "dirty_repo"], "intent": ["batch_edit", "safe_modify"]}
    assert (block.helpful, block.harmful) == (12, 0)
    assert block.created_at == dt.datetime(2026, 2, 12, 15, 30, tzinfo=dt.UTC)
    assert block.rule.startswith("Edit large files")


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (
            "---\nid: ex_001\n---\nok\n\n---\nid: ex_002\ntags: {state: [unclosed\n---\nbody\n",
            8,
            "not valid YAML",
        ),
        ("---\nid: ex_001\n---\nok\n---\nid: nope\n---\nbody\n", 5, "id must look like ex_001"),
        ("---\nid: ex_001\n---\nok\n---\nid: ex_001\n---\nagain\n", 5, "also defined at line 1"),
        ("---\nid: ex_001\nmetrics: {helpful: -1}\n---\nbody\n", 1, "metrics.helpful"),
        ("---\nid: ex_001\n---\n\n", 1, "no body"),
        ("---\nid: ex_001\nstatus: maybe\n---\nbody\n", 1, "status must be one of"),
        ("---\nid: ex_001\ncolour: red\n---\nbody\n", 1, "unknown key"),
        ("hello\n---\nid: ex_001\n---\nbody\n", 1, "expected '---'"),
        ("---\nid: ex_001\ncategory: x\n", 1, "never closed"),
    ],
)
def test_a_malformed_block_is_reported_with_its_line(text, line, reason):
    with pytest.raises(ExperiencesFileError) as error:
        parse(text)
    assert error.value.line == line
    assert reason in str(error.value)


@pytest.mark.django_db
def test_export_import_round_trip_through_the_database(make_experience, integrator):
    trace = make_trace(integrator, messages=[("user", "go"), ("assistant", "done")])
    make_experience(
        rule="First line\n\n---\nafter a rule line 🙂",
        condition="the repo is dirty",
        tags={"state": ["dirty repo"], "intent": ["commit"]},
        evidence={
            "trace_id": trace.trace_id,
            "messages": [{"sequence": 2, "message_id": f"{trace.trace_id}-0002"}],
        },
        trace=trace,
        helpful=3,
    )
    make_experience(rule="规则:先读后写。", category="environment", status="draft")
    text = experiences_export()

    Experience.objects.all().delete()
    result = experiences_import(text=text)

    assert result == {"created": ["ex_001", "ex_002"], "updated": []}
    first = Experience.objects.get(code="ex_001")
    assert first.trace_id == trace.trace_id and first.tags["state"] == ["dirty_repo"]
    assert first.rule == "First line\n\n---\nafter a rule line 🙂"
    assert experiences_export() == text


@pytest.mark.django_db
def test_a_malformed_file_imports_nothing(make_experience):
    make_experience(rule="keep me", helpful=2)
    good = experiences_export().replace("helpful: 2", "helpful: 5")
    bad = good + "\n---\nid: ex_009\nmetrics: {helpful: lots}\n---\nbody\n"

    with pytest.raises(ExperiencesFileError) as error:
        experiences_import(text=bad)

    assert "line" in str(error.value)
    assert Experience.objects.get().helpful == 2  # the valid block before it was not applied
    assert not Experience.objects.filter(code="ex_009").exists()


@pytest.mark.django_db
def test_import_and_export_commands(tmp_path, make_experience):
    make_experience(rule="use the cache", tags={"intent": ["speed"]})
    path = tmp_path / "experiences.md"
    call_command("export_experiences", str(path), stderr=io.StringIO())
    Experience.objects.all().delete()

    out = io.StringIO()
    call_command("import_experiences", str(path), stdout=out)
    assert "1 created, 0 updated" in out.getvalue()
    stdout = io.StringIO()
    call_command("export_experiences", stdout=stdout)
    assert stdout.getvalue() == path.read_text(encoding="utf-8")

    path.write_text("---\nid: bad\n---\nx\n", encoding="utf-8")
    with pytest.raises(CommandError, match="line 1: id must look like ex_001"):
        call_command("import_experiences", str(path))

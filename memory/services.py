"""Writes on experiences and presets (M1-M5, M7). Views, admin, commands call these."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, IntegerField, Max, Q
from django.db.models.functions import Cast, Substr
from django.utils import timezone

from memory import experiences_md
from memory.experiences_md import ExperienceData
from memory.models import Experience, ExperienceSource, ExperienceStatus
from memory.retrieval.embeddings import Progress, embed_missing
from memory.tags import canonical_tag, normalize_tag, normalize_tags
from traces.models import Trace

CITATION = re.compile(r"\[(ex_\d{3,})\]")
MEMORY_CONTEXT = "experiences"  # key in Trace.context: tags, retrieved and cited codes
# Takes a database write and runs it now or later (a run's RunStore.defer).
Write = Callable[[Callable[[], None]], None]


def experience_next_code() -> str:
    """The next free ex_NNN code (callers retry on a race: the code is unique)."""
    top = (
        Experience.objects.filter(code__regex=r"^ex_[0-9]+$")
        .annotate(number=Cast(Substr("code", 4), IntegerField()))
        .aggregate(top=Max("number"))["top"]
    )
    return f"ex_{(top or 0) + 1:03d}"


def experience_create(*, rule: str, user: Any = None, **fields: Any) -> Experience:
    """A new experience with the next code (default: draft, manual source)."""
    for _ in range(5):
        experience = Experience(rule=rule, code=experience_next_code(), **fields)
        if user is not None and experience.status != ExperienceStatus.DRAFT:
            experience.reviewed_by, experience.reviewed_at = user, timezone.now()
        try:
            with transaction.atomic():
                experience.save()
        except IntegrityError:
            if Experience.objects.filter(code=experience.code).exists():
                continue  # another writer took the code
            raise
        if experience.status == ExperienceStatus.APPROVED:
            _embed(codes=[experience.code])
        return experience
    raise IntegrityError("could not allocate an experience code")


def experience_update(*, experience: Experience, user: Any = None, **fields: Any) -> Experience:
    for name, value in fields.items():
        setattr(experience, name, value)
    if "status" in fields and user is not None:
        experience.reviewed_by, experience.reviewed_at = user, timezone.now()
    experience.save()
    if experience.status == ExperienceStatus.APPROVED:
        _embed(codes=[experience.code])
    return experience


def _embed(*, codes: list[str]) -> None:
    """Approved experiences get an embedding when an embedding model is configured (M4), in
    batches; a provider failure is logged and leaves them lexical-only (approval stands)."""
    embed_missing(codes=codes)


def experiences_embed_all(
    *, codes: list[str] | None = None, everything: bool = False, on_progress: Progress | None = None
) -> int:
    """(Re-)embed approved experiences (among `codes`) in batches: those missing an embedding
    from the configured model, or all of them with `everything`; how many were stored."""
    return embed_missing(codes=codes, everything=everything, on_progress=on_progress)


def experience_set_status(*, experience: Experience, status: str, user: Any) -> Experience:
    """Approve, retire or send back to draft, recording who reviewed it."""
    return experience_update(experience=experience, user=user, status=status)


def experience_approve(*, experience: Experience, user: Any) -> Experience:
    return experience_set_status(experience=experience, status=ExperienceStatus.APPROVED, user=user)


def experience_retire(*, experience: Experience, user: Any) -> Experience:
    return experience_set_status(experience=experience, status=ExperienceStatus.RETIRED, user=user)


def experiences_set_status(*, codes: list[str], status: str, user: Any) -> int:
    """Bulk review (admin actions); returns how many changed."""
    now = timezone.now()
    changed = (
        Experience.objects.filter(code__in=codes)
        .exclude(status=status)
        .update(status=status, reviewed_by=user, reviewed_at=now, updated_at=now)
    )
    if status == ExperienceStatus.APPROVED:
        _embed(codes=codes)
    return changed


def experience_mark(*, experience: Experience, helpful: bool) -> Experience:
    """An expert's helpful / harmful vote (M5)."""
    field = "helpful" if helpful else "harmful"
    Experience.objects.filter(pk=experience.pk).update(**{field: F(field) + 1, "updated_at": timezone.now()})
    experience.refresh_from_db()
    return experience


def experience_tags_merge(*, codes: list[str], sources: list[str], target: str) -> int:
    """Replace the tags `sources` (compared in canonical form) by `target` in the experiences
    `codes`, both kinds; returns how many experiences changed. Raises ValueError on an
    empty source or target."""
    merged = normalize_tag(target)
    wanted = {canonical_tag(tag) for tag in sources if canonical_tag(tag)}
    if not merged or not wanted:
        raise ValueError("name the tags to merge and the tag to merge them into")
    changed = 0
    with transaction.atomic():
        for experience in Experience.objects.select_for_update().filter(code__in=codes):
            tags = normalize_tags(experience.tags)
            new = {
                kind: list(dict.fromkeys(merged if canonical_tag(t) in wanted else t for t in tags[kind]))
                for kind in ("state", "intent")
            }
            if new != tags:
                experience.tags = new
                experience.save(update_fields=["tags"])
                changed += 1
    return changed


# --- runs: citations and outcomes ------------------------------------------------


def cited_codes(text: str | None) -> list[str]:
    """Codes an agent cited as [ex_001] in `text`, each once, in order."""
    return list(dict.fromkeys(CITATION.findall(text or "")))


def experience_record_citations(*, trace: Trace, text: str | None, write: Write | None = None) -> list[str]:
    """Count `[ex_…]` citations in an assistant's text as usage (M4).

    Notes the codes in `trace.context` at once (the caller saves the trace row)
    and hands the counter update to `write`: a run passes its store's
    `RunStore.defer`, so the count lands with the message's fenced commit (once,
    and not at all for a run that lost its lease). Without `write` it runs now.
    """
    codes = cited_codes(text)
    if not codes:
        return []
    known = list(Experience.objects.filter(code__in=codes).values_list("code", flat=True))
    if known:
        memory = dict((trace.context or {}).get(MEMORY_CONTEXT) or {})
        memory["cited"] = list(dict.fromkeys([*memory.get("cited", []), *known]))
        trace.context = {**(trace.context or {}), MEMORY_CONTEXT: memory}
        (write or _now)(lambda: _count_usage(known))
    return known


def _count_usage(codes: list[str]) -> None:
    Experience.objects.filter(code__in=codes).update(usage_count=F("usage_count") + 1)


def _now(write: Callable[[], None]) -> None:
    write()


def note_retrieved(trace: Trace, codes: list[str]) -> None:
    """Remember in `trace.context` that the run was shown `codes` (its outcome will count)."""
    memory = dict((trace.context or {}).get(MEMORY_CONTEXT) or {})
    memory["retrieved"] = list(dict.fromkeys([*memory.get("retrieved", []), *codes]))
    trace.context = {**(trace.context or {}), MEMORY_CONTEXT: memory}


def experience_record_outcome(*, trace: Trace, status: str, write: Write | None = None) -> list[str]:
    """A finished run updates the experiences it retrieved (M5), once per trace.

    Every retrieved experience counts a run (and a success when the trace
    completed) toward its success_rate; the ones the agent cited also get a
    helpful (completed) or harmful (failed) mark. Stopped runs say nothing.
    The once-marker goes into `trace.context` at once and the counters to
    `write` (as in `experience_record_citations`): a run commits both in its
    final fenced commit, so a crash before it counts nothing and the resumed
    run counts once.
    """
    memory = dict((trace.context or {}).get(MEMORY_CONTEXT) or {})
    retrieved = memory.get("retrieved") or []
    if status not in ("completed", "failed") or not retrieved or memory.get("outcome"):
        return []
    cited = set(memory.get("cited") or [])
    memory["outcome"] = status
    trace.context = {**(trace.context or {}), MEMORY_CONTEXT: memory}
    (write or _now)(lambda: _count_outcome(list(retrieved), cited, success=status == "completed"))
    return list(retrieved)


# How far one outcome moves an experience's confidence toward 1 (success) or 0 (failure):
# more when the agent cited it (it was applied) than when it was only shown.
CONFIDENCE_STEP_RETRIEVED = 0.1
CONFIDENCE_STEP_CITED = 0.25


def _count_outcome(retrieved: list[str], cited: set[str], *, success: bool) -> None:
    """Success rate, votes and confidence (an exponential moving average of outcomes,
    starting from the reviewed or reflected prior; retrieval ranks by it) of each one."""
    with transaction.atomic():
        for experience in Experience.objects.select_for_update().filter(code__in=[*retrieved, *cited]):
            if experience.code in retrieved:
                experience.outcome_runs += 1
                experience.outcome_successes += int(success)
                experience.success_rate = experience.outcome_successes / experience.outcome_runs
            step = CONFIDENCE_STEP_CITED if experience.code in cited else CONFIDENCE_STEP_RETRIEVED
            experience.confidence = round(
                experience.confidence + step * (float(success) - experience.confidence), 4
            )
            if experience.code in cited:
                if success:
                    experience.helpful += 1
                else:
                    experience.harmful += 1
            experience.save(
                update_fields=[
                    "outcome_runs",
                    "outcome_successes",
                    "success_rate",
                    "helpful",
                    "harmful",
                    "confidence",
                ]
            )


# --- experiences.md ----------------------------------------------------------------


def experiences_export(*, queryset: Any = None) -> str:
    """The experiences.md text of `queryset` (default: every experience), by code."""
    experiences = (queryset if queryset is not None else Experience.objects.all()).order_by("code")
    return experiences_md.render([ExperienceData.from_model(e) for e in experiences])


def experiences_import(*, text: str) -> dict[str, list[str]]:
    """Create or replace the experiences of an experiences.md, all or nothing.

    Raises ExperiencesFileError (with the line) before writing anything when a
    block is malformed. Returns the codes created and updated.
    """
    blocks = experiences_md.parse(text)
    trace_ids = {b.evidence.get("trace_id") for b in blocks if b.evidence.get("trace_id")}
    existing_traces = set(Trace.objects.filter(pk__in=trace_ids).values_list("pk", flat=True))
    created: list[str] = []
    updated: list[str] = []
    with transaction.atomic():
        current = {e.code: e for e in Experience.objects.filter(code__in=[b.code for b in blocks])}
        for block in blocks:
            experience = current.get(block.code) or Experience(code=block.code)
            _apply(experience, block, existing_traces)
            experience.save(touch=block.updated_at is None)
            (updated if block.code in current else created).append(block.code)
    _embed(codes=created + updated)  # the approved ones, in batches, after the commit
    return {"created": created, "updated": updated}


def _apply(experience: Experience, block: ExperienceData, existing_traces: set[str]) -> None:
    trace_id = block.evidence.get("trace_id")
    experience.rule = block.rule
    experience.category = block.category
    experience.tags = block.tags
    experience.condition = block.condition
    experience.scope = block.scope
    experience.source = block.source or ExperienceSource.MANUAL
    experience.status = block.status
    experience.confidence = block.confidence
    experience.helpful = block.helpful
    experience.harmful = block.harmful
    experience.usage_count = block.usage_count
    experience.outcome_runs = block.outcome_runs
    experience.outcome_successes = block.outcome_successes
    experience.success_rate = block.outcome_successes / block.outcome_runs if block.outcome_runs else None
    experience.evidence = block.evidence
    experience.trace_id = trace_id if trace_id in existing_traces else None
    if block.created_at is not None:
        experience.created_at = block.created_at
    if block.updated_at is not None:
        experience.updated_at = block.updated_at


def experiences_forget_traces(sender: Any = None, *, trace_ids: list[str], **kwargs: Any) -> int:
    """The traces are being deleted (traces/services/delete.py): experiences drawn from them
    keep their text and evidence ids, marked `trace_deleted` so nothing links to them."""
    changed = 0
    rows = Experience.objects.filter(Q(trace_id__in=trace_ids) | Q(evidence__trace_id__in=trace_ids))
    for experience in rows.only("pk", "evidence", "trace_id"):
        evidence = dict(experience.evidence or {})
        evidence.setdefault("trace_id", experience.trace_id)
        evidence["trace_deleted"] = True
        changed += Experience.objects.filter(pk=experience.pk).update(evidence=evidence, trace=None)
    return changed

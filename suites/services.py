"""Regression suites (issue 23, item 5): make cases from traces, replay a suite, score it.

A suite run starts every case as an ordinary trace (`trace_start`, so the workers run
them concurrently, each under the same guards as any run) and puts those traces in a
review queue. A case is scored when its trace ends: `case_run_advance` is called by
the runner's `after_end` point in the worker (suites/apps.py) and again whenever a
suite run is read, so scoring survives a worker that died between the two. Rubric
checks are judged by one reviewer run per case (the `evaluate` tool's verdict
format, read by its `parse_judgement`), with the default model, so two suite runs
with different models are judged alike.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memory.models import Experience, ExperienceStatus
from review.services import queue_create
from suites import checks as c
from suites.models import Case, CaseRun, Outcome, Suite, SuiteRun
from tools.builtin.evaluate import parse_judgement
from traces.models import Trace, TraceStatus
from traces.runner import InvalidRun, RunError
from traces.runner.prepare import text_of
from traces.selectors import trace_main_path, trace_visible_or_404
from traces.services.runs import trace_start

logger = logging.getLogger(__name__)

# A case's trace is done with once it has ended or waits for a human: a suite
# replays unattended, so a wait fails the case rather than holding the suite.
ENDED = (TraceStatus.COMPLETED, TraceStatus.FAILED, TraceStatus.STOPPED, TraceStatus.WAITING)

JUDGE_PROMPT = """You are a strict reviewer. Judge whether an agent's work meets a rubric.

The task it was given:
{task}

Its final answer:
{answer}

Tools it called: {tools}

The rubric (every point must hold for a pass):
{rubric}

Answer with one JSON object and nothing else:
{{"verdict": "pass" | "partial" | "fail", "reasoning": "<why, briefly>", "suggestions": ["<concrete improvement>", ...]}}"""


class SuiteNotFound(RunError):
    status = 404


def suite_create(*, user: Any, name: str, description: str = "") -> Suite:
    name = name.strip()
    if not name:
        raise InvalidRun("name: a suite needs a name")
    if Suite.objects.filter(name=name).exists():
        raise InvalidRun(f"name: a suite named {name!r} exists already")
    return Suite.objects.create(name=name[:200], description=description, created_by=user)


def case_from_trace(
    *,
    user: Any,
    suite: Suite,
    trace_id: str,
    checks: Any,
    name: str = "",
    sequence: int | None = None,
) -> Case:
    """A case replaying the task of the branch of `trace_id` that ends at `sequence` (default:
    the main path): the user messages before its first assistant reply, and `checks`."""
    trace = trace_visible_or_404(user=user, trace_id=trace_id)
    cleaned = c.clean_checks(checks)
    path = trace_main_path(trace_id=trace.trace_id, head_sequence=sequence)
    if sequence is not None and (not path or path[-1].sequence != sequence):
        raise InvalidRun(f"sequence: trace {trace_id!r} has no message {sequence}")
    inputs = []
    for message in path:
        if message.role == "assistant":
            break
        if message.role == "user":
            inputs.append({"role": "user", "content": message.content})
    if not inputs:
        raise InvalidRun("trace_id: that branch has no user message to replay")
    name = (name or trace.name or text_of(inputs[0]["content"]))[:200].strip() or trace.trace_id
    if suite.cases.filter(name=name).exists():
        raise InvalidRun(f"name: suite {suite.name!r} has a case named {name!r} already")
    return Case.objects.create(
        suite=suite,
        name=name,
        messages=inputs,
        preset=trace.agent_type or "default",
        checks=cleaned,
        source_trace_id=trace.trace_id,
        source_sequence=sequence,
        created_by=user,
    )


def suite_run_start(
    *,
    user: Any,
    suite: Suite,
    model: str = "",
    preset: str = "",
    baseline: SuiteRun | None = None,
    settings: dict[str, Any] | None = None,
) -> SuiteRun:
    """Start every case of `suite` as a trace (all or none: a bad preset or model is a 400
    before any run is queued) and gather those traces in a review queue."""
    cases = list(suite.cases.order_by("id"))
    if not cases:
        raise InvalidRun(f"suite {suite.name!r} has no cases")
    _check_experience_set((settings or {}).get("experiences"))
    if baseline is not None and baseline.suite_id != suite.pk:
        raise InvalidRun(f"baseline: run {baseline.pk} is not a run of suite {suite.name!r}")
    with transaction.atomic():
        run = SuiteRun.objects.create(
            suite=suite,
            model=model,
            preset=preset,
            baseline=baseline,
            created_by=user,
            run_settings=settings or {},
        )
        case_runs = []
        for case in cases:
            trace = trace_start(
                user=user,
                messages=case.messages,
                model=model or None,
                preset=preset or case.preset,
                name=f"{suite.name} #{run.pk}: {case.name}"[:200],
                context={"suite_run": run.pk, "suite_case": case.pk},
                settings=settings or None,
            )
            case_runs.append(CaseRun(suite_run=run, case=case, trace_id=trace.trace_id))
        CaseRun.objects.bulk_create(case_runs)
        run.queue = queue_create(
            user=user,
            name=f"Suite {suite.name} · run #{run.pk}"[:200],
            description=f"The traces of run #{run.pk} of suite {suite.name!r}, for experts to review.",
            trace_ids=[cr.trace_id for cr in case_runs],
        )
        run.save(update_fields=["queue"])
    return run


def _check_experience_set(codes: Any) -> None:
    """A suite run's experience set names approved experiences only: a typo would
    silently measure the suite without the lesson it meant to test."""
    if not isinstance(codes, list):
        return  # absent, or malformed: trace_start says what is wrong with it
    known = set(
        Experience.objects.filter(code__in=codes, status=ExperienceStatus.APPROVED).values_list(
            "code", flat=True
        )
    )
    missing = [c for c in codes if c not in known]
    if missing:
        raise InvalidRun(f"settings.experiences: no approved experience {', '.join(map(str, missing[:5]))}")


def suite_run_refresh(run: SuiteRun) -> SuiteRun:
    """Score the cases whose traces ended since the last look; mark the run finished."""
    for case_run_id in run.case_runs.filter(outcome=Outcome.RUNNING).values_list("pk", flat=True):
        case_run_advance(case_run_id)
    if run.finished_at is None and not run.case_runs.filter(outcome=Outcome.RUNNING).exists():
        SuiteRun.objects.filter(pk=run.pk, finished_at__isnull=True).update(finished_at=timezone.now())
        run.refresh_from_db()
    return run


def case_run_advance(case_run_id: int) -> None:
    """Score a case run if its trace (and its rubric reviewer) ended; start the reviewer when due."""
    with transaction.atomic():
        case_run = CaseRun.objects.select_for_update().select_related("case").filter(pk=case_run_id).first()
        if case_run is None or case_run.outcome != Outcome.RUNNING:
            return
        trace = Trace.objects.filter(pk=case_run.trace_id).select_related("owner").first()
        if trace is None:
            _finish(case_run, None, [_result({"kind": "status"}, False, "the trace was deleted")])
            return
        if trace.status not in ENDED:
            return
        evidence = c.Evidence.of(trace)
        checks = case_run.case.checks
        results = [_result({"kind": "status"}, trace.status == TraceStatus.COMPLETED, trace.status)]
        results += [
            _result(check, *c.judge(check, evidence)) for check in checks if check["kind"] != "rubric"
        ]
        rubrics = [check for check in checks if check["kind"] == "rubric"]
        if rubrics:
            verdict = _rubric_verdict(case_run, trace, evidence, rubrics)
            if verdict is None:
                return  # the reviewer runs
            results += [_result(check, *verdict) for check in rubrics]
        _finish(case_run, trace, results)


def suite_run_ended(trace: Trace, status: str) -> None:
    """The runner's after_end point: only a suite's traces (a case's or its reviewer's,
    started with `suite_run` in their context) look for their case; other runs cost no
    query."""
    if (trace.context or {}).get("suite_run") is not None:
        suite_trace_ended(trace.trace_id, status)


def suite_trace_ended(trace_id: str, status: str) -> None:
    """A case's trace or its reviewer ended a run: score the case. A failure here is
    logged, never the run's: reading the suite run scores the case again."""
    if status not in ENDED:
        return
    try:
        found = CaseRun.objects.filter(
            Q(trace_id=trace_id) | Q(judge_trace_id=trace_id), outcome=Outcome.RUNNING
        ).values_list("pk", flat=True)
        for case_run_id in list(found):
            case_run_advance(case_run_id)
    except Exception:
        logger.exception("scoring the suite case of trace %s failed; reading its suite run retries", trace_id)


def _rubric_verdict(
    case_run: CaseRun, trace: Trace, evidence: c.Evidence, rubrics: list[dict[str, Any]]
) -> tuple[bool, str] | None:
    if not case_run.judge_trace_id:
        task = text_of(case_run.case.messages[0]["content"])
        judge = trace_start(
            user=trace.owner,
            messages=[
                {
                    "role": "user",
                    "content": JUDGE_PROMPT.format(
                        task=task,
                        answer=evidence.answer or "(no answer)",
                        tools=", ".join(sorted(evidence.tools)) or "none",
                        rubric="\n".join(f"- {r['rubric']}" for r in rubrics),
                    ),
                }
            ],
            preset="explore",
            name=f"judge: {case_run.case.name}"[:200],
            context={"suite_run": case_run.suite_run_id, "suite_judge_of": trace.trace_id},
        )
        case_run.judge_trace_id = judge.trace_id
        case_run.save(update_fields=["judge_trace_id"])
        return None
    judge_trace = Trace.objects.filter(pk=case_run.judge_trace_id).first()
    if judge_trace is None:
        return False, "the reviewer's trace was deleted"
    if judge_trace.status not in ENDED:
        return None
    answer = c.final_answer(trace_main_path(trace_id=judge_trace.trace_id))
    judgement = parse_judgement(answer)
    return judgement["verdict"] == "pass", f"{judgement['verdict']}: {judgement['reasoning'][:300]}"


def _result(check: dict[str, Any], passed: bool, detail: str) -> dict[str, Any]:
    return {**check, "passed": passed, "detail": detail}


def _finish(case_run: CaseRun, trace: Trace | None, results: list[dict[str, Any]]) -> None:
    case_run.results = results
    case_run.outcome = Outcome.PASSED if all(r["passed"] for r in results) else Outcome.FAILED
    case_run.trace_status = trace.status if trace is not None else "deleted"
    if trace is not None:
        case_run.tokens = trace.total_tokens
        case_run.cost = trace.total_cost
        case_run.duration_ms = trace.total_duration_ms
    case_run.finished_at = timezone.now()
    case_run.save()

"""Correction → experience → verified (X6, issue 23 item 4).

An expert corrects an assistant message ("here the agent should have …"). The utility
model proposes a draft experience from it (condition, rule, tags; evidence = that
message), which the expert edits and approves on the experiences page as any other.
`correction_verify` then forks the trace just before the mistake and re-runs it with
that experience injected at the fork point, in the block every run's experiences use
(`memory/retrieval.py:format_experiences`); the original and the verification branch
are compared (`review/compare.py:branches_compare`) and the expert marks the result
fixed / not fixed, which stays on the correction beside its experience.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.models import ExperienceSource, ExperienceStatus
from memory.retrieval import format_experiences, parse_json_object
from memory.services import experience_create
from review.compare import Comparison, branches_compare
from review.models import Correction, Verdict
from traces.llm import LLMClient, LLMError, ModelNotConfigured, utility_model
from traces.models import ACTIVE_STATUSES, Message, Trace
from traces.runner import InvalidRun, RunConflict, RunError
from traces.runner.prepare import text_of
from traces.selectors import trace_main_path, trace_visible_or_404, traces_visible_to
from traces.services.runs import trace_continue

logger = logging.getLogger(__name__)

TEXT_LIMIT = 5000

PROPOSE_PROMPT = """An expert reviewed an AI agent's run and corrected one of its steps.
Turn the correction into one reusable lesson for future runs.

The agent's task:
{task}

The step the expert corrected (the agent's message):
{message}

The expert's correction:
{correction}

Answer with one JSON object and nothing else:
{{"condition": "<when the lesson applies, as a situation>", "rule": "<what to do, imperative>",
"tags": {{"state": ["<situation tag>", ...], "intent": ["<goal tag>", ...]}}}}"""


class CorrectionNotFound(RunError):
    status = 404


def correction_create(*, user: Any, trace_id: str, sequence: int, text: str) -> Correction:
    """Record a correction of main-path assistant message `sequence` and propose a draft
    experience from it (the correction itself is the rule when the utility model fails)."""
    text = (text or "").strip()
    if not text:
        raise InvalidRun("text: say what the agent should have done")
    if len(text) > TEXT_LIMIT:
        raise InvalidRun(f"text: at most {TEXT_LIMIT} characters")
    trace = trace_visible_or_404(user=user, trace_id=trace_id)
    message = _main_path_message(trace, sequence)
    if message.role != "assistant":
        raise InvalidRun(f"sequence: message {sequence} is a {message.role} message; correct an assistant's")
    fields = _proposal(trace, message, text)
    experience = experience_create(
        user=user,
        status=ExperienceStatus.DRAFT,
        source=ExperienceSource.FEEDBACK,
        evidence={
            "trace_id": trace.trace_id,
            "messages": [{"sequence": sequence, "message_id": message.message_id}],
        },
        trace=trace,
        **fields,
    )
    return Correction.objects.create(
        trace=trace, message_sequence=sequence, author=user, text=text, experience=experience
    )


def correction_verify(*, user: Any, correction: Correction) -> Correction:
    """Fork the trace just before the corrected message and re-run it with the correction's
    (approved) experience injected there; the branch the trace had stays to compare with."""
    experience = correction.experience
    if experience is None or experience.status != ExperienceStatus.APPROVED:
        raise InvalidRun("experience: approve the correction's experience before verifying it")
    trace = trace_visible_or_404(user=user, trace_id=correction.trace_id)
    if trace.status in ACTIVE_STATUSES:
        raise RunConflict(f"trace {trace.trace_id!r} is running; verify once it has stopped")
    message = Message.objects.filter(trace=trace, sequence=correction.message_sequence).first()
    if message is None or message.parent_sequence is None:
        raise InvalidRun("the corrected message has no step before it to fork from")
    on_path = {
        m.sequence for m in trace_main_path(trace_id=trace.trace_id, head_sequence=trace.head_sequence)
    }
    if message.sequence not in on_path:
        raise InvalidRun("the trace's main path has moved off the corrected message; rewind to it first")
    lesson = {"role": "user", "content": f"{format_experiences([experience])}\n\nContinue the task."}
    with transaction.atomic():
        original_head = trace.head_sequence
        trace_continue(
            user=user, trace_id=trace.trace_id, messages=[lesson], after_sequence=message.parent_sequence
        )
        Correction.objects.filter(pk=correction.pk).update(
            original_head_sequence=original_head,
            verify_after_sequence=message.parent_sequence,
            verified_at=timezone.now(),
            verdict=Verdict.PENDING,
            verdict_by=None,
            verdict_at=None,
        )
    correction.refresh_from_db()
    return correction


def correction_comparison(correction: Correction) -> Comparison | None:
    """The original branch beside the verification branch (the trace's head), once verified."""
    if correction.original_head_sequence is None:
        return None
    trace = correction.trace
    if trace.head_sequence == correction.original_head_sequence:
        return None
    return branches_compare(trace=trace, a=correction.original_head_sequence, b=trace.head_sequence)


def correction_judge(*, user: Any, correction: Correction, verdict: str) -> Correction:
    """The expert's mark on the verification: fixed or not fixed."""
    if verdict not in (Verdict.FIXED, Verdict.NOT_FIXED):
        raise InvalidRun("verdict: fixed or not_fixed")
    if correction.verified_at is None:
        raise InvalidRun("verdict: verify the correction first")
    Correction.objects.filter(pk=correction.pk).update(
        verdict=verdict, verdict_by=user, verdict_at=timezone.now()
    )
    correction.refresh_from_db()
    return correction


def corrections_for(user: Any) -> Any:
    """The corrections of traces `user` sees."""
    return Correction.objects.filter(trace__in=traces_visible_to(user)).select_related("experience", "trace")


def correction_get(user: Any, correction_id: int) -> Correction:
    found = corrections_for(user).filter(pk=correction_id).first()
    if found is None:
        raise CorrectionNotFound(f"correction {correction_id} does not exist")
    return found


def _main_path_message(trace: Trace, sequence: int) -> Message:
    path = trace_main_path(trace_id=trace.trace_id, head_sequence=trace.head_sequence)
    found = next((m for m in path if m.sequence == sequence), None)
    if found is None:
        raise InvalidRun(f"sequence: message {sequence} is not on the main path of trace {trace.trace_id}")
    return found


def _proposal(trace: Trace, message: Message, correction: str) -> dict[str, Any]:
    said = text_of(message.content) or " ".join(
        f"{c.get('function', {}).get('name')}({c.get('function', {}).get('arguments')})"
        for c in message.tool_calls or []
    )
    prompt = PROPOSE_PROMPT.format(task=(trace.task or "")[:4000], message=said[:4000], correction=correction)
    try:
        response = LLMClient()(
            [{"role": "user", "content": prompt}], model=utility_model(), params={"max_tokens": 400}
        )
    except (LLMError, ModelNotConfigured) as exc:
        logger.info("proposing an experience from a correction failed: %s", exc)
        return {"condition": "", "rule": correction, "tags": {}}
    data = parse_json_object(response.content or "")
    if not isinstance(data, dict) or not str(data.get("rule") or "").strip():
        return {"condition": "", "rule": correction, "tags": {}}
    raw = data.get("tags")
    tags: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return {
        "condition": str(data.get("condition") or "")[:2000],
        "rule": str(data["rule"])[:4000],
        "tags": {k: [str(t) for t in tags.get(k) or [] if str(t).strip()][:8] for k in ("state", "intent")},
    }

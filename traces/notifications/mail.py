"""E-mail notifications (`AGENT_NOTIFY_EMAIL`) through Django's mail backend."""

from __future__ import annotations

import itertools
import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage, get_connection

from traces.models import Trace

logger = logging.getLogger(__name__)


SUBJECTS = {
    "waiting_approval": "waits for an approval",
    "waiting_answer": "waits for an answer",
    "attention": "needs attention",
    "failed": "failed",
}


def deliver_email(payload: dict[str, Any]) -> int:
    """django-q2 task: one e-mail per recipient (the trace's owner, the experts); how many went.

    Separate messages, so no recipient sees another's address. A mail server's
    error is logged, never raised.
    """
    recipients = _recipients(payload["trace_id"])
    if not recipients:
        return 0
    subject = f"[agentsite] trace {payload['trace_id']} {SUBJECTS[payload['kind']]}"
    body = email_text(payload)
    messages = [EmailMessage(subject, body, settings.DEFAULT_FROM_EMAIL, [to]) for to in recipients]
    try:
        return get_connection().send_messages(messages) or 0
    except Exception as exc:
        logger.warning("notification %s: e-mail not sent: %s", payload["id"], type(exc).__name__)
        return 0


def _recipients(trace_id: str) -> list[str]:
    """The owner's address (if any) and every active staff user's, each once."""
    owner = Trace.objects.filter(pk=trace_id, owner__is_active=True).values_list("owner__email", flat=True)
    experts = (
        get_user_model()
        .objects.filter(is_staff=True, is_active=True)
        .exclude(email="")
        .order_by("pk")
        .values_list("email", flat=True)
    )
    seen: dict[str, str] = {}
    for address in itertools.chain(owner, experts):
        if address and address.lower() not in seen:
            seen[address.lower()] = address
    return list(seen.values())


def email_text(payload: dict[str, Any]) -> str:
    """The plain-text body: what waits and where to act, nothing of the conversation."""
    lines = [f"Trace {payload['trace_id']} ({payload['agent_type']}) {SUBJECTS[payload['kind']]}.", ""]
    for approval in payload["approvals"]:
        lines.append(f"- a call of {approval['tool']} ({approval['risk']}) waits for an expert's decision")
    for question in payload["questions"]:
        lines += [
            "- a question waits for an answer:",
            "",
            question["question"],
            "",
            f"  {question['portal']}",
        ]
    if payload.get("reason"):
        lines.append(f"Reason: {payload['reason']}")
    lines += ["", f"Open the trace: {payload['portal']}", f"API: {payload['api']}"]
    return "\n".join(lines) + "\n"

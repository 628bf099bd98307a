"""A user's own AGENTS text (M9): the last layer of their runs' project context."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from traces.models import UserAgents


def user_agents_text(*, user: Any) -> str:
    """The user's AGENTS text ("" when they wrote none)."""
    return UserAgents.objects.filter(user=user).values_list("text", flat=True).first() or ""


def user_agents_update(*, user: Any, text: str) -> UserAgents:
    """Replace the user's AGENTS text; ValueError when it is over the project context's cap.

    Their next run segment reads it (a running segment keeps what it read).
    """
    text = text.replace("\r\n", "\n").replace("\x00", "")
    limit = settings.AGENT_PROJECT_CONTEXT_MAX_CHARS
    if len(text) > limit:
        raise ValueError(
            f"at most {limit:,} characters (AGENT_PROJECT_CONTEXT_MAX_CHARS); this is {len(text):,}"
        )
    row, _ = UserAgents.objects.update_or_create(user=user, defaults={"text": text})
    return row

"""The `--owner` of the memory-entry commands: a username, or none for the entries of
runs without an owner (the terminal's run_agent)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

OWNER_HELP = "the username whose entries (default: the entries of runs without an owner)"


def owner_id(username: str | None) -> int | None:
    if not username:
        return None
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(f"--owner: no user {username!r}")
    return int(user.pk)

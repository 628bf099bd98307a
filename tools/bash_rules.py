"""Which bash commands ask an expert first under `ask-risky` (G5, per-call confirmation).

Each rule is a named regular expression searched in the command line; the
first that matches makes the call wait with a question naming it. The built-in
rules cover deletion, network access, package installation, privilege and
ownership changes, writes outside the workspace, process control and raw disk
access. `AGENT_BASH_CONFIRM_RULES` (a JSON object name -> regex) replaces them;
an empty object `{}` means bash never asks under `ask-risky` (the sandbox still
confines it). These rules are a filter for an expert's attention, not a
security boundary: the sandbox is (tools/sandbox).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from django.conf import settings

# Separators before a command word: start, ;, &, |, (, `, $(, newline, or `sudo `/`env `.
_CMD = r"(?:^|[;&|(`\n]|\$\()\s*(?:sudo\s+|env\s+(?:\S+=\S*\s+)*)?"

DEFAULT_RULES: dict[str, str] = {
    "deletion": _CMD + r"(?:rm|rmdir|shred|unlink|truncate)\b|\bfind\b.*\s-delete\b|\bgit\s+clean\b",
    "network access": _CMD
    + r"(?:curl|wget|ssh|scp|sftp|rsync|nc|ncat|netcat|telnet|ftp)\b|\bgit\s+(?:clone|fetch|pull|push)\b",
    "package installation": r"\b(?:pip3?|uv\s+pip|pipx|npm|pnpm|yarn|gem|cargo|go)\s+(?:install|add)\b"
    + r"|"
    + _CMD
    + r"(?:apt|apt-get|dpkg|yum|dnf|apk|brew|conda)\b",
    "privilege or ownership change": _CMD + r"(?:sudo|su|chmod|chown|chgrp|setfacl)\b",
    "write outside the workspace": r"(?:>>?|\btee\s+(?:-a\s+)?)\s*(?:/(?!dev/null\b)|~|\.\./)"
    + r"|\b(?:cp|mv|ln|install)\b[^;&|\n]*\s(?:/|~|\.\./)\S*\s*(?:$|[;&|\n])",
    "process control": _CMD + r"(?:kill|pkill|killall|shutdown|reboot)\b",
    "raw disk access": _CMD + r"(?:dd|mkfs(?:\.\w+)?|fdisk|mount|umount)\b",
}


@lru_cache(maxsize=8)
def _compiled(rules: tuple[tuple[str, str], ...]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((name, re.compile(pattern, re.MULTILINE)) for name, pattern in rules)


def rules() -> tuple[tuple[str, re.Pattern[str]], ...]:
    configured = settings.AGENT_BASH_CONFIRM_RULES
    source = DEFAULT_RULES if configured is None else configured
    return _compiled(tuple(source.items()))


def matched_rule(command: str) -> str | None:
    """The name of the first rule `command` matches, or None."""
    for name, pattern in rules():
        if pattern.search(command):
            return name
    return None


def confirm_question(arguments: dict[str, Any]) -> str | None:
    """bash's per-call confirmation: the question for an expert, or None to run it."""
    command = arguments.get("command")
    if not isinstance(command, str):
        return None  # malformed: the tool refuses it itself
    rule = matched_rule(command)
    if rule is None:
        return None
    shown = command if len(command) <= 300 else command[:297] + "..."
    return f"bash wants to run a command that matches the rule '{rule}': {shown}"

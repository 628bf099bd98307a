"""Delete old finished traces (issue 25): `manage.py prune_traces --older-than 30d`."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from traces.models import TraceStatus
from traces.services.delete import traces_prune

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([dhm])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}
DEFAULT_STATUSES = f"{TraceStatus.COMPLETED},{TraceStatus.FAILED},{TraceStatus.STOPPED}"


def parse_age(text: str) -> timedelta:
    """'30d', '12h', '90m' as a timedelta; CommandError otherwise."""
    match = _AGE.match(text)
    if not match:
        raise CommandError(f"--older-than wants a number and a unit (d, h or m), e.g. 30d, not {text!r}")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


class Command(BaseCommand):
    help = (
        "Delete root traces last changed longer ago than --older-than, whose status is one of "
        "--status, with their sub-traces, messages, events, workspaces and files. Traces with a "
        "run in flight are kept. --dry-run counts without deleting."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than", required=True, help="age, e.g. 30d, 12h, 90m")
        parser.add_argument("--status", default=DEFAULT_STATUSES, help=f"default {DEFAULT_STATUSES}")
        parser.add_argument("--dry-run", action="store_true", help="count what would go, delete nothing")
        parser.add_argument("--batch", type=int, default=200, help="root traces per transaction")

    def handle(self, *args: Any, **options: Any) -> None:
        age = parse_age(options["older_than"])
        statuses = [s.strip() for s in options["status"].split(",") if s.strip()]
        if options["batch"] < 1:
            raise CommandError("--batch must be at least 1")
        try:
            summary = traces_prune(
                older_than=age, statuses=statuses, dry_run=options["dry_run"], batch=options["batch"]
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        counts = ", ".join(f"{value} {name}" for name, value in summary.as_dict().items())
        verb = "would delete" if options["dry_run"] else "deleted"
        self.stdout.write(
            f"{verb} {len(summary.trace_ids)} root traces older than {options['older_than']}: {counts}"
        )

"""`manage.py run_suite SUITE --model M --preset P`: replay a suite, print the comparison
table, exit by pass rate (for CI): 0 at or above --threshold, 1 below, 2 when the suite
could not be run or did not finish in time."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from suites.models import Suite, SuiteRun
from suites.selectors import format_table, suite_run_table
from suites.services import suite_run_refresh, suite_run_start
from traces.runner import RunError


class Command(BaseCommand):
    help = "Replay every case of SUITE as a trace, score it, print the table; exit 1 below --threshold."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("suite", help="the suite's name or id")
        parser.add_argument("--model", default="", help="the model to run (default: each case's default)")
        parser.add_argument("--preset", default="", help="the preset to run (default: each case's own)")
        parser.add_argument(
            "--run-settings", default="", help="run settings as JSON, e.g. '{\"enable_memory\": false}'"
        )
        parser.add_argument(
            "--baseline", default="last", help="a run id of the suite to compare with, 'last' or 'none'"
        )
        parser.add_argument("--threshold", type=float, default=1.0, help="pass rate needed (0-1, default 1)")
        parser.add_argument("--user", default="", help="who runs it (default: the only superuser)")
        parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the runs")
        parser.add_argument(
            "--inline",
            action="store_true",
            help="run the cases in this process, one after another (no worker cluster needed)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not 0.0 <= options["threshold"] <= 1.0:
            raise CommandError("--threshold is a pass rate between 0 and 1", returncode=2)
        suite = _suite(options["suite"])
        user = _user(options["user"])
        baseline = _baseline(suite, options["baseline"])
        try:
            settings = json.loads(options["run_settings"]) if options["run_settings"] else {}
        except json.JSONDecodeError as exc:
            raise CommandError(f"--run-settings is not JSON: {exc.msg}", returncode=2) from None
        if not isinstance(settings, dict):
            raise CommandError("--run-settings is a JSON object", returncode=2)
        try:
            with _inline(options["inline"]):
                run = suite_run_start(
                    user=user,
                    suite=suite,
                    model=options["model"],
                    preset=options["preset"],
                    baseline=baseline,
                )
        except RunError as exc:
            raise CommandError(str(exc), returncode=2) from None
        self.stderr.write(f"suite run #{run.pk}: {run.case_runs.count()} cases, review queue #{run.queue_id}")
        deadline = time.monotonic() + options["timeout"]
        finished = -1
        while True:
            run = suite_run_refresh(run)
            table = suite_run_table(run)
            if table.finished != finished:
                finished = table.finished
                self.stderr.write(f"{finished}/{len(table.rows)} cases scored")
            if run.finished_at is not None:
                break
            if time.monotonic() > deadline:
                self.stdout.write(format_table(table))
                raise CommandError(
                    f"suite run #{run.pk} did not finish in {options['timeout']:g} s", returncode=2
                )
            time.sleep(1.0)
        self.stdout.write(format_table(table))
        if table.pass_rate < options["threshold"]:
            self.stderr.write(f"pass rate {table.pass_rate:.0%} is below {options['threshold']:.0%}")
            sys.exit(1)


def _suite(key: str) -> Suite:
    suite = Suite.objects.filter(name=key).first()
    if suite is None and key.isdigit():
        suite = Suite.objects.filter(pk=int(key)).first()
    if suite is None:
        raise CommandError(f"no suite named {key!r}", returncode=2)
    return suite


def _user(name: str) -> Any:
    users = get_user_model().objects.filter(is_active=True)
    if name:
        found = users.filter(username=name).first()
        if found is None:
            raise CommandError(f"no active user {name!r}", returncode=2)
        return found
    supers = list(users.filter(is_superuser=True)[:2])
    if len(supers) != 1:
        raise CommandError(
            "say who runs the suite with --user (there is not exactly one superuser)", returncode=2
        )
    return supers[0]


def _baseline(suite: Suite, key: str) -> SuiteRun | None:
    if key == "none":
        return None
    if key == "last":
        return suite.runs.filter(finished_at__isnull=False).order_by("-created_at", "-id").first()
    found = suite.runs.filter(pk=int(key)).first() if key.isdigit() else None
    if found is None:
        raise CommandError(f"suite {suite.name!r} has no run {key!r}", returncode=2)
    return found


@contextmanager
def _inline(inline: bool) -> Iterator[None]:
    """django-q2's sync mode for the runs queued inside: each runs when its request commits."""
    if not inline:
        yield
        return
    from django_q.conf import Conf

    before = Conf.SYNC
    Conf.SYNC = True
    try:
        yield
    finally:
        Conf.SYNC = before

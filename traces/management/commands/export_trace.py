"""`manage.py export_trace TRACE_ID OUT`: a trace and its sub-traces in seed 004's layout,
as a directory (OUT) or one archive (OUT ending in .tar.gz)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from traces.runner import RunError
from traces.services.transfer import trace_export, trace_export_archive


class Command(BaseCommand):
    help = "Export a trace with its sub-traces (meta.json, goal.json, events.jsonl, messages/)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("trace_id")
        parser.add_argument("out", help="a directory to write into, or a file name ending in .tar.gz")

    def handle(self, *args: Any, **options: Any) -> None:
        reader = get_user_model()(is_staff=True)  # the operator reads every trace
        out = Path(options["out"])
        try:
            if out.name.endswith(".tar.gz"):
                out.write_bytes(trace_export_archive(user=reader, trace_id=options["trace_id"]))
                written = [options["trace_id"]]
            else:
                out.mkdir(parents=True, exist_ok=True)
                written = trace_export(user=reader, trace_id=options["trace_id"], directory=out)
        except RunError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"exported {len(written)} trace(s) to {out}")

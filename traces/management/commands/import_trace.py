"""`manage.py import_trace SOURCE --user NAME`: import an export (a directory or a .tar.gz)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from traces.runner import RunError
from traces.services.transfer import trace_import


class Command(BaseCommand):
    help = "Import a trace export (directory or .tar.gz) as the given user's trace."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source")
        parser.add_argument("--user", required=True, help="who owns the imported traces")

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["user"], is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {options['user']!r}")
        source = Path(options["source"])
        if not source.exists():
            raise CommandError(f"{source} does not exist")
        try:
            trace = trace_import(user=user, source=source.read_bytes() if source.is_file() else source)
        except RunError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"imported {trace.trace_id} ({trace.status})")

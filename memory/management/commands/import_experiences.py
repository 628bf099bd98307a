"""`manage.py import_experiences FILE`: load an experiences.md, all or nothing (M2)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.experiences_md import ExperiencesFileError
from memory.services import experiences_import


class Command(BaseCommand):
    help = "Create or replace experiences from an experiences.md file; a malformed block imports nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="experiences.md to read ('-' for stdin)")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["file"]
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{name}: {exc}") from None
        try:
            result = experiences_import(text=text)
        except ExperiencesFileError as exc:
            raise CommandError(f"{name}: {exc}; nothing was imported") from None
        self.stdout.write(
            self.style.SUCCESS(f"{len(result['created'])} created, {len(result['updated'])} updated")
        )

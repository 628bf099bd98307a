"""`manage.py export_experiences [FILE]`: write every experience as experiences.md (M2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.models import Experience, ExperienceStatus
from memory.services import experiences_export


class Command(BaseCommand):
    help = "Write experiences as experiences.md to FILE (default: stdout)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", nargs="?", help="where to write (default: stdout)")
        parser.add_argument(
            "--status", choices=ExperienceStatus.values, help="only experiences in this status"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        experiences = Experience.objects.all()
        if options["status"]:
            experiences = experiences.filter(status=options["status"])
        text = experiences_export(queryset=experiences)
        if options["file"]:
            Path(options["file"]).write_text(text, encoding="utf-8")
            self.stderr.write(f"wrote {experiences.count()} experience(s) to {options['file']}")
        else:
            self.stdout.write(text, ending="")

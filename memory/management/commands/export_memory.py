"""`manage.py export_memory [--owner U] [FILE]`: a user's memory entries as memory.md (M8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.entries.services import memory_entries_export
from memory.management.owners import OWNER_HELP, owner_id
from memory.models import MemoryEntry


class Command(BaseCommand):
    help = "Write a user's memory entries (every project) as memory.md to FILE (default: stdout)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", nargs="?", help="where to write (default: stdout)")
        parser.add_argument("--owner", help=OWNER_HELP)

    def handle(self, *args: Any, **options: Any) -> None:
        entries = list(MemoryEntry.objects.filter(owner_id=owner_id(options["owner"])))
        text = memory_entries_export(entries=entries)
        if options["file"]:
            Path(options["file"]).write_text(text, encoding="utf-8")
            self.stderr.write(f"wrote {len(entries)} memory entr{'y' if len(entries) == 1 else 'ies'}")
        else:
            self.stdout.write(text, ending="")

"""`manage.py import_memory FILE [--owner U]`: load a memory.md for a user, all or nothing (M8)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.entries.gate import MemoryRefused
from memory.entries.markdown import MemoryFileError
from memory.entries.services import memory_entries_import
from memory.management.owners import OWNER_HELP, owner_id


class Command(BaseCommand):
    help = (
        "Create or replace a user's memory entries from a memory.md file (each through the write "
        "gate); a malformed or refused entry imports nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="memory.md to read ('-' for stdin)")
        parser.add_argument("--owner", help=OWNER_HELP)

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["file"]
        owner = owner_id(options["owner"])
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{name}: {exc}") from None
        try:
            result = memory_entries_import(owner_id=owner, text=text)
        except (MemoryFileError, MemoryRefused) as exc:
            raise CommandError(f"{name}: {exc}; nothing was imported") from None
        self.stdout.write(self.style.SUCCESS(f"{result['created']} created, {result['replaced']} replaced"))

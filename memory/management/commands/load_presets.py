"""`manage.py load_presets FILE`: store the presets of a JSON file (M7)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from memory.presets import preset_save, read_presets_file


class Command(BaseCommand):
    help = 'Store every preset of a JSON file {"name": {allowed_tools, denied_tools, max_iterations, ...}}.'

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="JSON file of presets")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            presets = read_presets_file(options["file"])
        except (OSError, ValueError, TypeError, json.JSONDecodeError) as exc:
            raise CommandError(str(exc)) from None
        with transaction.atomic():
            for name, preset in presets.items():
                preset_save(name, preset)
        self.stdout.write(self.style.SUCCESS(f"stored {len(presets)} preset(s): {', '.join(presets)}"))

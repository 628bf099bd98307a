"""`manage.py load_demo`: demo traces and experiences, no model key needed (`traces/demo/`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from traces.demo import demo_load, demo_traces


class Command(BaseCommand):
    help = "Fill the database with demo traces and experiences (no model key needed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--owner", default="expert", help="username owning the demo traces (default: expert)"
        )
        parser.add_argument("--reset", action="store_true", help="replace demo data loaded before")

    def handle(self, *args: Any, owner: str, reset: bool, **options: Any) -> None:
        if demo_traces().exists() and not reset:
            raise CommandError("demo data is already loaded; use --reset to replace it")
        user = get_user_model().objects.filter(username=owner).first()
        if user is None:
            if owner != "expert":
                raise CommandError(f"no user {owner!r}")
            call_command("ensure_expert", stdout=self.stdout)
            user = get_user_model().objects.get(username=owner)
        traces, experiences = demo_load(owner=user)
        self.stdout.write(
            f"Loaded {traces} demo traces and {experiences} experiences "
            f"owned by {owner!r}; open http://127.0.0.1:8000/ and log in."
        )

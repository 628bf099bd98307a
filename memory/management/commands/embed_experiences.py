"""`manage.py embed_experiences [--all]`: embed approved experiences in batches (M4)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.retrieval.embeddings import embedding_candidates
from memory.services import experiences_embed_all
from traces.llm import embedding_model


class Command(BaseCommand):
    help = (
        "Embed the approved experiences that have no embedding from AGENT_EMBEDDING_MODEL "
        "(all of them with --all), AGENT_EMBEDDING_BATCH per provider call."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true", help="re-embed every approved experience")

    def handle(self, *args: Any, **options: Any) -> None:
        model = embedding_model()
        if model is None:
            raise CommandError("AGENT_EMBEDDING_MODEL is not set: nothing to embed with.")
        todo = embedding_candidates(everything=options["all"]).count()
        self.stdout.write(f"{todo} approved experience(s) to embed with {model.model}")

        def progress(done: int, total: int) -> None:
            self.stdout.write(f"  {done}/{total}")

        done = experiences_embed_all(everything=options["all"], on_progress=progress)
        if done < todo:
            raise CommandError(f"embedded {done} of {todo}: the provider failed (see the log); run again")
        self.stdout.write(self.style.SUCCESS(f"embedded {done} experience(s)"))

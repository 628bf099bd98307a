from __future__ import annotations

from django.apps import AppConfig


class SuitesConfig(AppConfig):
    name = "suites"
    verbose_name = "Regression suites"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from suites.services import suite_run_ended
        from traces.runner.extensions import extensions

        # A case's trace (or its rubric reviewer) ending a run scores the case, in the worker.
        extensions.add("after_end", suite_run_ended)

from __future__ import annotations

import sys

from django.apps import AppConfig


class TracesConfig(AppConfig):
    name = "traces"
    verbose_name = "Traces"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from traces import checks, events, llm  # noqa: F401 (checks registers itself)
        from traces.events import doorbell

        llm.register_model_prices()
        events.subscribe(doorbell.ring)
        self._extend_runs()

        from django_q.signals import post_spawn

        from traces.tasks import on_worker_start

        post_spawn.connect(on_worker_start, dispatch_uid="traces.sweep_at_worker_start")
        if sys.argv[1:2] == ["qcluster"]:
            # django-q2 forks its workers from this process: load what every run's
            # first model call needs (litellm, its providers, the OpenAI SDK:
            # seconds of imports) once here, shared, not in every worker's first run.
            from traces.runhost import lower_priority, preload

            lower_priority()
            preload()

    def _extend_runs(self) -> None:
        """Collaboration and notifications plug into every run (the runner imports neither)."""
        from traces.collaboration.healing import healed_result
        from traces.collaboration.inbox import inbox_context_hook
        from traces.collaboration.remote import remote_agents_context_hook
        from traces.notifications import notify_run_ended
        from traces.runner.extensions import extensions

        extensions.add("context_hooks", inbox_context_hook)
        extensions.add("context_hooks", remote_agents_context_hook)
        extensions.add("healers", healed_result)
        extensions.add("after_end", notify_run_ended)
        from traces.observability.otel import register_from_environment

        register_from_environment()  # OpenTelemetry spans, when the OTEL_* variables ask for them

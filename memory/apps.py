from __future__ import annotations

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from memory import extensions as memory_extensions
        from memory.fulltext import ensure_after_migrate
        from memory.services import experiences_forget_traces
        from traces.runner.extensions import extensions
        from traces.services.delete import trace_deleting

        memory_extensions.register(extensions)
        # A deleted trace's experiences keep their text; their evidence says it was deleted.
        trace_deleting.connect(experiences_forget_traces, dispatch_uid="memory-forget-traces")
        # Django rebuilds a SQLite table to alter it, which drops the full-text triggers.
        post_migrate.connect(ensure_after_migrate, sender=self, dispatch_uid="memory-fulltext")

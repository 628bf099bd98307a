from __future__ import annotations

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memory import extensions as memory_extensions
        from memory.services import experiences_forget_traces
        from traces.runner.extensions import extensions
        from traces.services.delete import trace_deleting

        memory_extensions.register(extensions)
        # A deleted trace's experiences keep their text; their evidence says it was deleted.
        trace_deleting.connect(experiences_forget_traces, dispatch_uid="memory-forget-traces")

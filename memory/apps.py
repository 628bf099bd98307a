from __future__ import annotations

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memory import extensions as memory_extensions
        from traces.runner.extensions import extensions

        memory_extensions.register(extensions)

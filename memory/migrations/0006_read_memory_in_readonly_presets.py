"""Offer `read_memory` (M8, read-only) to the stored read-only built-in presets
that still allow only listed tools and do not name it yet."""

from __future__ import annotations

from django.db import migrations

READ_ONLY_PRESETS = ("explore", "analyst")


def add_read_memory(apps, schema_editor):
    AgentPreset = apps.get_model("memory", "AgentPreset")
    for preset in AgentPreset.objects.filter(name__in=READ_ONLY_PRESETS):
        if isinstance(preset.allowed_tools, list) and "read_memory" not in preset.allowed_tools:
            preset.allowed_tools = [*preset.allowed_tools, "read_memory"]
            preset.save(update_fields=["allowed_tools"])


def remove_read_memory(apps, schema_editor):
    AgentPreset = apps.get_model("memory", "AgentPreset")
    for preset in AgentPreset.objects.filter(name__in=READ_ONLY_PRESETS):
        if isinstance(preset.allowed_tools, list) and "read_memory" in preset.allowed_tools:
            preset.allowed_tools = [t for t in preset.allowed_tools if t != "read_memory"]
            preset.save(update_fields=["allowed_tools"])


class Migration(migrations.Migration):
    dependencies = [("memory", "0005_memory_entries")]

    operations = [migrations.RunPython(add_read_memory, remove_read_memory)]

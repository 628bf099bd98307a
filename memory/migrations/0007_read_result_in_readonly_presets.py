"""Offer `read_result` (microcompact's read-back, read-only) to the stored read-only
built-in presets that still allow only listed tools and do not name it yet, so a
stubbed result in an explore or analyst run can be read back as the stub says."""

from __future__ import annotations

from django.db import migrations

READ_ONLY_PRESETS = ("explore", "analyst")


def add_read_result(apps, schema_editor):
    AgentPreset = apps.get_model("memory", "AgentPreset")
    for preset in AgentPreset.objects.filter(name__in=READ_ONLY_PRESETS):
        if isinstance(preset.allowed_tools, list) and "read_result" not in preset.allowed_tools:
            preset.allowed_tools = [*preset.allowed_tools, "read_result"]
            preset.save(update_fields=["allowed_tools"])


def remove_read_result(apps, schema_editor):
    AgentPreset = apps.get_model("memory", "AgentPreset")
    for preset in AgentPreset.objects.filter(name__in=READ_ONLY_PRESETS):
        if isinstance(preset.allowed_tools, list) and "read_result" in preset.allowed_tools:
            preset.allowed_tools = [t for t in preset.allowed_tools if t != "read_result"]
            preset.save(update_fields=["allowed_tools"])


class Migration(migrations.Migration):
    dependencies = [("memory", "0006_read_memory_in_readonly_presets")]

    operations = [migrations.RunPython(add_read_result, remove_read_result)]

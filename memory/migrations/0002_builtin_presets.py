"""Store the built-in presets so experts can edit them in the admin (M7)."""

from __future__ import annotations

from django.db import migrations

BUILTINS = {
    "default": {
        "allowed_tools": None,
        "denied_tools": None,
        "max_iterations": 30,
        "temperature": None,
        "skills": ["planning", "research"],
        "description": "Default agent with every tool.",
    },
    "explore": {
        "allowed_tools": ["read", "glob", "grep", "list_files", "goal", "skill", "get_experience"],
        "denied_tools": ["write", "edit", "bash", "agent"],
        "max_iterations": 15,
        "temperature": None,
        "skills": ["planning"],
        "description": "Read-only explorer for code and file analysis.",
    },
    "analyst": {
        "allowed_tools": [
            "read", "glob", "grep", "list_files", "goal", "web_search", "webfetch", "skill", "get_experience",
        ],
        "denied_tools": ["write", "edit", "bash", "agent"],
        "max_iterations": 25,
        "temperature": 0.3,
        "skills": ["planning", "research"],
        "description": "Analyst for deep analysis and research, no writes.",
    },
}


def add_builtins(apps, schema_editor):
    AgentPreset = apps.get_model("memory", "AgentPreset")
    for name, fields in BUILTINS.items():
        AgentPreset.objects.get_or_create(name=name, defaults=fields)


def remove_builtins(apps, schema_editor):
    apps.get_model("memory", "AgentPreset").objects.filter(name__in=list(BUILTINS)).delete()


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]

    operations = [migrations.RunPython(add_builtins, remove_builtins)]

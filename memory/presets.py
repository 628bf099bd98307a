"""Agent presets (M7, T5): per agent type, which tools, how many steps, which skills.

Built-ins (and anything `register_preset` adds in this process) live in
`AGENT_PRESETS`; presets stored in the database (`memory.models.AgentPreset`,
edited in the admin or loaded with `manage.py load_presets FILE`) override and
extend them, in every process. `get_preset` reads both.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from agentsite.kept import Kept


@dataclass
class Preset:
    """An agent preset as a run reads it (M7): built-in, registered, or loaded from
    the database row `memory.models.AgentPreset`."""

    allowed_tools: list[str] | None = None  # None = every registered tool
    denied_tools: list[str] | None = None
    max_iterations: int | None = None  # None = the run's own limit, else AGENT_MAX_ITERATIONS
    temperature: float | None = None
    skills: list[str] | None = None  # None = every skill
    description: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_DEFAULT_SKILLS = ["planning", "research"]

AGENT_PRESETS: dict[str, Preset] = {
    "default": Preset(
        allowed_tools=None,
        skills=_DEFAULT_SKILLS,
        description="Default agent with every tool.",
    ),
    "explore": Preset(
        allowed_tools=[
            "read",
            "glob",
            "grep",
            "list_files",
            "goal",
            "skill",
            "get_experience",
            "read_memory",
            "read_result",
        ],
        denied_tools=["write", "edit", "bash", "agent"],
        max_iterations=15,
        skills=["planning"],
        description="Read-only explorer for code and file analysis.",
    ),
    "analyst": Preset(
        allowed_tools=[
            "read",
            "glob",
            "grep",
            "list_files",
            "goal",
            "web_search",
            "webfetch",
            "skill",
            "get_experience",
            "read_memory",
            "read_result",
        ],
        denied_tools=["write", "edit", "bash", "agent"],
        temperature=0.3,
        max_iterations=25,
        skills=["planning", "research"],
        description="Analyst for deep analysis and research, no writes.",
    ),
}


class PresetFields(BaseModel):
    """A preset as a presets file gives it: Preset's fields, JSON types as they are."""

    model_config = ConfigDict(strict=True, extra="forbid")

    allowed_tools: list[str] | None = None
    denied_tools: list[str] | None = None
    max_iterations: int | None = None
    temperature: float | None = None
    skills: list[str] | None = None
    description: str | None = None
    extra: dict[str, Any] | None = None


PRESET_FIELDS = tuple(PresetFields.model_fields)


class UnknownPreset(KeyError):
    def __str__(self) -> str:
        return f"unknown preset {self.args[0]!r}; known presets: {', '.join(preset_names())}"


def preset_names() -> list[str]:
    from memory.models import AgentPreset as StoredPreset

    return sorted({*AGENT_PRESETS, *StoredPreset.objects.values_list("name", flat=True)})


def get_preset(name: str | None) -> Preset:
    """The preset `name` (default "default"): the database's, else the built-in one.

    The database's is read at most once a second per process (agentsite/kept.py: every
    start reads its preset, and every run again in the worker); a save here shows at
    once, another process's within the second. Like a built-in one, the preset returned
    is shared: callers do not change it."""
    key = name or "default"
    stored = _stored.get(key)
    if stored is not None:
        return stored
    if key not in AGENT_PRESETS:
        raise UnknownPreset(key)
    return AGENT_PRESETS[key]


def _read_stored(key: str) -> Preset | None:
    from memory.models import AgentPreset as StoredPreset

    # Raw: the ORM would compile the query anew each time (0.38 against 0.22 ms of CPU
    # on PostgreSQL); raw() still decodes as it does.
    stored = next(iter(StoredPreset.objects.raw(_stored_preset_sql(), [key])), None)
    return None if stored is None else Preset(**{f: getattr(stored, f) for f in PRESET_FIELDS})


_stored: Kept[str, Preset | None] = Kept("presets", _read_stored, changed_by=("memory.AgentPreset",))


@cache
def _stored_preset_sql() -> str:
    from django.db import connection

    from memory.models import AgentPreset as StoredPreset

    quote = connection.ops.quote_name
    meta = StoredPreset._meta
    columns = ", ".join(quote(field.column) for field in meta.concrete_fields)
    return f"SELECT {columns} FROM {quote(meta.db_table)} WHERE {quote(meta.get_field('name').column)} = %s"


def register_preset(name: str, preset: Preset | dict[str, Any]) -> Preset:
    if isinstance(preset, dict):
        preset = Preset(**preset)
    AGENT_PRESETS[name] = preset
    return preset


def read_presets_file(path: str | Path) -> dict[str, Preset]:
    """Parse a JSON file `{"name": {...Preset fields}}`; ValueError naming the fault."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of presets")
    presets = {}
    for name, fields in data.items():
        try:
            preset = PresetFields.model_validate(fields)
        except ValidationError as exc:
            raise ValueError(f"{path}: preset {name!r} {_fault(exc)}") from None
        presets[name] = Preset(**preset.model_dump(exclude_unset=True))
    return presets


def _fault(exc: ValidationError) -> str:
    errors = exc.errors()
    unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden")
    if unknown:
        return f"has unknown field(s) {', '.join(unknown)}"
    if not errors[0]["loc"]:
        return "must be an object"
    return f"{'.'.join(map(str, errors[0]['loc']))}: {errors[0]['msg']}"


def preset_save(name: str, preset: Preset) -> None:
    """Store `preset` in the database under `name` (every process sees it)."""
    from memory.models import AgentPreset as StoredPreset

    fields = {f: getattr(preset, f) for f in PRESET_FIELDS}
    fields["description"] = fields["description"] or ""
    fields["extra"] = fields["extra"] or {}
    StoredPreset.objects.update_or_create(name=name, defaults=fields)

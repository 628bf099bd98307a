"""Agent presets (M7, T5): per agent type, which tools, how many steps, which skills."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class AgentPreset:
    allowed_tools: list[str] | None = None  # None = every registered tool
    denied_tools: list[str] | None = None
    max_iterations: int = 30
    temperature: float | None = None
    skills: list[str] | None = None  # None = every skill
    description: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_DEFAULT_SKILLS = ["planning", "research"]

AGENT_PRESETS: dict[str, AgentPreset] = {
    "default": AgentPreset(
        allowed_tools=None,
        max_iterations=30,
        skills=_DEFAULT_SKILLS,
        description="Default agent with every tool.",
    ),
    "explore": AgentPreset(
        allowed_tools=["read", "glob", "grep", "list_files", "goal"],
        denied_tools=["write", "edit", "bash", "agent"],
        max_iterations=15,
        skills=["planning"],
        description="Read-only explorer for code and file analysis.",
    ),
    "analyst": AgentPreset(
        allowed_tools=["read", "glob", "grep", "list_files", "goal", "web_search", "webfetch"],
        denied_tools=["write", "edit", "bash", "agent"],
        temperature=0.3,
        max_iterations=25,
        skills=["planning", "research"],
        description="Analyst for deep analysis and research, no writes.",
    ),
}


class UnknownPreset(KeyError):
    def __str__(self) -> str:
        return f"unknown preset {self.args[0]!r}; known presets: {', '.join(sorted(AGENT_PRESETS))}"


def get_preset(name: str | None) -> AgentPreset:
    key = name or "default"
    if key not in AGENT_PRESETS:
        raise UnknownPreset(key)
    return AGENT_PRESETS[key]


def register_preset(name: str, preset: AgentPreset | dict[str, Any]) -> AgentPreset:
    if isinstance(preset, dict):
        preset = AgentPreset(**preset)
    AGENT_PRESETS[name] = preset
    return preset


def load_presets_file(path: str | Path) -> list[str]:
    """Register every preset of a JSON file `{"name": {...AgentPreset fields}}`."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of presets")
    for name, fields in data.items():
        register_preset(name, fields)
    return list(data)

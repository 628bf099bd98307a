"""A run's settings that hold: stored on the trace, kept by every later run of it.

A new run resolves its RunConfig against the preset and the deployment and
stores the result in `Trace.run_settings` (the effective values: the tools it
was offered, its step limit, confirm policy, temperature, ...). Every later run
of the trace (continue, rewind, regenerate, the resume after an approval or an
answer, the sweep's resume) starts from those stored values; a field its request
sets explicitly replaces the stored one, and the change is a `settings_changed`
event. So a run started read-only stays read-only however it is resumed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from traces.runner.config import RunConfig

# RunConfig fields that are a run's settings, with the value meaning "not set".
UNSET: dict[str, Any] = {
    "tools": None,
    "temperature": None,
    "max_iterations": None,
    "skills": None,
    "system_prompt": None,
    "llm_params": {},
    "confirm_policy": None,
    "enable_memory": True,
    "context_every": None,
    "stream": None,
}
FIELDS = tuple(UNSET)


def requested(config: RunConfig) -> dict[str, Any]:
    """The settings `config` sets explicitly (differs from "not set")."""
    return {name: getattr(config, name) for name in FIELDS if getattr(config, name) != UNSET[name]}


def with_stored(config: RunConfig, stored: dict[str, Any] | None) -> RunConfig:
    """`config` with every setting it leaves unset taken from the trace's stored settings.

    `llm_params` merge (the request's keys win). A trace stored before settings
    were kept has none: the config stays as it is (the preset's defaults).
    """
    if not stored:
        return config
    explicit = requested(config)
    values: dict[str, Any] = {}
    for name in FIELDS:
        if name in stored and name not in explicit:
            values[name] = stored[name]
    if "llm_params" in explicit and isinstance(stored.get("llm_params"), dict):
        values["llm_params"] = {**stored["llm_params"], **explicit["llm_params"]}
    return dataclasses.replace(config, **values)


def changes(before: dict[str, Any] | None, after: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{field: {"from": old, "to": new}} for the settings that differ (none for a first run)."""
    if not before:
        return {}
    return {
        name: {"from": before.get(name), "to": value}
        for name, value in after.items()
        if before.get(name) != value
    }

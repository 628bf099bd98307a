"""Presets files (memory/presets.py:read_presets_file): fields checked by a pydantic model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memory.presets import Preset, read_presets_file


def read(tmp_path: Path, data: Any) -> dict[str, Preset]:
    path = tmp_path / "presets.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return read_presets_file(path)


def test_a_preset_takes_its_fields_and_leaves_the_rest_to_the_defaults(tmp_path):
    presets = read(tmp_path, {"reviewer": {"allowed_tools": ["read"], "temperature": 0, "max_iterations": 4}})

    assert presets["reviewer"] == Preset(allowed_tools=["read"], temperature=0.0, max_iterations=4)


@pytest.mark.parametrize(
    ("fields", "fault"),
    [
        (
            {"colour": "red", "allowed_tools": ["read"], "age": 3},
            "preset 'x' has unknown field(s) age, colour",
        ),
        (["read"], "preset 'x' must be an object"),
        ({"max_iterations": "4"}, "preset 'x' max_iterations: Input should be a valid integer"),
        ({"allowed_tools": ["read", 5]}, "preset 'x' allowed_tools.1: Input should be a valid string"),
        ({"temperature": True}, "preset 'x' temperature: Input should be a valid number"),
    ],
)
def test_a_preset_with_unknown_or_mistyped_fields_is_refused_naming_them(tmp_path, fields, fault):
    with pytest.raises(ValueError) as refused:
        read(tmp_path, {"x": fields})

    assert str(refused.value).endswith(fault)


@pytest.mark.django_db
def test_the_stored_read_only_presets_offer_the_read_backs():
    """Migrations 0006/0007: explore and analyst can read memory and stubbed results back."""
    from memory.models import AgentPreset

    for name in ("explore", "analyst"):
        allowed = AgentPreset.objects.get(name=name).allowed_tools
        assert {"read_memory", "read_result"} <= set(allowed), (name, allowed)

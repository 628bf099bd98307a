"""memory/reflect.py:validate_reflection: the model's answer read through pydantic models,
each fault named as the retry prompt tells it to the model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memory.reflect import ReflectionInvalid, validate_reflection

PATH: dict[int, Any] = {1: None, 2: None, 3: None}
LESSON = {
    "category": " Tool_Usage",
    "tags": {"state": ["Text File"], "intent": ["count lines"], "other": ["ignored"]},
    "condition": " text files ",
    "rule": " Use wc -l. ",
    "evidence": [3, 2, 3],
    "confidence": 0.9,
}


def answer(*experiences: Any) -> str:
    return "Here you go:\n```json\n" + json.dumps({"experiences": list(experiences)}) + "\n```"


def test_an_answer_becomes_clean_drafts():
    assert validate_reflection(answer(LESSON), PATH) == [
        {
            "category": "tool_usage",
            "tags": {"state": ["text_file"], "intent": ["count_lines"]},
            "condition": "text files",
            "rule": "Use wc -l.",
            "evidence": [3, 2],
        }
    ]
    assert validate_reflection(answer(), PATH) == []


@pytest.mark.parametrize(
    ("content", "fault"),
    [
        ("I think it went well.", 'expected a JSON object {"experiences": [...]}'),
        ('{"experiences": "none"}', 'expected a JSON object {"experiences": [...]}'),
        (answer(*[LESSON] * 6), "at most 5 experiences, got 6"),
        (answer(LESSON, "lesson"), "experience 2 is not an object"),
        (answer(LESSON | {"category": "tool usage"}), "experience 1: category must be a snake_case word"),
        (answer(LESSON | {"rule": "  "}), "experience 1: rule must be a non-empty string"),
        (answer(LESSON | {"condition": None}), "experience 1: condition must be a string"),
        (answer({k: v for k, v in LESSON.items() if k != "tags"}), "experience 1: tags must be"),
        (answer(LESSON | {"tags": {"state": "x"}}), "experience 1: tags must be"),
        (answer(LESSON | {"evidence": [True]}), "experience 1: evidence must be a list of message sequence"),
        (answer(LESSON | {"evidence": [42]}), "experience 1: evidence [42] are not messages of this run"),
        # the first fault in order: item 1's evidence before item 2's rule
        (answer(LESSON | {"evidence": [9]}, LESSON | {"rule": ""}), "experience 1: evidence [9]"),
    ],
)
def test_faults_are_named_for_the_model(content, fault):
    with pytest.raises(ReflectionInvalid) as invalid:
        validate_reflection(content, PATH)

    assert str(invalid.value).startswith(fault)

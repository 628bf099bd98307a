"""Reading a model's JSON answer (R11): the object in its text, code fences and all."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def json_object(text: str | None) -> dict[str, Any]:
    """The JSON object `text` holds (a fenced block, or the span from the first `{` to
    the last `}`); ValueError saying why when there is none."""
    body = (text or "").strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the answer")
    try:
        value = json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("the JSON is not an object")
    return value

"""What the database can store: text without NUL characters."""

from __future__ import annotations

from typing import Any

NUL_STAND_IN = "\ufffd"


def without_nul(value: Any) -> Any:
    """`value` with every NUL character replaced by U+FFFD, in nested lists and dicts too.

    PostgreSQL stores no NUL in text or jsonb ("\\u0000 cannot be converted to
    text"), and a tool's output or a model's reply may carry one (a binary file
    through bash): the step would fail to commit and the run would crash. Stored
    the same way on every database.
    """
    if isinstance(value, str):
        return value.replace("\x00", NUL_STAND_IN) if "\x00" in value else value
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    return value

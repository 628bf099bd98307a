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
    return _replaced(value) if _has_nul(value) else value  # clean values are not copied


def _has_nul(value: Any) -> bool:
    # Loops, not any() over generators: this sees every value a run stores.
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        for key, item in value.items():
            if _has_nul(key) or _has_nul(item):
                return True
        return False
    if isinstance(value, list):
        for item in value:
            if _has_nul(item):
                return True
        return False
    return False


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", NUL_STAND_IN)
    if isinstance(value, list):
        return [_replaced(v) for v in value]
    if isinstance(value, dict):
        return {_replaced(k): _replaced(v) for k, v in value.items()}
    return value

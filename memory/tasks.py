"""django-q2 tasks of memory: thin, they re-read state and call one service."""

from __future__ import annotations

import logging
from typing import Any

from memory.reflect import reflect_on_trace
from traces.runner import LeaseLost, RunConflict, RunError

logger = logging.getLogger(__name__)


def reflect_trace(
    trace_id: str, focus: str, reserved_token: int, reserved_from: str
) -> dict[str, Any] | None:
    """Run the reflection reserved by `traces.services.runs.trace_reflect`.

    A duplicate delivery finds the reservation gone (RunConflict) and does nothing.
    """

    try:
        result = reflect_on_trace(
            trace_id=trace_id, focus=focus, reserved_token=reserved_token, reserved_from=reserved_from
        )
    except (RunConflict, LeaseLost) as exc:
        logger.info("reflection on %s skipped (duplicate or superseded delivery): %s", trace_id, exc)
        return None
    except RunError as exc:
        logger.warning("reflection on %s refused: %s", trace_id, exc)
        return None
    return result.as_dict()

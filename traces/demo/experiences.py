"""Demo experiences in every status, their evidence pointing into the demo traces."""

from __future__ import annotations

from typing import Any

from memory.models import Experience, ExperienceSource, ExperienceStatus
from memory.services import experience_create
from traces.models import Message, Trace


def experiences(sales: Trace, refs: dict[str, int], loop: Trace) -> list[Experience]:
    def evidence(trace: Trace, *sequences: int) -> dict[str, Any]:
        return {
            "trace_id": trace.trace_id,
            "messages": [
                {"sequence": s, "message_id": Message.make_id(trace.trace_id, s)} for s in sequences
            ],
        }

    rows: list[dict[str, Any]] = [
        dict(
            rule="Compute totals with a script (`bash`) instead of adding numbers in your head; quote the script.",
            condition="a task asks for sums or averages over a table",
            category="tool_usage",
            tags={"intent": ["data_analysis"], "state": ["csv_input"]},
            status=ExperienceStatus.DRAFT,
            source=ExperienceSource.EXECUTION,
            evidence=evidence(sales, refs["bash"]),
            trace=sales,
            confidence=0.8,
        ),
        dict(
            rule="Break totals down by the main dimension (region, product) and **flag decreases** unprompted.",
            condition="summarising business data for executives",
            category="logic_flow",
            tags={"intent": ["reporting"], "state": ["csv_input"]},
            status=ExperienceStatus.DRAFT,
            source=ExperienceSource.EXECUTION,
            evidence=evidence(sales, refs["read"], refs["answer"]),
            trace=sales,
            confidence=0.7,
        ),
        dict(
            rule="After two identical reads, stop re-reading: run the test with `-p no:randomly --count 20` "
            "to reproduce instead.",
            condition="a flaky test needs reproducing",
            category="tool_usage",
            tags={"intent": ["debugging"], "state": ["flaky_test"]},
            status=ExperienceStatus.APPROVED,
            source=ExperienceSource.FEEDBACK,
            evidence=evidence(loop, 3, 5),
            trace=loop,
            helpful=3,
            confidence=0.9,
        ),
        dict(
            rule="List what a destructive git command will touch and ask before running it.",
            condition="deleting branches, tags or history",
            category="environment",
            tags={"intent": ["git_cleanup"], "state": ["remote_repository"]},
            status=ExperienceStatus.APPROVED,
            source=ExperienceSource.MANUAL,
            evidence={},
            trace=None,
            helpful=5,
            usage_count=7,
            confidence=0.95,
        ),
        dict(
            rule="Always answer in English.",
            condition="any task",
            category="communication",
            tags={"intent": ["writing"], "state": []},
            status=ExperienceStatus.RETIRED,
            source=ExperienceSource.MANUAL,
            evidence={},
            trace=None,
            harmful=2,
            confidence=0.3,
        ),
    ]
    return [experience_create(**row) for row in rows]

"""Loop detection (G6, seed 002 and seed 003's doom loops).

Watches the run's tool calls as (tool, arguments, result) and reports the worst
pattern it sees:

- generic_repeat: the same call (tool + arguments) over and over in the window;
- ping_pong: two calls alternating, A B A B …;
- no_progress: the same call getting the same result again and again.

A count at `warning` asks the runner to remind the model; at `critical` the round
ends with an error and the trace is flagged for an expert.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LoopVerdict:
    level: str  # "warning" | "critical"
    kind: str  # generic_repeat | ping_pong | no_progress
    count: int
    detail: str
    pattern: str = ""  # which calls; a warning is given once per pattern


def _digest(value: Any) -> str:
    if not isinstance(value, str):
        value = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha1(value.encode("utf-8", "replace")).hexdigest()[:16]


def _canonical_arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            return json.dumps(json.loads(arguments), sort_keys=True)
        except json.JSONDecodeError:
            return arguments.strip()
    return json.dumps(arguments, sort_keys=True, default=str)


class LoopDetector:
    def __init__(self, *, warning: int = 4, critical: int = 8, window: int = 20) -> None:
        if not 1 < warning < critical:
            raise ValueError("loop thresholds need 1 < warning < critical")
        self.warning = warning
        self.critical = critical
        self._calls: deque[tuple[str, str]] = deque(maxlen=max(window, 2 * critical))
        self._warned: set[str] = set()

    def observe(self, name: str, arguments: Any, result: str) -> LoopVerdict | None:
        """Record one finished tool call; return a verdict when a threshold is reached."""
        call = f"{name}:{_digest(_canonical_arguments(arguments))}"
        self._calls.append((call, _digest(result)))
        # Most specific first: on a tie, "same result again" beats "same call again".
        verdicts = [v for v in (self._no_progress(), self._ping_pong(), self._repeat()) if v]
        if not verdicts:
            return None
        worst = max(verdicts, key=lambda v: (v.level == "critical", v.count))
        if worst.level == "warning":
            key = f"{worst.kind}:{worst.pattern}"
            if key in self._warned:
                return None  # remind once per pattern until it turns critical
            self._warned.add(key)
        return worst

    def _level(self, count: int) -> str | None:
        if count >= self.critical:
            return "critical"
        if count >= self.warning:
            return "warning"
        return None

    def _repeat(self) -> LoopVerdict | None:
        last = self._calls[-1][0]
        count = sum(1 for call, _ in self._calls if call == last)
        level = self._level(count)
        if level is None:
            return None
        return LoopVerdict(
            level, "generic_repeat", count, f"the same call was made {count} times recently", last
        )

    def _no_progress(self) -> LoopVerdict | None:
        last = self._calls[-1]
        count = 0
        for entry in reversed(self._calls):
            if entry != last:
                break
            count += 1
        level = self._level(count)
        if level is None:
            return None
        return LoopVerdict(
            level, "no_progress", count, f"the same call returned the same result {count} times in a row"
        )

    def _ping_pong(self) -> LoopVerdict | None:
        calls = [c for c, _ in self._calls]
        if len(calls) < 4 or calls[-1] == calls[-2]:
            return None
        a, b = calls[-2], calls[-1]
        count = 0
        for index in range(len(calls) - 1, -1, -1):
            expected = b if (len(calls) - 1 - index) % 2 == 0 else a
            if calls[index] != expected:
                break
            count += 1
        level = self._level(count)
        if level is None:
            return None
        return LoopVerdict(
            level, "ping_pong", count, f"two calls alternated {count} times", "|".join(sorted((a, b)))
        )

"""Live event latency: an event's commit in a worker -> a WebSocket client receiving it.

Starts the real service (tests/e2e/stack.py: daphne + `manage.py qcluster`)
against the scripted model server, once per configuration:

- the embedded default: a SQLite file, no Redis (doorbell: Unix datagram sockets);
- PostgreSQL without Redis (doorbell: LISTEN/NOTIFY);
- PostgreSQL + Redis (doorbell: the channels_redis layer).

Each run makes `rounds` tool rounds (model calls answering after `--delay`
seconds, so events arrive spread out as in a real run) and is watched live. An
event's latency is the client's receive time minus the event's `created_at`,
stamped in the worker inside the transaction just before it commits; events
committed before the client connected are a replay and not counted. Prints
p50 / p99 per configuration and the load average. Not a test; nothing is asserted.

    python bench/event_latency.py                    # all three configurations
    python bench/event_latency.py --only sqlite --runs 5

`watch_delays` and `latency_figures` are importable (bench/density.py measures
the latency of its bursts with them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e.stack import Stack  # noqa: E402
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall  # noqa: E402

END = ("final", "error", "stopped")
CONFIGURATIONS = {
    "sqlite": ("SQLite file, no Redis (embedded default; Unix socket doorbell)", False, False),
    "postgres": ("PostgreSQL, no Redis (LISTEN/NOTIFY doorbell)", True, False),
    "redis": ("PostgreSQL + Redis (channels_redis doorbell)", True, True),
}


def watch_delays(
    stack: Stack, trace_id: str, *, timeout: float = 120, types: list[str] | None = None
) -> list[float]:
    """Seconds from commit to receipt of each event of `trace_id` committed after the
    watch connected, until the run ends (the socket is read in this thread); each
    event's type is appended to `types` when given."""
    delays: list[float] = []
    with stack.watch(trace_id) as socket_:
        connected = time.time()
        while True:
            event = json.loads(socket_.recv(timeout=timeout))
            received = time.time()
            created = datetime.fromisoformat(event["created_at"]).timestamp()
            if created >= connected:
                delays.append(received - created)
                if types is not None:
                    types.append(event["type"])
            if event["type"] in END:
                return delays


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency_figures(delays: list[float]) -> dict[str, float]:
    """{"events", "p50_ms", "p99_ms", "max_ms"} of delays in seconds."""
    if not delays:
        return {"events": 0}
    return {
        "events": len(delays),
        "p50_ms": round(percentile(delays, 0.5) * 1000, 1),
        "p99_ms": round(percentile(delays, 0.99) * 1000, 1),
        "max_ms": round(max(delays) * 1000, 1),
    }


def start(stack: Stack, task: str) -> str:
    # A name given up front: no naming call to the utility model.
    status, body = stack.api(
        "POST", "/traces", {"messages": [{"role": "user", "content": task}], "name": task}
    )
    assert status == 201, body
    return body["trace_id"]


def one_run_delays(stack: Stack, model: ScriptedLLM, rounds: int, delay: float) -> list[float]:
    model.reset()
    # Distinct calls: the loop detector (G6) would end a run repeating one call.
    writes = [
        Reply(tool_calls=[ToolCall("write", {"path": f"f{i}.txt", "content": f"{i}"})], delay=delay)
        for i in range(rounds)
    ]
    model.script("scripted", [*writes, Reply(text="done", delay=delay)])
    return watch_delays(stack, start(stack, f"write {rounds} files"))


def measure(
    model: ScriptedLLM, postgres: bool, redis: bool, runs: int, rounds: int, delay: float
) -> dict[str, Any]:
    stack = Stack(model_url=model.url, redis=redis, postgres=postgres, workers=2, AGENT_STREAM="false")
    try:
        one_run_delays(stack, model, 2, delay)  # warm the worker and daphne up
        delays = [d for _ in range(runs) for d in one_run_delays(stack, model, rounds, delay)]
    finally:
        stack.stop()
    return latency_figures(delays)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=sorted(CONFIGURATIONS), action="append")
    parser.add_argument("--runs", type=int, default=3, help="watched runs per configuration")
    parser.add_argument("--rounds", type=int, default=40, help="tool rounds per run")
    parser.add_argument("--delay", type=float, default=0.05, help="seconds each model call takes")
    args = parser.parse_args()
    model = ScriptedLLM().start()
    try:
        for name in args.only or list(CONFIGURATIONS):
            title, postgres, redis = CONFIGURATIONS[name]
            print(f"== {title}: {args.runs} runs x {args.rounds} tool rounds", flush=True)
            figures = measure(model, postgres, redis, args.runs, args.rounds, args.delay)
            print(json.dumps({**figures, "load_average": load_average()}), flush=True)
    finally:
        model.stop()
    print(f"machine: {os.cpu_count()} cores; load average {load_average()}")


if __name__ == "__main__":
    main()

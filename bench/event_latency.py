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
p50 / p99 per configuration and the load average; on PostgreSQL also each part's
(`committed_*`: created -> committed, from PostgreSQL's commit timestamps;
`delivered_*`: committed -> received). Not a test; nothing is asserted.

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

from tests.e2e.stack import Stack, kill_group  # noqa: E402
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall  # noqa: E402

END = ("final", "error", "stopped")
CONFIGURATIONS = {
    "sqlite": ("SQLite file, no Redis (embedded default; Unix socket doorbell)", False, False),
    "postgres": ("PostgreSQL, no Redis (LISTEN/NOTIFY doorbell)", True, False),
    "redis": ("PostgreSQL + Redis (channels_redis doorbell)", True, True),
}


def watch_delays(
    stack: Stack,
    trace_id: str,
    *,
    timeout: float = 120,
    types: list[str] | None = None,
    ids: list[int] | None = None,
    received_at: list[float] | None = None,
    port: int | None = None,
) -> list[float]:
    """Seconds from creation to receipt of each event of `trace_id` created after the
    watch connected, until the run ends (the socket is read in this thread); each
    event's type (event_id, receipt time) is appended to `types` (`ids`, `received_at`)
    when given."""
    delays: list[float] = []
    with stack.watch(trace_id, port=port) as socket_:
        connected = time.time()
        while True:
            event = json.loads(socket_.recv(timeout=timeout))
            received = time.time()
            created = datetime.fromisoformat(event["created_at"]).timestamp()
            if created >= connected:
                delays.append(received - created)
                if types is not None:
                    types.append(event["type"])
                if ids is not None:
                    ids.append(event["event_id"])
                if received_at is not None:
                    received_at.append(received)
            if event["type"] in END:
                return delays


def track_commit_times(stack: Stack) -> None:
    """Have PostgreSQL keep each transaction's commit time (a restart; daphne too, as its
    connections die with it), so a delay splits into the worker's part and delivery's."""
    import psycopg

    assert stack.pg is not None and stack.daphne is not None
    with psycopg.connect(stack.pg.url, autocommit=True) as db:
        db.execute("ALTER SYSTEM SET track_commit_timestamp = on")
    stack.pg.restart()
    kill_group(stack.daphne)
    stack.daphne.wait()
    stack.daphne, stack.port = stack._start_daphne("daphne-bench")


def written_delays(stack: Stack, trace_id: str, ids: list[int]) -> list[float | None]:
    """Seconds from creation to commit (PostgreSQL's commit timestamp, see
    `track_commit_times`) of the events `ids` of `trace_id`; None where unknown (SQLite)."""
    if stack.pg is None:
        return [None] * len(ids)
    import psycopg

    with psycopg.connect(stack.pg.url) as db:
        rows = db.execute(
            "SELECT event_id, extract(epoch FROM pg_xact_commit_timestamp(xmin) - created_at)"
            " FROM traces_traceevent WHERE trace_id = %s",
            [trace_id],
        ).fetchall()
    written = {event_id: float(seconds) for event_id, seconds in rows if seconds is not None}
    return [written.get(event_id) for event_id in ids]


def parts(written: list[float | None], delays: list[float]) -> tuple[list[float], list[float]]:
    """Each delay with a known commit time (`written_delays`) split in two: created ->
    committed, and committed -> received."""
    pairs = [(w, d - w) for w, d in zip(written, delays, strict=True) if w is not None]
    return [w for w, _ in pairs], [r for _, r in pairs]


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


def one_run_delays(
    stack: Stack, model: ScriptedLLM, rounds: int, delay: float, written: list[float | None] | None = None
) -> list[float]:
    """One watched run's delays; each one's created -> committed part appended to `written`."""
    model.reset()
    # Distinct calls: the loop detector (G6) would end a run repeating one call.
    writes = [
        Reply(tool_calls=[ToolCall("write", {"path": f"f{i}.txt", "content": f"{i}"})], delay=delay)
        for i in range(rounds)
    ]
    model.script("scripted", [*writes, Reply(text="done", delay=delay)])
    trace_id, ids = start(stack, f"write {rounds} files"), []
    delays = watch_delays(stack, trace_id, ids=ids)
    if written is not None:
        written.extend(written_delays(stack, trace_id, ids))
    return delays


def measure(
    model: ScriptedLLM, postgres: bool, redis: bool, runs: int, rounds: int, delay: float
) -> dict[str, Any]:
    stack = Stack(model_url=model.url, redis=redis, postgres=postgres, workers=2, AGENT_STREAM="false")
    try:
        if postgres:
            track_commit_times(stack)
        one_run_delays(stack, model, 2, delay)  # warm the worker and daphne up
        written: list[float | None] = []
        delays = [d for _ in range(runs) for d in one_run_delays(stack, model, rounds, delay, written)]
    finally:
        stack.stop()
    figures: dict[str, Any] = latency_figures(delays)
    committed, delivered = parts(written, delays)
    if committed:  # PostgreSQL: the worker's part and delivery's
        for name, values in (("committed", committed), ("delivered", delivered)):
            figures[f"{name}_p50_ms"] = round(percentile(values, 0.5) * 1000, 1)
            figures[f"{name}_p99_ms"] = round(percentile(values, 0.99) * 1000, 1)
    return figures


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

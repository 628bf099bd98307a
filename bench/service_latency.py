"""Service figures: event latency worker -> WebSocket, events per second, concurrent runs.

Starts the real service (tests/e2e/stack.py: daphne + `manage.py qcluster` on a
throwaway PostgreSQL + Redis, or on a SQLite file without Redis) against the
scripted model server, and prints:

1. event latency: from an event's `created_at` (set in the worker just before the
   step's commit) to a WebSocket client receiving it, p50 / p99, for a run of
   fast tool rounds; events per second delivered live for that one trace, and
   the replay rate of the finished trace (`since=0`);
2. concurrent runs: N runs against a model answering every call after 1 s,
   started together over the API; wall time until all are completed, relative
   to one run alone, per worker count (AGENT_WORKERS).

Not a test; nothing is asserted. Usage:

    python bench/service_latency.py                  # PostgreSQL + Redis, and the SQLite polling figure
    python bench/service_latency.py --runs 16 --workers 8,16 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.e2e.stack import Stack  # noqa: E402
from tests.scripted_llm import Reply, ScriptedLLM, ToolCall  # noqa: E402

END = ("final", "error", "stopped")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def start(stack: Stack, task: str) -> str:
    # A name given up front: no naming call to the utility model.
    body = {"messages": [{"role": "user", "content": task}], "name": task[:60]}
    status, body = stack.api("POST", "/traces", body)
    assert status == 201, body
    return body["trace_id"]


def latency(stack: Stack, model: ScriptedLLM, rounds: int) -> dict[str, float]:
    """One run of `rounds` instant tool rounds, watched live from its first event."""
    model.reset()
    # Distinct calls: the loop detector (G6) would end a run repeating one call.
    writes = [
        Reply(tool_calls=[ToolCall("write", {"path": f"f{i}.txt", "content": f"{i}"})]) for i in range(rounds)
    ]
    model.script("scripted", [*writes, "done"])
    trace_id = start(stack, "list the files many times")
    delays, received = [], []
    with stack.watch(trace_id) as socket_:
        while True:
            event = json.loads(socket_.recv(timeout=60))
            now = time.time()
            received.append(now)
            delays.append(now - datetime.fromisoformat(event["created_at"]).timestamp())
            if event["type"] in END:
                break
    live_rate = (len(received) - 1) / (received[-1] - received[0])
    started = time.perf_counter()
    with stack.watch(trace_id) as socket_:
        count = 0
        while json.loads(socket_.recv(timeout=60))["type"] not in END:
            count += 1
    replay_rate = (count + 1) / (time.perf_counter() - started)
    # The first events are created before the client connects; they are a replay, not live.
    live = delays[5:]
    return {
        "events": len(delays),
        "p50_ms": percentile(live, 0.5) * 1000,
        "p99_ms": percentile(live, 0.99) * 1000,
        "live_events_per_s": live_rate,
        "replay_events_per_s": replay_rate,
    }


def wait_completed(stack: Stack, trace_ids: list[str], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    pending = set(trace_ids)
    while pending and time.monotonic() < deadline:
        for trace_id in list(pending):
            if stack.api("GET", f"/traces/{trace_id}")[1]["status"] == "completed":
                pending.discard(trace_id)
        time.sleep(0.1)
    if pending:
        raise RuntimeError(f"{len(pending)} runs did not complete")


def concurrent(stack: Stack, model: ScriptedLLM, runs: int, rounds: int) -> tuple[float, float, float]:
    """Wall times, 1 s per model call: one run; `runs` runs started together on workers that
    have not run anything yet (cold: each pays its first-call costs); the same again (warm)."""

    def slow(body: Any) -> Reply:
        step = len(body.get("messages", []))
        return Reply(tool_calls=[ToolCall("write", {"path": f"f{step}.txt", "content": "x"})], delay=1.0)

    def timed(count: int) -> float:
        model.reset()
        model.default = Reply(text="done", delay=1.0)
        model.script("scripted", [slow] * (rounds - 1) * count)
        started = time.perf_counter()
        wait_completed(stack, [start(stack, f"run {i}") for i in range(count)])
        return time.perf_counter() - started

    timed(1)  # warm the workers up
    one = timed(1)
    cold = timed(runs)
    return one, cold, timed(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--workers", default="16", help="comma-separated AGENT_WORKERS values to try")
    parser.add_argument("--rounds", type=int, default=3, help="model calls per concurrent run (1 s each)")
    parser.add_argument("--latency-rounds", type=int, default=40)
    parser.add_argument("--no-sqlite", action="store_true", help="skip the embedded SQLite polling figure")
    args = parser.parse_args()
    model = ScriptedLLM().start()
    try:
        print("== PostgreSQL + Redis: event latency worker -> WebSocket")
        stack = Stack(model_url=model.url, redis=True, postgres=True, workers=2, AGENT_STREAM="false")
        try:
            figures = latency(stack, model, args.latency_rounds)
        finally:
            stack.stop()
        print(json.dumps({k: round(v, 1) for k, v in figures.items()}))
        if not args.no_sqlite:
            print("== SQLite file, no Redis (embedded default, 0.5 s poll): event latency")
            stack = Stack(model_url=model.url, redis=False, postgres=False, workers=2, AGENT_STREAM="false")
            try:
                figures = latency(stack, model, args.latency_rounds)
            finally:
                stack.stop()
            print(json.dumps({k: round(v, 1) for k, v in figures.items()}))
        for workers in [int(w) for w in args.workers.split(",")]:
            print(
                f"== PostgreSQL + Redis: {args.runs} concurrent runs x {args.rounds} model calls of 1 s, "
                f"AGENT_WORKERS={workers}"
            )
            stack = Stack(
                model_url=model.url, redis=True, postgres=True, workers=workers, AGENT_STREAM="false"
            )
            try:
                one, cold, many = concurrent(stack, model, args.runs, args.rounds)
            finally:
                stack.stop()
            print(
                json.dumps(
                    {
                        "one_run_s": round(one, 2),
                        f"{args.runs}_runs_cold_s": round(cold, 2),
                        "ratio_cold": round(cold / one, 2),
                        f"{args.runs}_runs_s": round(many, 2),
                        "ratio": round(many / one, 2),
                        "workers": workers,
                    }
                )
            )
    finally:
        model.stop()
    print(f"one measurement per figure; machine: {_machine()}")


def _machine() -> str:
    import os
    import platform

    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {memory:.0f} GiB, Python {platform.python_version()}"


if __name__ == "__main__":
    main()

"""Recovery from the loss of a machine, and a Redis outage, on two "machines"
(issue 19): PostgreSQL + Redis, two daphne/qcluster pairs on loopback
(tests/e2e/test_two_machines.py builds them), each cluster 2 workers x 2 runs.

- kill: 12 runs (8 held in their second model call, 4 queued), then SIGKILL of
  machine A's daphne and cluster; prints the time from the kill to the last of the
  12 completing (queued runs included), with the lease, sweep and requeue
  settings given (defaults: the production defaults, 30 s / 10 s / 30 s);
- redis: 4 runs held, Redis killed for --outage seconds, a start request made
  through the outage and the runs let go; prints the start request's answer and
  time, how long the runs took to end during the outage, and the time from Redis's
  restart to the outage-started run's completion.

Not a test; nothing is asserted.

    python bench/machine_loss.py                              # production defaults
    python bench/machine_loss.py --lease 4 --sweep 2 --requeue 3
    python bench/machine_loss.py --only redis --outage 15
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e.stack import Stack  # noqa: E402
from tests.e2e.test_density import Gate, all_ended, rows  # noqa: E402
from tests.e2e.test_two_machines import (  # noqa: E402
    PER_WORKER,
    SLOTS,
    WORKERS,
    TwoMachines,
    Watcher,
    start_runs,
    tool_then_held,
)
from tests.scripted_llm import ScriptedLLM  # noqa: E402


def machines(model: ScriptedLLM, args: argparse.Namespace) -> TwoMachines:
    stack = Stack(
        model_url=model.url,
        redis=True,
        postgres=True,
        workers=WORKERS,
        AGENT_RUNS_PER_WORKER=str(PER_WORKER),
        AGENT_LEASE_SECONDS=str(args.lease),
        AGENT_SWEEP_SECONDS=str(args.sweep),
        AGENT_QUEUE_REQUEUE_SECONDS=str(args.requeue),
    )
    return TwoMachines(stack)


def kill(model: ScriptedLLM, args: argparse.Namespace) -> None:
    two, gate = machines(model, args), Gate()
    stack = two.stack
    model.reset()
    model.script("scripted", [tool_then_held(gate)] * 100)
    try:
        trace_ids = start_runs(stack, SLOTS + 4, port=two.b.port)
        gate.wait_held(SLOTS)
        on_a = [t for t, m in two.holders(trace_ids).items() if m is two.a]
        (queued,) = rows(stack, "SELECT count(*) FROM traces_trace WHERE status = 'queued'")
        killed = time.monotonic()
        stack.kill_cluster(two.a.cluster)
        stack.kill_cluster(two.a.daphne)
        gate.open()
        ended = stack.wait_for(lambda: all_ended(stack, trace_ids), timeout=900, what="all runs to end")
        took = time.monotonic() - killed
        statuses = sorted({t["status"] for t in ended.values()})
        print(
            f"kill -9 of machine A (lease {args.lease} s, sweep every {args.sweep} s, requeue after "
            f"{args.requeue} s): {len(on_a)} running on A, {queued[0]} queued; all {len(trace_ids)} "
            f"ended {statuses} {took:.1f} s after the kill"
        )
    finally:
        gate.open()
        stack.stop()


def redis(model: ScriptedLLM, args: argparse.Namespace) -> None:
    two, gate = machines(model, args), Gate()
    stack = two.stack
    model.reset()
    model.script("scripted", [tool_then_held(gate)] * 30)
    try:
        trace_ids = start_runs(stack, 4)
        gate.wait_held(4)
        watchers = [Watcher(stack, t, (two.a, two.b)[n % 2].port) for n, t in enumerate(trace_ids)]
        for watcher in watchers:
            watcher.first.wait(60)
        stack.stop_redis()
        down = time.monotonic()
        started = time.monotonic()
        status, body = stack.api("POST", "/traces", {"messages": [{"role": "user", "content": "do task-9"}]})
        answered = time.monotonic() - started
        late = body["trace_id"] if isinstance(body, dict) and "trace_id" in body else None
        gate.open()
        stack.wait_for(lambda: all_ended(stack, trace_ids), timeout=300, what="the runs to end")
        ended_in = time.monotonic() - down
        for watcher in watchers:
            watcher.join(60)
        closed = [w.closed for w in watchers if w.closed]
        time.sleep(max(0.0, args.outage - (time.monotonic() - down)))
        stack.start_redis()
        back = time.monotonic()
        late_took = None
        if late:
            stack.wait_for(lambda: all_ended(stack, [late]), timeout=900, what="the late run to end")
            late_took = time.monotonic() - back
        print(
            f"Redis down {back - down:.1f} s: start request answered {status} (JSON: {isinstance(body, dict)}) "
            f"in {answered * 1000:.0f} ms; the 4 held runs ended {ended_in:.1f} s after Redis stopped; "
            f"sockets closed: {len(closed)} of {len(watchers)}; statuses seen {[w.statuses for w in watchers]}; "
            f"the outage's run completed {late_took:.1f} s after Redis was back"
            if late_took is not None
            else f"Redis outage: start answered {status} {body}"
        )
    finally:
        gate.open()
        stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["kill", "redis"])
    parser.add_argument("--lease", type=int, default=30)
    parser.add_argument("--sweep", type=float, default=10)
    parser.add_argument("--requeue", type=int, default=30)
    parser.add_argument("--outage", type=float, default=15)
    args = parser.parse_args()
    with ScriptedLLM() as model:
        if args.only in (None, "kill"):
            kill(model, args)
        if args.only in (None, "redis"):
            redis(model, args)


if __name__ == "__main__":
    main()

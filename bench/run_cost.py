"""Run cost: the CPU one agent run costs the worker process, and its queries.

What limits many runs per machine is not waiting (a waiting run costs a thread)
but the CPU each run spends between its model calls: a 256-run burst on 2 cores
spends ~70 ms of worker CPU per run (bench/density.py). This bench measures that
figure alone, without the noise of a burst: runs one after another in one process,
each the density workload (3 model calls, a `write` tool call between), started as
the API starts them (`trace_start`: the reserved trace and its stored request) and
run as a worker runs them (`traces/runhost.py:run_in_this_thread` on a shared model
pool), against the scripted model (tests/scripted_llm.py, in its own process,
answering at once over HTTP through the real litellm client).

Per database and `AGENT_STREAM` value (true: every call streamed, as by default;
false: plain calls, as `watched` gives a run nobody watches) it prints, over
`--rounds` rounds of `--runs` runs after a warm-up round: the process's CPU per run
(user + system of every thread), split into the run's own thread (`time.thread_time`:
setup, commits, tools, the end; and `trace_start`, which the web server pays in the
service) and the rest (the model call's thread: our request building, litellm, the
OpenAI SDK or litellm's own HTTP handler, and litellm's logging thread); wall time per
run; on PostgreSQL the CPU of the server's processes per run (the postmaster's own and
reaped children's, and its live backends', from /proc); the SQL statements per run on
the run's thread (Django's `connection.execute_wrapper`), and with `--statements N` the
N most frequent by shape. On PostgreSQL the connections come from a pool, as in a
worker cluster (agentsite/settings/__init__.py), so a wait or a tool thread gives its
connection back instead of opening a new backend.

Not a test; nothing is asserted. Compare figures within one run: the machine is
shared. Usage:

    python bench/run_cost.py                       # sqlite and postgresql, 5 rounds of 20 runs
    python bench/run_cost.py --databases postgresql --rounds 9
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster_sampling import family_cpu  # noqa: E402
from bench.harness import RESULT_MARK, measure_in_worker, setup_django, start_scripted_model  # noqa: E402

MODEL_ENV = {
    "AGENT_MODEL": "openai/scripted",
    "AGENT_UTILITY_MODEL": "openai/utility",
    "AGENT_API_KEY": "sk-bench-not-a-secret",
    "AGENT_LLM_RETRIES": "0",
}


def _shape(sql: str) -> str:
    """A statement without its literals and placeholders' values, cut short."""
    sql = re.sub(r"'(?:[^']|'')*'", "?", sql)
    sql = re.sub(r"\b\d+\b", "?", sql)
    sql = re.sub(r'"[a-z_]+"\."([a-z_]+)"', r"\1", sql)
    return sql[:110]


def server_cpu() -> float:
    """Seconds of CPU PostgreSQL's processes have used (the postmaster, its live backends
    and the closed ones it has reaped); 0 on SQLite."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return 0.0
    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        data = cursor.fetchone()[0]
    return family_cpu(int(Path(data, "postmaster.pid").read_text().split()[0]))


def worker(runs: int, rounds: int) -> dict[str, Any]:
    os.environ.update(MODEL_ENV, AGENT_API_BASE=os.environ["RUN_COST_MODEL_URL"])  # not the harness's model
    setup_django()
    import concurrent.futures

    from django.contrib.auth.models import User
    from django.db import connection

    from traces.models import Trace
    from traces.runhost import run_in_this_thread
    from traces.runner import RunConfig
    from traces.services.runs import trace_start

    user = User.objects.create_user("bench", password="bench")
    if connection.vendor == "postgresql":
        # As in a worker cluster (agentsite/settings/__init__.py): connections from a
        # pool, which the run's waits and the tool threads give back.
        connection.close()
        connection.settings_dict["CONN_MAX_AGE"] = 0
        connection.settings_dict.setdefault("OPTIONS", {})["pool"] = {"min_size": 0, "max_size": 8}
    pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="model")
    statements: collections.Counter[str] = collections.Counter()

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        statements[sql] += 1  # shaped after the round: the wrapper's own CPU stays small
        return execute(sql, params, many, context)

    def one(index: int) -> None:
        trace = trace_start(
            user=user,
            messages=[{"role": "user", "content": f"Write three files ({index})."}],
            name=f"run {index}",
        )
        request = Trace.objects.values_list("run_request", flat=True).get(pk=trace.pk)
        trace_id, messages, config = request["args"]
        outcome = run_in_this_thread(trace_id, messages, RunConfig(**config), model_pool=pool)
        status = Trace.objects.values_list("status", flat=True).get(pk=trace_id)
        if status != "completed":
            raise RuntimeError(f"run {index} ended {outcome!r}, status {status}")

    cpu: list[float] = []
    own: list[float] = []
    server: list[float] = []
    wall: list[float] = []
    index = 0
    for round_ in range(rounds + 1):  # round 0 warms up
        statements.clear()
        started_server = server_cpu()
        started_cpu, started_own, started = sum(os.times()[:2]), time.thread_time(), time.perf_counter()
        with connection.execute_wrapper(count):
            for _ in range(runs):
                one(index)
                index += 1
        if round_:
            cpu.append((sum(os.times()[:2]) - started_cpu) / runs * 1000)
            own.append((time.thread_time() - started_own) / runs * 1000)
            wall.append((time.perf_counter() - started) / runs * 1000)
            if connection.vendor == "postgresql":
                server.append((server_cpu() - started_server) / runs * 1000)
    total = sum(statements.values())
    shapes: collections.Counter[str] = collections.Counter()
    for sql, n in statements.items():
        shapes[_shape(sql)] += n
    return {
        "cpu": cpu,
        "own": own,
        "server": server,
        "wall": wall,
        "statements": total / runs,
        "top": [(shape, n / runs) for shape, n in shapes.most_common(30)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--runs", type=int, default=20, help="runs per round (default 20)")
    parser.add_argument(
        "--rounds", type=int, default=5, help="measured rounds (default 5), after one warm-up"
    )
    parser.add_argument(
        "--stream", default="true,false", help="AGENT_STREAM values: true streams every call, false none"
    )
    parser.add_argument("--statements", type=int, default=0, help="print the N most frequent statements")
    parser.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        result = worker(int(args.worker[0]), int(args.worker[1]))
        print(RESULT_MARK + json.dumps(result), flush=True)
        return
    from bench.density import _workload_reply

    model, url = start_scripted_model(_workload_reply(0.0))
    os.environ["RUN_COST_MODEL_URL"] = url
    print(f"# run cost, {time.strftime('%Y-%m-%d %H:%M %Z')}, load {os.getloadavg()[0]:.2f}", flush=True)
    try:
        for kind in args.databases.split(","):
            for stream in args.stream.split(","):
                os.environ["AGENT_STREAM"] = stream
                worker_args = [str(args.runs), str(args.rounds)]
                result = measure_in_worker(__file__, worker_args, kind, "bench_run_cost")
                cpu, own, wall = result["cpu"], result["own"], result["wall"]
                others = [total - run for total, run in zip(cpu, own, strict=True)]
                print(
                    f"{kind}, AGENT_STREAM={stream}: CPU {statistics.median(cpu):.1f} ms/run"
                    f" (min {min(cpu):.1f}, max {max(cpu):.1f}): the run's thread {statistics.median(own):.1f},"
                    f" the model calls' and litellm's threads {statistics.median(others):.1f};"
                    f" wall {statistics.median(wall):.1f} ms/run;"
                    + (
                        f" PostgreSQL {statistics.median(result['server']):.1f} ms/run;"
                        if result["server"]
                        else ""
                    )
                    + f" {result['statements']:.1f} SQL statements/run on the run's thread",
                    flush=True,
                )
                for shape, n in result["top"][: args.statements]:
                    print(f"    {n:5.2f}  {shape}")
    finally:
        model.kill()
    print(f"# load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""Per-step cost of the agent loop on SQLite and PostgreSQL at growing trace lengths.

Prints, for main paths of 10, 1,000 and 10,000 messages (plus side branches):

(a) framework overhead per loop step with an instant in-process `llm_call`:
    everything outside the model call (persisting messages, events and stats,
    building the next request, tool dispatch). Target <= 3 ms, and flat: the
    step at 10,000 within 1.5x of the step at 10. Beside it, the first step alone
    (ms) and the steady steps after it: a run's first request on a long trace
    records the history it sends once (traces/runner/request_log.py; all of it
    here, where the traces were written directly, not by runs); "again" is the
    first step of one more run on the same trace, which finds that history stored,
    as a trace that runs wrote does.
(b) the whole step through the real `traces.llm.LLMClient` (litellm) with an
    instant scripted model behind litellm's custom-provider hook (no network).
(c) the main path of a 10,000-message trace with branches (median of N runs):
    `trace_main_path_for_run` as a run loads it, `trace_main_path` as the API
    lists it, the run selector's SQL alone, the walk alone. Target: the run's
    main-path load < 50 ms on PostgreSQL.

Usage: python bench/step_overhead.py [--steps 50] [--repeats 5] [--databases sqlite,postgresql]
Each database runs in its own worker process (Django is configured per process).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.harness import RESULT_MARK, RunTiming, branch_shape, measure_in_worker, median  # noqa: E402

OVERHEAD_TARGET_MS = 3.0
FLAT_TARGET = 1.5
MAIN_PATH_TARGET_MS = 50.0


# --- worker: one database ------------------------------------------------------


def worker(lengths: list[int], steps: int, repeats: int, main_path_runs: int) -> dict[str, Any]:
    from bench.harness import bench_registry, populate_trace, setup_django, timed_run

    setup_django()
    from django.db import connection

    from bench.instant_model import instant_llm_call, register_litellm_provider
    from traces.llm import LLMClient

    register_litellm_provider()
    registry = bench_registry()
    client = LLMClient(retries=0)

    # Warm-up: lazy imports, litellm's first call, connection set-up.
    for name, call in (("warm-a", instant_llm_call), ("warm-b", client)):
        populate_trace(name, 10)
        timed_run(call, steps=10, trace_id=name, registry=registry)

    # Repeats go round all lengths, so a disturbance (autovacuum, a neighbour's
    # burst of work) lands in one run of several cells, not in every run of one.
    a_runs: dict[int, list[RunTiming]] = {n: [] for n in lengths}
    again: dict[int, list[RunTiming]] = {n: [] for n in lengths}  # the same trace, continued once more
    b_runs: dict[int, list[RunTiming]] = {n: [] for n in lengths}
    shapes = {}
    for rep in range(repeats):
        for length in lengths:
            shapes[length] = populate_trace(f"a-{length}-{rep}", length)
            populate_trace(f"b-{length}-{rep}", length)
            a_runs[length].append(
                timed_run(instant_llm_call, steps=steps, trace_id=f"a-{length}-{rep}", registry=registry)
            )
            again[length].append(
                timed_run(instant_llm_call, steps=steps, trace_id=f"a-{length}-{rep}", registry=registry)
            )
            b_runs[length].append(
                timed_run(client, steps=steps, trace_id=f"b-{length}-{rep}", registry=registry)
            )
    rows = [_row(length, shapes[length], a_runs[length], again[length], b_runs[length]) for length in lengths]
    return {
        "vendor": connection.vendor,
        "server": _server_version(connection),
        "rows": rows,
        "main_path": main_path_timing(max(lengths), main_path_runs),
    }


def _row(
    length: int,
    shape: dict[str, int],
    a_runs: list[RunTiming],
    again: list[RunTiming],
    b_runs: list[RunTiming],
) -> dict[str, Any]:
    return {
        "length": length,
        "shape": shape,
        "steps": a_runs[0].steps,
        "a_overhead_ms": median([r.loop_overhead_ms() for r in a_runs]),
        "a_runner_overhead_ms": median([r.runner_overhead_ms() for r in a_runs]),
        "a_prepare_ms": median([r.prepare * 1000 for r in a_runs]),
        "a_first_step_ms": median([r.first_step * 1000 for r in a_runs]),
        "again_first_step_ms": median([r.first_step * 1000 for r in again]),
        "a_steady_ms": median([r.steady_overhead_ms() for r in a_runs]),
        "b_step_ms": median([r.loop_step_ms() for r in b_runs]),
        "b_client_ms": median([r.inside_model / r.steps * 1000 for r in b_runs]),
        "a_all": [round(r.loop_overhead_ms(), 2) for r in a_runs],
        "b_all": [round(r.loop_step_ms(), 2) for r in b_runs],
    }


def main_path_timing(length: int, runs: int) -> dict[str, Any]:
    """The main-path selectors end to end, and their SQL alone, on a trace with branches."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from bench.harness import populate_trace
    from traces import selectors
    from traces.models import Trace

    trace_id = f"c-{length}"
    shape = populate_trace(trace_id, length)
    head = Trace.objects.get(pk=trace_id).head_sequence

    def run_path() -> list[Any]:
        return selectors.trace_main_path_for_run(trace_id=trace_id, head_sequence=head)

    def messages() -> list[Any]:
        return selectors.trace_main_path(trace_id=trace_id, head_sequence=head)

    for _ in range(3):
        run_path(), messages()
    with CaptureQueriesContext(connection) as queries:
        path = run_path()
    assert len(path) == length, f"main path has {len(path)} messages, expected {length}"
    assert [m.sequence for m in messages()] == [m.sequence for m in path]
    # The run selector's own SQL as it ran (parameters inlined), to time the
    # database part alone, and the same query selecting sequences only: the walk.
    sql = queries.captured_queries[-1]["sql"]
    walk_only = sql.replace(selectors._path_columns(connection.vendor), "m.sequence", 1)

    def fetch(query: str) -> list[Any]:
        with connection.cursor() as cursor:
            cursor.execute(query)
            rows = cursor.fetchall()
        assert len(rows) == length
        return rows

    timings = _round_robin(
        {
            "run_path": run_path,
            "messages": messages,
            "sql_rows": lambda: fetch(sql),
            "sql_walk": lambda: fetch(walk_only),
        },
        runs,
    )
    return {"shape": shape, "runs": runs, "queries": len(queries.captured_queries), **timings}


def _round_robin(funcs: dict[str, Any], runs: int) -> dict[str, dict[str, float]]:
    """Median / min / max ms of each function, taking turns so noise hits them alike.

    A result stays alive until its clock has stopped, as the runner keeps the path
    it loads: freeing it is not part of reading it.
    """
    times: dict[str, list[float]] = {name: [] for name in funcs}
    for _ in range(runs):
        for name, func in funcs.items():
            started = time.perf_counter()
            result = func()
            times[name].append((time.perf_counter() - started) * 1000)
            del result
    return {
        name: {"median_ms": median(values), "min_ms": min(values), "max_ms": max(values)}
        for name, values in times.items()
    }


def _server_version(connection: Any) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SHOW server_version")
            return "PostgreSQL " + cursor.fetchone()[0].split()[0]
        cursor.execute("select sqlite_version()")
        return "SQLite " + cursor.fetchone()[0]


# --- driver --------------------------------------------------------------------


def measure(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    worker_args = [
        f"--steps={args.steps}",
        f"--repeats={args.repeats}",
        f"--lengths={args.lengths}",
        f"--main-path-runs={args.main_path_runs}",
    ]
    return measure_in_worker(__file__, worker_args, kind, "bench_steps")


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"== step overhead: {args.steps} tool steps + 1 final answer per run, median of {args.repeats} runs =="
    )
    print(
        "(a) overhead/step: instant in-process llm_call; time outside it per step, one-off trace load excluded"
    )
    print(
        "    (total-model)/step: the runner's own last_run_stats formula (load included, thread hop = model)"
    )
    print(
        "(b) full step: real LLMClient -> litellm -> instant custom provider; litellm = time inside the client"
    )
    print()
    header = (
        f"{'database':<16}{'length (main+side)':>20}{'steps':>7}{'(a) overhead':>14}{'first step':>12}{'again':>8}"
        f"{'steady':>9}{'(total-model)':>15}{'load':>9}{'(b) full step':>15}{'litellm':>10}"
    )
    print(header)
    print(
        f"{'':<16}{'':>20}{'':>7}{'ms/step':>14}{'ms':>12}{'ms':>8}{'ms/step':>9}{'ms/step':>15}{'ms':>9}"
        f"{'ms/step':>15}{'ms/step':>10}"
    )
    print("-" * len(header))
    for data in results.values():
        for row in data["rows"]:
            shape = row["shape"]
            print(
                f"{data['server']:<16}{shape['main']:>11,} + {shape['side']:<6,}{row['steps']:>7}"
                f"{row['a_overhead_ms']:>14.2f}{row['a_first_step_ms']:>12.1f}{row['again_first_step_ms']:>8.1f}{row['a_steady_ms']:>9.2f}"
                f"{row['a_runner_overhead_ms']:>15.2f}{row['a_prepare_ms']:>9.1f}"
                f"{row['b_step_ms']:>15.2f}{row['b_client_ms']:>10.2f}"
            )
    print()
    for data in results.values():
        rows = {r["length"]: r for r in data["rows"]}
        low, high = min(rows), max(rows)
        a_ratio = rows[high]["a_overhead_ms"] / rows[low]["a_overhead_ms"]
        b_ratio = rows[high]["b_step_ms"] / rows[low]["b_step_ms"]
        worst = max(r["a_overhead_ms"] for r in data["rows"])
        steady_ratio = rows[high]["a_steady_ms"] / rows[low]["a_steady_ms"]
        steady_worst = max(r["a_steady_ms"] for r in data["rows"])
        print(
            f"{data['server']}: ratio {high:,}/{low:,}: (a) {a_ratio:.2f}x "
            f"[{_verdict(a_ratio <= FLAT_TARGET)}: <= {FLAT_TARGET}x], (b) {b_ratio:.2f}x; "
            f"worst (a) {worst:.2f} ms [{_verdict(worst <= OVERHEAD_TARGET_MS)}: <= {OVERHEAD_TARGET_MS} ms]\n"
            f"    steady steps (the first excluded): ratio {steady_ratio:.2f}x [{_verdict(steady_ratio <= FLAT_TARGET)}], "
            f"worst {steady_worst:.2f} ms [{_verdict(steady_worst <= OVERHEAD_TARGET_MS)}]"
        )
    print()
    longest = max(int(x) for x in args.lengths.split(","))
    print(f"(c) main path of a {longest:,}-message trace with branches, {args.main_path_runs} runs each:")
    print("    run path = trace_main_path_for_run(): what a run (and POST /run, the sweep) loads;")
    print("    messages = trace_main_path(): Message instances, as the API and the portal list them;")
    print("    SQL = the run path's one query, rows as tuples; walk = that query returning sequences only")
    for kind, data in results.items():
        mp = data["main_path"]
        verdict = ""
        if kind == "postgresql":
            met = mp["run_path"]["median_ms"] < MAIN_PATH_TARGET_MS
            verdict = f" [{'met' if met else 'MISSED'}: run path < {MAIN_PATH_TARGET_MS:g} ms]"
        print(
            f"    {data['server']:<16} run path {_span(mp['run_path'])}  messages {_span(mp['messages'])}  "
            f"SQL {_span(mp['sql_rows'])}  walk {_span(mp['sql_walk'])}  "
            f"({mp['queries']} query, {mp['shape']['total']:,} messages stored){verdict}"
        )
    print()
    print(
        "raw (a) ms/step per run:",
        {k: {r["length"]: r["a_all"] for r in d["rows"]} for k, d in results.items()},
    )
    print(
        "raw (b) ms/step per run:",
        {k: {r["length"]: r["b_all"] for r in d["rows"]} for k, d in results.items()},
    )


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def _span(timing: dict[str, float]) -> str:
    return f"{timing['median_ms']:7.1f} ms (min {timing['min_ms']:.1f})"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=50, help="tool steps per run (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per cell; the median is shown")
    parser.add_argument("--lengths", default="10,1000,10000", help="main-path lengths (default %(default)s)")
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--main-path-runs", type=int, default=20)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    if args.worker:
        result = worker(lengths, args.steps, args.repeats, args.main_path_runs)
        print(RESULT_MARK + json.dumps(result), flush=True)
        return 0
    for length in lengths:
        branch_shape(length)  # fail early on nonsense before starting servers
    results = {kind: measure(kind, args) for kind in args.databases.split(",")}
    report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

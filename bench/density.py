"""Density: C concurrent runs through the real service, against a model that takes 2 s per call.

Each run is the issue-18 workload: 3 model calls of `--delay` seconds (2 s) with a
tool call (`write`) between them, started over the REST API as a user would
(`POST /api/traces`), on the real service (tests/e2e/stack.py: daphne +
`manage.py qcluster`), on the embedded default (SQLite file, ORM broker, no Redis)
and on PostgreSQL + Redis, with default settings and with `--tuned` env vars.

For each C, a fresh cluster is started and given two bursts of C runs: the first
after start (cold: every worker pays its first-task costs) and a second one (warm).
Per burst it prints the wall time from the first start request until the API counts
all C runs completed, relative to one run alone (the warm C=1 burst); the peak RSS
and PSS summed over the qcluster process tree (/proc/<pid>/smaps_rollup, sampled
every 2 s and at the burst's end: each read costs the kernel ~47 ms of a core); the
peak number of PostgreSQL client connections to the service's database
(pg_stat_activity, sampled; n/a on SQLite); the live event latency p50/p99
(created_at in the worker to receipt by a WebSocket watcher, over `--watchers`
runs spread across the burst, where `manage.py serve` puts watch sockets: on
PostgreSQL a second daphne, on SQLite the one that takes the starts (`--watch-server`);
events created before the watcher connected are replay, not counted) and the latest
of them with their receipt times; where the machine's CPU went (all cores' busy time from /proc/stat against cores x wall: the
cluster, daphne, the scripted model, this bench, the rest); where the runs' time
went (bench/run_phases.py, from their event logs: created -> run_started, each model
round less the model's delay, between rounds); the load average after the burst.

The model is tests/scripted_llm.py in its own process (so its threads do not share
the watchers' interpreter lock), with its collector off (bench/harness.py: a provider
does not pause for ours; a 183 ms full collection there stalled all 64 streams).
Not a test; nothing is asserted. Usage:

    python bench/density.py                                   # C=1,16,64, both stacks, default settings
    python bench/density.py --quick                           # smoke check: C=1,4
    python bench/density.py --concurrency 1,64,256 --stacks pg --settings tuned \\
        --tuned "AGENT_WORKERS=4 AGENT_RUNS_PER_WORKER=64"   # instead of the tuned defaults
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster_sampling import (  # noqa: E402
    CLUSTER_APP,
    Sampler,
    group_cpu,
    machine_busy,
    process_cpu,
    reference_cpu_ms,
    wait_ready,
)
from bench.density_report import STACKS, Burst, Row, pooled, report, table  # noqa: E402
from bench.event_latency import percentile, track_commit_times, watch_delays, written_delays  # noqa: E402
from bench.harness import start_scripted_model  # noqa: E402
from bench.run_phases import phases  # noqa: E402
from tests.e2e.stack import Stack  # noqa: E402
from tests.scripted_llm import Reply, ToolCall  # noqa: E402

END = ("final", "error", "stopped")
MODEL_CALLS = 3


# --- the model, in its own process ----------------------------------------------


def _workload_reply(delay: float) -> Any:
    def reply(body: dict[str, Any]) -> Reply:
        if body.get("model") != "scripted":
            return Reply(text="done")  # the utility model (names, reflections): instant
        done = sum(1 for message in body.get("messages") or [] if message.get("role") == "tool")
        if done >= MODEL_CALLS - 1:
            return Reply(text="All files are written.", delay=delay)
        return Reply(tool_calls=[ToolCall("write", {"path": f"f{done}.txt", "content": "x"})], delay=delay)

    return reply


class Watcher(threading.Thread):
    """Receives one trace's events over the watch socket; keeps the live ones' delays."""

    def __init__(self, stack: Stack, trace_id: str, port: int | None) -> None:
        super().__init__(daemon=True)
        self.stack, self.trace_id, self.port = stack, trace_id, port
        self.delays: list[float] = []
        self.received: list[float] = []
        self.types: list[str] = []
        self.ids: list[int] = []
        self.error: str | None = None

    def run(self) -> None:
        try:
            self.delays = watch_delays(
                self.stack,
                self.trace_id,
                timeout=3600,
                types=self.types,
                ids=self.ids,
                received_at=self.received,
                port=self.port,
            )
        except Exception as error:  # a lost watcher costs its figures, not the burst
            self.error = f"{type(error).__name__}: {error}"


# --- one burst -------------------------------------------------------------------


def count_traces(stack: Stack, status: str) -> int:
    code, body = stack.api("GET", f"/traces?status={status}&limit=1")
    if code != 200:
        raise RuntimeError(f"GET /traces answered {code}: {body}")
    return int(body["count"])


def failure(stack: Stack) -> str:
    """The newest failed run's error, with the tail of the cluster's log."""
    code, body = stack.api("GET", "/traces?status=failed&limit=1")
    error = body["results"][0].get("error_message") if code == 200 and body.get("results") else body
    log = stack.log(f"qcluster-{len(stack.clusters) - 1}")[-4000:]
    return f"{error}\nqcluster log (tail):\n{log}"


def created_and_completed(stack: Stack, trace_id: str) -> tuple[float, float]:
    """When the start view created the trace and the worker completed it (one machine: one clock)."""
    code, body = stack.api("GET", f"/traces/{trace_id}")
    if code != 200 or not body.get("completed_at"):
        raise RuntimeError(f"GET /traces/{trace_id} answered {code}: {body}")
    return (
        datetime.fromisoformat(body["created_at"]).timestamp(),
        datetime.fromisoformat(body["completed_at"]).timestamp(),
    )


def start_run(stack: Stack, index: int) -> str:
    # A name given up front: no naming call to the utility model.
    body = {
        "messages": [{"role": "user", "content": f"Write three files ({index})."}],
        "name": f"run {index}",
    }
    code, answer = stack.api("POST", "/traces", body)
    if code != 201:
        raise RuntimeError(f"POST /traces answered {code}: {answer}")
    return str(answer["trace_id"])


def burst(
    stack: Stack,
    cluster: subprocess.Popen[bytes],
    count: int,
    args: argparse.Namespace,
    model_pid: int,
    watch_port: int | None,
) -> Burst:
    """C runs started at once; the watchers on `watch_port`'s daphne (None: the starts')."""
    watchers, timeout = args.watchers, args.timeout
    completed, failed = count_traces(stack, "completed"), count_traces(stack, "failed")
    sampler = Sampler(cluster.pid, stack.pg.url if stack.pg else None)
    sampler.start()
    step = max(1, count // max(1, watchers))
    watched = set(range(0, count, step)[:watchers])
    assert stack.daphne is not None
    reference = reference_cpu_ms()
    web = [stack.daphne.pid, *(daphne.pid for daphne in stack.daphnes)]  # the watchers' own, if any
    cpu, web_cpu = group_cpu(cluster.pid), sum(group_cpu(pid) for pid in web)
    model_cpu, bench_cpu, busy = process_cpu(model_pid), _own_cpu(), machine_busy()
    started = time.time()
    with ThreadPoolExecutor(min(count, 32)) as pool:
        futures = [pool.submit(start_run, stack, index) for index in range(count)]
        watching = []
        for index, future in enumerate(futures):
            if index in watched:
                watching.append(Watcher(stack, future.result(), watch_port))
                watching[-1].start()
        ids = [future.result() for future in futures]
    deadline = time.monotonic() + timeout
    while count_traces(stack, "completed") < completed + count:
        if count_traces(stack, "failed") > failed:
            raise RuntimeError(f"a run failed: {failure(stack)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the burst of {count} did not complete within {timeout:.0f} s")
        time.sleep(1.0)  # a slow poll: each costs daphne CPU the runs would otherwise get
    cpu, web_cpu = group_cpu(cluster.pid) - cpu, sum(group_cpu(pid) for pid in web) - web_cpu
    model_cpu, bench_cpu = process_cpu(model_pid) - model_cpu, _own_cpu() - bench_cpu
    busy = machine_busy() - busy
    for watcher in watching:
        watcher.join(timeout=30)
    # Read after the watchers are done: C requests to daphne would compete with their last events.
    times = [created_and_completed(stack, trace_id) for trace_id in ids]
    wall = max(completed for _, completed in times) - started
    sampler.halt.set()
    sampler.join()
    return Burst(
        wall=wall,
        rss=sampler.rss,
        pss=sampler.pss,
        processes=sampler.processes,
        connections=sampler.connections,
        active=sampler.active,
        workers=sampler.workers,
        cpu=cpu,
        web_cpu=web_cpu,
        model_cpu=model_cpu,
        bench_cpu=bench_cpu,
        busy=busy,
        reference=reference,
        delays=[delay for watcher in watching for delay in watcher.delays],
        received=[at - started for watcher in watching for at in watcher.received],
        written=[w for watcher in watching for w in written_delays(stack, watcher.trace_id, watcher.ids)],
        types=[kind for watcher in watching for kind in watcher.types],
        watch_errors=[watcher.error for watcher in watching if watcher.error],
        load=load_average(),
        created=[created - started for created, _ in times],
        durations=[completed - created for created, completed in times],
        phases=phases(stack, dict(zip(ids, times, strict=True)), args.delay),
    )


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def load_average() -> str:
    with open("/proc/loadavg") as loadavg:
        return " ".join(loadavg.read().split()[:3])


# --- a stack, C after C -----------------------------------------------------------


def measure(
    kind: str, settings: str, env: dict[str, str], args: argparse.Namespace, model_url: str, model_pid: int
) -> list[Row]:
    _, postgres, redis = STACKS[kind]
    variables: dict[str, Any] = dict(env)  # AGENT_* names, never one of Stack's own keywords
    stack = Stack(model_url=model_url, redis=redis, postgres=postgres, cluster=False, **variables)
    rows: list[Row] = []
    try:
        if "AGENT_WORKERS" not in env:
            stack.env.pop("AGENT_WORKERS")  # Stack's test default (2); here the service's own
        if stack.pg is not None:
            track_commit_times(stack)
        stack.env["PGAPPNAME"] = CLUSTER_APP  # libpq's default application_name; daphne started without
        one: float | None = None
        separate = args.watch_server == "separate" or (args.watch_server == "serve" and postgres)
        watch_port = stack.start_daphne()[1] if separate else None
        for count in args.concurrency:
            cluster = stack.start_cluster()
            wait_ready(cluster)
            cold = (
                None
                if args.no_cold and count > 1
                else burst(stack, cluster, count, args, model_pid, watch_port)
            )
            warms = []
            for index in range(args.warm):
                warms.append(burst(stack, cluster, count, args, model_pid, watch_port))
                if args.warm > 1:
                    delays = warms[-1].delays
                    p99 = f", events p99 {percentile(delays, 0.99) * 1000:.0f} ms" if delays else ""
                    print(
                        f"    (C={count}, warm burst {index + 1} of {args.warm}: {warms[-1].wall:.2f} s{p99})",
                        flush=True,
                    )
            warm = pooled(warms)
            stack.kill_cluster(cluster)
            one = one or warm.wall
            rows.append(Row(kind, settings, count, cold, warm))
            report(rows[-1], one, MODEL_CALLS * args.delay)
    finally:
        stack.stop()
    return rows


def parse_env(text: str) -> dict[str, str]:
    pairs = [item.split("=", 1) for item in shlex.split(text.replace(",", " "))]
    if any(len(pair) != 2 for pair in pairs):
        raise SystemExit(f"--tuned wants NAME=VALUE pairs, got {text!r}")
    return {pair[0]: pair[1] for pair in pairs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--concurrency", default="1,16,64", help="comma-separated C values (1 is always run first)"
    )
    parser.add_argument(
        "--stacks",
        default="sqlite,pg",
        help="sqlite (embedded default: ORM broker, no Redis), pg (PostgreSQL + Redis), postgres (no Redis)",
    )
    parser.add_argument("--settings", default="default", help="default, tuned, or default,tuned")
    parser.add_argument(
        "--tuned",
        default=(
            "AGENT_WORKERS=4 AGENT_RUNS_PER_WORKER=96 AGENT_DB_POOL_SIZE=6 AGENT_STREAM=watched"
            " EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER=true"
        ),
        help="env vars of the tuned settings, e.g. 'AGENT_WORKERS=4 AGENT_RUNS_PER_WORKER=64' (default %(default)s)",
    )
    parser.add_argument("--delay", type=float, default=2.0, help="seconds per model call (default 2)")
    parser.add_argument("--watchers", type=int, default=16, help="runs per burst watched over a WebSocket")
    parser.add_argument(
        "--watch-server",
        choices=("serve", "same", "separate"),
        default="serve",
        help="the watchers on the daphne that takes the starts (same), on a second one (separate), or"
        " as `manage.py serve` places them (serve, the default: separate on PostgreSQL, same on SQLite)",
    )
    parser.add_argument(
        "--warm", type=int, default=1, help="warm bursts per C, pooled: median wall and CPU, every delay"
    )
    parser.add_argument("--no-cold", action="store_true", help="skip the cold burst for C > 1")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a burst may take")
    parser.add_argument("--quick", action="store_true", help="smoke check: C=1,4, 4 watchers")
    args = parser.parse_args()
    if args.quick:
        args.concurrency, args.watchers = "1,4", 4
    if unknown := set(args.stacks.split(",")) - set(STACKS):
        parser.error(f"unknown --stacks {', '.join(sorted(unknown))}; use {', '.join(STACKS)}")
    args.concurrency = sorted({1, *(int(c) for c in args.concurrency.split(","))})
    # A background job ignores SIGINT: let `kill` end it through the `finally`s that stop the stack.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    model, model_url = start_scripted_model(_workload_reply(args.delay))  # before any thread
    print(
        f"# density, {datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, commit {_commit()}; {_machine()}\n"
        f"# workload: {MODEL_CALLS} model calls of {args.delay:g} s with a write tool call between;"
        f" tuned = {args.tuned}; watchers' daphne: {args.watch_server}\n# uptime: {_uptime()}",
        flush=True,
    )
    rows: list[Row] = []
    ones: dict[tuple[str, str], float] = {}
    try:
        for settings in args.settings.split(","):
            env = parse_env(args.tuned) if settings == "tuned" else {}
            for kind in args.stacks.split(","):
                label = STACKS[kind][0]
                print(f"== {label}, {settings} settings {env or ''}", flush=True)
                measured = measure(kind, settings, env, args, model_url, model.pid)
                ones[(kind, settings)] = measured[0].warm.wall
                rows.extend(measured)
    finally:
        model.kill()
        if rows:
            table(rows, ones)
        print(f"\n# uptime after: {_uptime()}", flush=True)


def _commit() -> str:
    if not (ROOT / ".git").exists():
        return f"unknown ({ROOT} is not a git checkout)"
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "diff", "--quiet", "HEAD", "--", "traces", "agentsite"], cwd=ROOT
    ).returncode
    return head.stdout.strip() + (" + local changes" if dirty else "")


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def _machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} CPUs, {memory:.0f} GiB, Python {platform.python_version()}"


if __name__ == "__main__":
    main()

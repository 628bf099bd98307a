"""Start rate: how fast the web server takes `POST /api/traces`, and what each costs it.

On the real service (tests/e2e/stack.py: daphne on PostgreSQL + Redis, no worker
cluster, so the runs stay queued and only the web server works), `--clients`
threads of this process send `--count` start requests (the density workload's, a
name given: no naming call) as fast as they are answered, `--rounds` times. Per
round it prints the requests per second, daphne's CPU per request (user + system,
all its threads) and the PostgreSQL sessions opened per request
(pg_stat_database.sessions). The first round is a warm-up.

A 256-run burst starts its runs only as fast as daphne answers these; beside a
busy worker cluster they took 16-19 s of a 30 s burst (bench/density.py, README).
Not a test; nothing is asserted. Usage:

    python bench/start_rate.py                      # 256 requests, 32 clients, 4 rounds
    python bench/start_rate.py --count 512 --rounds 6
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from bench.cluster_sampling import group_cpu  # noqa: E402
from bench.density import _machine, _uptime, start_run  # noqa: E402
from tests.e2e.stack import Stack  # noqa: E402


def sessions(url: str) -> int:
    """Sessions PostgreSQL has opened on the service's database so far."""
    with psycopg.connect(url, autocommit=True) as db:
        row = db.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
        return int(row[0]) if row else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=256, help="start requests per round")
    parser.add_argument("--clients", type=int, default=32, help="concurrent client threads")
    parser.add_argument("--rounds", type=int, default=4, help="rounds; the first is a warm-up")
    parser.add_argument(
        "--threads", type=int, default=None, help="AGENT_WEB_THREADS (default: the service's)"
    )
    parser.add_argument(
        "--no-redis", action="store_true", help="PostgreSQL alone: django-q2's ORM broker (default: Redis)"
    )
    args = parser.parse_args()
    threads = {} if args.threads is None else {"AGENT_WEB_THREADS": str(args.threads)}
    print(f"# start rate; {_machine()} {threads or ''}\n# uptime: {_uptime()}", flush=True)
    broker = "ORM broker" if args.no_redis else "Redis"
    print(f"# PostgreSQL, {broker}", flush=True)
    stack = Stack(
        model_url="http://127.0.0.1:9/v1", redis=not args.no_redis, postgres=True, cluster=False, **threads
    )
    try:
        assert stack.daphne is not None and stack.pg is not None
        for index in range(args.rounds):
            cpu, opened, started = group_cpu(stack.daphne.pid), sessions(stack.pg.url), time.perf_counter()
            with ThreadPoolExecutor(args.clients) as pool:
                list(pool.map(lambda i: start_run(stack, i), range(args.count)))
            wall = time.perf_counter() - started
            cpu = group_cpu(stack.daphne.pid) - cpu
            opened = sessions(stack.pg.url) - opened - 1  # this round's own look
            label = "warm-up" if index == 0 else f"round {index}"
            print(
                f"{label:8s} {args.count} starts in {wall:5.2f} s ({args.count / wall:4.0f}/s);"
                f" daphne CPU {cpu * 1000 / args.count:4.1f} ms a start;"
                f" {opened / args.count:.2f} PostgreSQL sessions opened a start",
                flush=True,
            )
    finally:
        stack.stop()
    print(f"# uptime after: {_uptime()}", flush=True)


if __name__ == "__main__":
    main()

"""The trace page of a large trace: server time and size of what an expert's browser asks for.

A completed trace whose main path holds 10,000 messages, with 10 side branches
of 100 messages (populate_trace) and 3 sub-traces, read through Django's test
client in one worker process per database (server time: the view, its queries
and the templates; no network). Each request is timed `--runs` times, taking
turns with the others; ms are median (min).

    first screen   GET /traces/ID/           the newest page of the path and every panel but the tree
    tree           GET panels.json?names=tree the message tree, loaded after the first screen
    live refresh   GET panels.json?names=header,plan,subtraces  what one event of a run re-fetches
    jump           GET /traces/ID/?at=5000    a page in the middle of the path

Usage: python bench/portal_page.py [--databases sqlite,postgresql] [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.harness import RESULT_MARK, measure_in_worker  # noqa: E402

LENGTH = 10_000
REQUESTS = {
    "first screen": ("/traces/{id}/", {}),
    "tree": ("/traces/{id}/panels.json", {"names": "tree"}),
    "live refresh": ("/traces/{id}/panels.json", {"names": "header,plan,subtraces"}),
    "jump": ("/traces/{id}/", {"at": "5000"}),
}


def worker(runs: int) -> dict[str, Any]:
    from bench.harness import populate_trace, setup_django

    setup_django()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from traces.models import Message, Trace, TraceStatus

    expert = User.objects.create_user("bench-expert", is_staff=True)
    trace_id = "bench-page"
    shape = populate_trace(trace_id, LENGTH)
    Trace.objects.filter(pk=trace_id).update(owner=expert)
    for n in range(3):
        child = Trace.objects.create(
            trace_id=f"{trace_id}@explore-00{n}-x",
            parent_trace_id=trace_id,
            owner=expert,
            status=TraceStatus.COMPLETED,
            task=f"part {n}",
            last_sequence=2,
            head_sequence=2,
        )
        for sequence, role in ((1, "user"), (2, "assistant")):
            Message.objects.create(
                message_id=Message.make_id(child.trace_id, sequence),
                trace=child,
                role=role,
                sequence=sequence,
                parent_sequence=sequence - 1 or None,
                content=f"{role} of part {n}",
            )
    client = Client(HTTP_HOST="localhost")
    client.force_login(expert)

    def get(name: str) -> tuple[float, int, int]:
        path, params = REQUESTS[name]
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(path.format(id=trace_id), params)
            elapsed = time.perf_counter() - started
        assert response.status_code == 200, (name, response.status_code)
        return elapsed * 1000, len(response.content), len(queries.captured_queries)

    for name in REQUESTS:  # warm: templates compiled, connection open
        get(name)
    times: dict[str, list[float]] = {name: [] for name in REQUESTS}
    sizes: dict[str, tuple[int, int]] = {}
    for _ in range(runs):
        for name in REQUESTS:
            ms, size, queries = get(name)
            times[name].append(ms)
            sizes[name] = (size, queries)
    return {
        "vendor": connection.vendor,
        "shape": shape,
        "requests": {
            name: {
                "median_ms": statistics.median(values),
                "min_ms": min(values),
                "bytes": sizes[name][0],
                "queries": sizes[name][1],
            }
            for name, values in times.items()
        },
    }


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    shape = next(iter(results.values()))["shape"]
    print(
        f"trace page of a {shape['main']:,}-message main path + {shape['side']:,} side messages "
        f"+ 3 sub-traces, {args.runs} requests each, server ms median (min), HTML size, queries:"
    )
    for data in results.values():
        for name, figures in data["requests"].items():
            print(
                f"    {data['vendor']:<11} {name:<13} {figures['median_ms']:7.1f} ({figures['min_ms']:.1f}) ms"
                f"  {figures['bytes'] / 1024:7.1f} KB  {figures['queries']} queries"
            )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(RESULT_MARK + json.dumps(worker(args.runs)), flush=True)
        return 0
    report(
        {
            kind: measure_in_worker(__file__, [f"--runs={args.runs}"], kind, "bench_page")
            for kind in args.databases.split(",")
        },
        args,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Each performance trick of the main-path reads and the fenced commit, on and off.

The comments that keep a trick in the code quote these figures. Every variant
runs in one worker process per database, taking turns with the others, so a
noisy machine hits them alike; compare ratios within one run.

(c') main path of a 10,000-message trace with branches (1,000 side messages):
    run path   `trace_main_path_for_run` as it is; `gc on`: without `_gc_paused`;
    messages   `trace_main_path` as it is; `gc on`: without `_gc_paused`;
               `from_db`: instances built by `Model.from_db` (Model.__init__),
               the bulk decoding kept.
(e) a step's fenced commit (a tool call and its result of 280 or 21,000
    characters, 3 events, the goal's figures, the trace row), PostgreSQL only:
    as is      one statement through Django's cursor (client-side binding);
    + request  the step also stores what the model was sent (two new request
               parts and the request row): `one statement` in the fenced write
               (as is), `deferred` in their own INSERTs in the commit's
               transaction (bulk_create + save, as before 2026-11-24);
    server     the same statement bound server-side: a psycopg `Cursor` in
               Django's wrapper (`make_cursor`), as the code did before;
    separate   the SQLite way: a transaction, the fence first, then `executemany`
               per table (5 round trips with BEGIN and COMMIT).

Usage: python bench/tricks.py [--databases sqlite,postgresql] [--runs 20] [--commits 400]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.harness import RESULT_MARK, measure_in_worker, median  # noqa: E402

LENGTH = 10_000


def worker(runs: int, commits: int) -> dict[str, Any]:
    from bench.harness import populate_trace, setup_django

    setup_django()
    from django.db import connection

    import traces.llm  # noqa: F401  a worker's heap: litellm loaded, as in a run
    from traces import selectors

    trace_id = "tricks"
    populate_trace(trace_id, LENGTH)

    def run_path() -> Any:
        return selectors.trace_main_path_for_run(trace_id=trace_id)

    def messages() -> Any:
        return selectors.trace_main_path(trace_id=trace_id)

    def through_init(rows: list[tuple[Any, ...]], *, db: str) -> list[Any]:
        rows.sort(key=lambda row: row[selectors._SEQUENCE])
        return [
            selectors.Message.from_db(db, selectors._MESSAGE_ATTNAMES, list(values.values()))
            for values in selectors._message_values(rows)
        ]

    variants = {
        "run path": run_path,
        "run path, gc on": _patched(selectors, "_gc_paused", contextlib.nullcontext, run_path),
        "messages": messages,
        "messages, gc on": _patched(selectors, "_gc_paused", contextlib.nullcontext, messages),
        "messages, from_db": _patched(selectors, "_messages_from_rows", through_init, messages),
    }
    for func in variants.values():
        func(), func()  # warm-up
    result = {"vendor": connection.vendor, "main_path": _turns(variants, max(1, runs // 5), 5)}
    if connection.vendor == "postgresql":
        result["commit"] = commit_timing(commits)
    return result


def commit_timing(commits: int) -> dict[str, dict[str, float]]:
    """ms per step commit of each variant of the fenced write, with a short and a long tool output."""
    import psycopg
    from django.db import connection

    from traces.goal_tree import GoalTree
    from traces.models import Message, Trace
    from traces.observability.models import ModelRequest, RequestPart
    from traces.runner import fenced
    from traces.runner.store import RunStore, trace_claim

    Trace.objects.create(trace_id="commits", task="commit bench", status="completed")
    store = RunStore(trace_claim(trace_id="commits", owner="bench:1"))
    store.goal_tree = GoalTree.load(store.trace, emit=store.emit)
    store.goal_tree.focus(store.goal_tree.add("Survey", reason="bench"))
    store.commit(final=True)
    output = {"short": "Noted. " * 40, "long": "Noted. " * 3000}  # 280 and 21,000 characters

    counter = itertools.count()

    def step(size: str, request: str = "") -> None:
        trace_id = store.trace.trace_id
        for role in ("assistant", "tool"):
            sequence = store.next_sequence()
            store.add_message(
                Message(
                    message_id=Message.make_id(trace_id, sequence),
                    trace_id=trace_id,
                    role=role,
                    sequence=sequence,
                    parent_sequence=sequence - 1 or None,
                    goal_id=store.goal_tree.current_id,
                    content=output[size],
                    prompt_tokens=900 if role == "assistant" else None,
                    completion_tokens=30 if role == "assistant" else None,
                )
            )
        store.emit("tool_result", {"tool_call_id": "call_1", "name": "note"})
        if request:  # what the model was sent: a new message part and the request row
            number = next(counter)
            parts = [
                RequestPart(
                    trace_id=trace_id, digest=f"{number:032d}", body={"role": "tool", "content": output[size]}
                ),
                RequestPart(
                    trace_id=trace_id, digest=f"{number:031d}x", body={"role": "assistant", "content": "ok"}
                ),
            ]
            row = ModelRequest(
                trace_id=trace_id, sequence=sequence, parts=[[0, 40], f"{number:032d}"], model="m"
            )
            if request == "statement":
                store.insert(RequestPart, parts, keep_existing=True)
                store.insert(ModelRequest, [row])
            else:  # as RequestLog.record did before: its own INSERTs in the commit's transaction

                def write() -> None:
                    RequestPart.objects.bulk_create(parts, ignore_conflicts=True)
                    row.save(force_insert=True)

                store.defer(write)
        store.commit(final=True)

    def separate(**kwargs: Any) -> bool | None:
        return fenced._write_in_transaction(
            kwargs["trace_id"],
            kwargs["token"],
            kwargs["trace_values"],
            kwargs["inserts"],
            kwargs["updates"],
            kwargs["keep_existing"],
        )

    def server_bound(sql: str, params: list[Any]) -> bool | None:
        connection.ensure_connection()
        raw = psycopg.Cursor(connection.connection)
        wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
        with wrap(raw) as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        return None if row is None else bool(row[0])

    store_module = sys.modules[RunStore.__module__]
    variants: dict[str, Callable[[], Any]] = {}
    for size in output:
        sized = functools.partial(step, size)
        variants[f"{size}: as is"] = sized
        variants[f"{size}: server"] = _patched(fenced, "_execute", server_bound, sized)
        variants[f"{size}: separate"] = _patched(store_module, "fenced_write", separate, sized)
        variants[f"{size} + request: one statement"] = functools.partial(step, size, "statement")
        variants[f"{size} + request: deferred"] = functools.partial(step, size, "deferred")
    for func in variants.values():
        func()
    return _turns(variants, max(1, commits // 20), 20)


def _patched(module: Any, name: str, value: Any, func: Callable[[], Any]) -> Callable[[], Any]:
    """`func` run with `module.name` set to `value`."""

    def run() -> Any:
        with _attribute(module, name, value):
            return func()

    return run


@contextlib.contextmanager
def _attribute(module: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


def _turns(funcs: dict[str, Callable[[], Any]], turns: int, calls: int) -> dict[str, Any]:
    """Median / min ms per call of each function, timed over `calls` calls in a row per turn.

    Functions take turns (in a rotating order), and no collection is forced: a
    turn's time includes the collections its own allocations cause, also the
    ones a paused collector postpones to just after the call.
    """
    times: dict[str, list[float]] = {name: [] for name in funcs}
    names = list(funcs)
    for turn in range(turns):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            func = funcs[name]
            started = time.perf_counter()
            for _ in range(calls):
                result = func()
            times[name].append((time.perf_counter() - started) * 1000 / calls)
            del result
    return {name: {"median_ms": median(v), "min_ms": min(v)} for name, v in times.items()}


def measure(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    return measure_in_worker(
        __file__, [f"--runs={args.runs}", f"--commits={args.commits}"], kind, "bench_tricks"
    )


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"(c') main path of a {LENGTH:,}-message trace, {args.runs} reads each, ms per read, median (min) of turns of 5:"
    )
    for data in results.values():
        cells = "  ".join(f"{name} {_span(t)}" for name, t in data["main_path"].items())
        print(f"    {data['vendor']:<11} {cells}")
    for data in results.values():
        if "commit" in data:
            cells = "  ".join(f"{name} {_span(t)}" for name, t in data["commit"].items())
            print(
                f"(e) step commit, ms per commit, median (min) of {args.commits // 20} turns of 20: {cells}"
            )


def _span(timing: dict[str, float]) -> str:
    return f"{timing['median_ms']:.2f} ({timing['min_ms']:.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--runs", type=int, default=20, help="main-path reads per variant")
    parser.add_argument("--commits", type=int, default=400, help="step commits per variant")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(RESULT_MARK + json.dumps(worker(args.runs, args.commits)), flush=True)
        return 0
    report({kind: measure(kind, args) for kind in args.databases.split(",")}, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

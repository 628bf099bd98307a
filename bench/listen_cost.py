"""The web server's event-loop CPU per doorbell ring received by PostgreSQL LISTEN.

In a burst the event loop of the process serving watch sockets is what a live event
waits for (README, Density), and every commit of every run rings it. This compares,
on one throwaway PostgreSQL, the loop thread's CPU (`time.thread_time`) per NOTIFY
received by:

- psycopg's `AsyncConnection.notifies()` (what `NotifyReceiver` used before: a lock,
  a waiting task and a timer per wake-up, and a wake-up every 0.1 s while idle);
- `traces/events/bell_postgres.py:NotifyReceiver` (the loop reads the socket itself).

A sender thread in the same process sends `--rings` NOTIFYs, one statement each, a
short pause every 4 (as commits arrive, not in one packet). Each variant also idles
2 s, and its loop CPU then is printed per second. Alternated `--rounds` times;
medians. Not a test; compare figures within one run. Usage:

    python bench/listen_cost.py [--rings 4000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import RESULT_MARK  # noqa: E402

END = "end"


def _send(url: str, count: int, ready: threading.Event) -> None:
    import psycopg

    from traces.events.bell_postgres import CHANNEL

    ready.wait()
    with psycopg.connect(url, autocommit=True) as conn:
        for n in range(count):
            conn.execute("SELECT pg_notify(%s, %s)", [CHANNEL, f"1 {n} trace-{n % 64}"])
            if n % 4 == 3:
                time.sleep(0.0005)
        conn.execute("SELECT pg_notify(%s, %s)", [CHANNEL, END])


async def _with_psycopg(url: str, count: int) -> tuple[float, float]:
    import psycopg

    from traces.events.bell_postgres import CHANNEL, connection_params

    conn = await psycopg.AsyncConnection.connect(**connection_params("listen"))
    await conn.execute(f"LISTEN {CHANNEL}")
    ready = threading.Event()
    sender = threading.Thread(target=_send, args=(url, count, ready))
    sender.start()
    got = 0
    begun = time.thread_time()
    ready.set()
    async for notify in conn.notifies():
        if notify.payload == END:
            break
        got += 1
    per_ring = (time.thread_time() - begun) / got
    sender.join()
    idle_begun = time.thread_time()
    async for _ in conn.notifies(timeout=2.0):
        pass
    idle = (time.thread_time() - idle_begun) / 2.0
    await conn.close()
    return per_ring, idle


async def _with_receiver(url: str, count: int) -> tuple[float, float]:
    from traces.events.bell_postgres import NotifyReceiver

    loop = asyncio.get_running_loop()
    connected, done = asyncio.Event(), asyncio.Event()
    got = 0

    def on_message(payload: str) -> None:
        nonlocal got
        if payload == END:
            done.set()
        else:
            got += 1

    receiver = NotifyReceiver(on_message, connected.set)
    receiver.start(loop)
    await connected.wait()
    ready = threading.Event()
    sender = threading.Thread(target=_send, args=(url, count, ready))
    sender.start()
    begun = time.thread_time()
    ready.set()
    await done.wait()
    per_ring = (time.thread_time() - begun) / got
    sender.join()
    idle_begun = time.thread_time()
    await asyncio.sleep(2.0)
    idle = (time.thread_time() - idle_begun) / 2.0
    receiver.close()
    return per_ring, idle


def worker(count: int, rounds: int) -> dict[str, Any]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    url = os.environ["DATABASE_URL"]
    variants = {"psycopg notifies()": _with_psycopg, "NotifyReceiver": _with_receiver}
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            figures[name].append(asyncio.run(run(url, count)))
    return {
        name: {
            "us_per_ring": 1e6 * statistics.median(r for r, _ in runs),
            "idle_ms_per_s": 1e3 * statistics.median(i for _, i in runs),
        }
        for name, runs in figures.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rings", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(RESULT_MARK + json.dumps(worker(args.rings, args.rounds)), flush=True)
        return
    import subprocess

    sys.path.insert(0, str(ROOT / "scripts"))
    from throwaway_pg import start

    with start(dbname="listen_cost") as pg:
        out = subprocess.run(
            [sys.executable, __file__, "--worker", f"--rings={args.rings}", f"--rounds={args.rounds}"],
            env={**os.environ, "DATABASE_URL": pg.url},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    result = json.loads(out.split(RESULT_MARK, 1)[1])
    load = os.getloadavg()[0]
    print(f"# listen cost, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load:.2f}")
    print(f"# {args.rings} rings per variant, medians of {args.rounds} alternated rounds")
    for name, figures in result.items():
        print(
            f"{name:>20}: loop CPU {figures['us_per_ring']:6.1f} us a ring;"
            f" idle {figures['idle_ms_per_s']:.2f} ms of CPU a second"
        )


if __name__ == "__main__":
    main()

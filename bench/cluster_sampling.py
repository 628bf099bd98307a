"""What bench/density.py samples from a running cluster: the memory of its process
group (/proc/<pid>/smaps_rollup), the PostgreSQL connections of the service's
database (pg_stat_activity), and when its processes have settled after start."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator

# The cluster's PGAPPNAME (libpq's default application_name): its connections apart from daphne's.
CLUSTER_APP = "agentsite-cluster"


def group_memory(pgid: int) -> tuple[int, int, int]:
    """(RSS bytes, PSS bytes, processes) summed over the processes of a process group."""
    rss = pss = count = 0
    for pid, fields in live_processes():
        if int(fields[2]) != pgid:
            continue
        try:
            with open(f"/proc/{pid}/smaps_rollup") as smaps:
                for line in smaps:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) * 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we read it
        count += 1
    return rss, pss, count


def _stat(pid: int | str) -> list[str]:
    """/proc/<pid>/stat's fields after the command name (field 3, state, is [0])."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def _cpu_ticks(fields: list[str]) -> int:
    return int(fields[11]) + int(fields[12])  # utime + stime


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) one live process has used so far."""
    return _cpu_ticks(_stat(pid)) / os.sysconf("SC_CLK_TCK")


def live_processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, /proc/<pid>/stat fields after the command name) of every live process; one
    that ends while it is read is left out."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = _stat(entry)
        except (OSError, IndexError):
            continue  # the process ended while we read it
        if len(fields) > 14:
            yield int(entry), fields


def family_cpu(parent: int) -> float:
    """CPU seconds a live process, its live children and the children it has reaped
    (cutime, cstime) have used so far: a PostgreSQL postmaster's, closed backends included."""
    ticks = 0
    for pid, fields in live_processes():
        if pid == parent:
            ticks += _cpu_ticks(fields) + int(fields[13]) + int(fields[14])
        elif int(fields[1]) == parent:
            ticks += _cpu_ticks(fields)
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """CPU seconds all cores have spent busy since boot (/proc/stat: everything but idle and iowait)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def reference_cpu_ms(rounds: int = 3) -> float:
    """CPU ms this thread takes for a fixed piece of interpreter work (building, dumping
    and parsing small JSON records, as a step's commit does), the fastest of `rounds`.

    This VM's speed moves by up to 2x within minutes (the same burst measured 81 and 174
    ms of cluster CPU a run, 28 Nov): taken before each burst, on an otherwise idle
    machine, it says which phase the burst ran in, so bursts compare by it.
    """
    best = float("inf")
    for _ in range(rounds):
        started = time.thread_time()
        for index in range(3000):
            record = {"sequence": index, "role": "tool", "content": "x" * (index % 64), "calls": [index] * 4}
            json.loads(json.dumps([record, record]))
        best = min(best, time.thread_time() - started)
    return best * 1000


def group_cpu(pgid: int) -> float:
    """CPU seconds (user + system, all threads) used so far by the live processes of a
    process group (/proc/<pid>/stat utime and stime)."""
    ticks = sum(_cpu_ticks(fields) for _, fields in live_processes() if int(fields[2]) == pgid)
    return ticks / os.sysconf("SC_CLK_TCK")


class Sampler(threading.Thread):
    """Peak memory of the cluster's process group and peak PostgreSQL connections.

    Connections are sampled every `interval`, memory every `memory_every`-th time:
    reading smaps_rollup makes the kernel walk each process's page tables, ~47 ms of
    a core for the 8 processes of a 2.4 GiB cluster, which at every 0.5 s took ~9 %
    of a 2-core machine from the burst it measured (and stalled a core each time)."""

    def __init__(self, pgid: int, pg_url: str | None, interval: float = 0.5, memory_every: int = 4) -> None:
        super().__init__(daemon=True)
        self.pgid, self.pg_url, self.interval, self.memory_every = pgid, pg_url, interval, memory_every
        self.rss = self.pss = self.processes = 0
        self.connections: int | None = None
        self.active: int | None = None  # not idle
        self.workers: int | None = None  # the cluster's own (application_name, see measure)
        self.halt = threading.Event()

    def run(self) -> None:
        db = None
        if self.pg_url:
            import psycopg

            db = psycopg.connect(self.pg_url, autocommit=True)
            self.connections = self.active = self.workers = 0
        try:
            for tick in itertools.count():
                if tick % self.memory_every == 0:
                    self._memory()
                if db is not None:
                    total, active, workers = db.execute(
                        "SELECT count(*), count(*) FILTER (WHERE state <> 'idle'),"
                        f" count(*) FILTER (WHERE application_name = '{CLUSTER_APP}') FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                        " AND backend_type = 'client backend'"
                    ).fetchone()  # type: ignore[misc]
                    self.connections = max(self.connections or 0, total)
                    self.active = max(self.active or 0, active)
                    self.workers = max(self.workers or 0, workers)
                if self.halt.wait(self.interval):
                    self._memory()  # the burst's end, when the most is held
                    return
        finally:
            if db is not None:
                db.close()

    def _memory(self) -> None:
        rss, pss, processes = group_memory(self.pgid)
        self.rss, self.pss = max(self.rss, rss), max(self.pss, pss)
        self.processes = max(self.processes, processes)


def wait_ready(cluster: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Until the cluster has forked its processes (guard, workers, monitor, pusher): at least
    four in its group, unchanged for 1.5 s. Their first task is still cold."""
    deadline = time.monotonic() + timeout
    seen, since = 0, time.monotonic()
    while time.monotonic() < deadline:
        if cluster.poll() is not None:
            raise RuntimeError(f"qcluster exited with code {cluster.returncode}")
        count = group_memory(cluster.pid)[2]
        if count != seen:
            seen, since = count, time.monotonic()
        elif count >= 4 and time.monotonic() - since >= 1.5:
            return
        time.sleep(0.25)
    print(f"  (the cluster's processes did not settle within {timeout:.0f} s; starting anyway)", flush=True)

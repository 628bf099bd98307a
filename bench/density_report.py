"""bench/density.py's figures: one burst's measurements (`Burst`), warm bursts pooled,
and the per-burst lines and the table it prints."""

from __future__ import annotations

import os
import statistics
from collections import Counter
from dataclasses import dataclass, field

from bench.event_latency import parts, percentile
from bench.run_phases import PARTS
from bench.run_phases import describe as run_parts

# --stacks: name -> (label, PostgreSQL, Redis)
STACKS = {
    "sqlite": ("SQLite", False, False),
    "pg": ("PostgreSQL + Redis", True, True),
    "postgres": ("PostgreSQL, no Redis", True, False),
}


@dataclass
class Burst:
    wall: float
    rss: int
    pss: int
    processes: int
    connections: int | None
    active: int | None
    workers: int | None
    cpu: float = 0.0  # CPU seconds of the cluster's processes during the burst
    web_cpu: float = 0.0  # of daphne (the POSTs, the watchers' sockets, the count polls)
    model_cpu: float = 0.0  # of the scripted model's process (a provider's, elsewhere in production)
    bench_cpu: float = 0.0  # of this bench (the POSTs' clients, the watchers)
    busy: float = 0.0  # CPU seconds all cores were busy during the burst, whoever used them
    reference: float = 0.0  # cluster_sampling.reference_cpu_ms() just before: the VM's phase
    delays: list[float] = field(default_factory=list)
    types: list[str] = field(default_factory=list)  # each delay's event type
    received: list[float] = field(default_factory=list)  # each delay's receipt, s from the burst's start
    # each delay's part from creation to commit (PostgreSQL's commit timestamp; None on SQLite)
    written: list[float | None] = field(default_factory=list)
    watch_errors: list[str] = field(default_factory=list)
    load: str = ""
    created: list[float] = field(default_factory=list)  # s from the burst's start to each trace's creation
    durations: list[float] = field(default_factory=list)  # s from each trace's creation to its completion
    # bench/run_phases.py: where the runs' time went, seconds per part
    phases: dict[str, list[float]] = field(default_factory=dict)

    def percentile(self, q: float, kind: str | None = None) -> float | None:
        delays = (
            [d for d, t in zip(self.delays, self.types, strict=True) if t == kind] if kind else self.delays
        )
        return percentile(delays, q) * 1000 if delays else None

    def split(self) -> str:
        """p50 / p99 ms of each delay's two parts: created -> committed (the worker),
        committed -> received (delivery); "" without commit times."""
        committed, delivered = parts(self.written, self.delays)
        if not committed:
            return ""

        def figures(values: list[float]) -> str:
            return f"{percentile(values, 0.5) * 1000:.0f} / {percentile(values, 0.99) * 1000:.0f}"

        kinds: dict[str, list[float]] = {}
        for kind, written in zip(self.types, self.written, strict=True):
            if written is not None:
                kinds.setdefault(kind, []).append(written)
        worst = sorted(kinds.items(), key=lambda item: -percentile(item[1], 0.99))[:4]
        by_kind = ", ".join(f"{kind} {figures(values)}" for kind, values in worst)
        return (
            f"created -> committed {figures(committed)},"
            f" committed -> received {figures(delivered)} ({len(committed)} events);"
            f" created -> committed by type: {by_kind}"
        )

    def timeline(self) -> str:
        """Where the wall went: how long the starts took to land, and each run's own time."""
        if not self.created:
            return ""
        durations = sorted(self.durations)
        return (
            f"traces created from {min(self.created):.2f} to {max(self.created):.2f} s;"
            f" created -> completed p50 {statistics.median(durations):.2f} s,"
            f" p99 {percentile(durations, 0.99):.2f} s, max {durations[-1]:.2f} s"
        )

    def machine(self, cores: int) -> str:
        """Where the machine's CPU went during the burst: of cores x wall, how much was busy, and whose."""
        if not self.busy:
            return ""
        rest = self.busy - self.cpu - self.web_cpu - self.model_cpu - self.bench_cpu
        return (
            f"CPU busy {self.busy:.1f} of {cores * self.wall:.1f} s ({cores} cores x wall):"
            f" cluster {self.cpu:.1f}, daphne {self.web_cpu:.1f}, scripted model {self.model_cpu:.1f},"
            f" bench {self.bench_cpu:.1f}, rest (database, broker, kernel) {rest:.1f};"
            f" reference work before it {self.reference:.0f} ms of CPU"
        )

    def latest(self, count: int = 8) -> str:
        """The latest events: delay ms @ receipt s (type). Stalls that hold every socket
        at once (a collection, a starved process) show as one receipt time."""
        if len(self.received) != len(self.delays):
            return ""
        worst = sorted(zip(self.delays, self.received, self.types, strict=True), reverse=True)[:count]
        return ", ".join(f"{delay * 1000:.0f} @ {at:.2f} s ({kind})" for delay, at, kind in worst)

    def by_type(self) -> str:
        """p50 / p99 ms per event type, the latest first: which events carry the tail."""
        counts = Counter(self.types)
        figures = [(self.percentile(0.99, kind) or 0.0, kind) for kind in counts]
        return ", ".join(
            f"{kind} {_ms(self.percentile(0.5, kind))} / {_ms(p99)} ({counts[kind]})"
            for p99, kind in sorted(figures, reverse=True)
        )


def pooled(bursts: list[Burst]) -> Burst:
    """Several warm bursts as one row: the median wall and CPU, the peaks, every event's
    delay (a single burst's p99 of ~300 events is its third latest: it moves a lot)."""
    if len(bursts) == 1:
        return bursts[0]
    middle = sorted(bursts, key=lambda b: b.wall)[len(bursts) // 2]

    def peak(values: list[int | None]) -> int | None:
        present = [v for v in values if v is not None]
        return max(present) if present else None

    return Burst(
        wall=middle.wall,
        rss=max(b.rss for b in bursts),
        pss=max(b.pss for b in bursts),
        processes=max(b.processes for b in bursts),
        connections=peak([b.connections for b in bursts]),
        active=peak([b.active for b in bursts]),
        workers=peak([b.workers for b in bursts]),
        cpu=statistics.median(b.cpu for b in bursts),
        web_cpu=statistics.median(b.web_cpu for b in bursts),
        model_cpu=statistics.median(b.model_cpu for b in bursts),
        bench_cpu=statistics.median(b.bench_cpu for b in bursts),
        busy=statistics.median(b.busy for b in bursts),
        reference=statistics.median(b.reference for b in bursts),
        delays=[d for b in bursts for d in b.delays],
        phases={part: [v for b in bursts for v in b.phases.get(part, [])] for part in PARTS},
        types=[t for b in bursts for t in b.types],
        received=[r for b in bursts for r in b.received],
        written=[w for b in bursts for w in b.written],
        watch_errors=[e for b in bursts for e in b.watch_errors],
        load=bursts[-1].load,
        created=middle.created,
        durations=middle.durations,
    )


@dataclass
class Row:
    stack: str
    settings: str
    count: int
    cold: Burst | None
    warm: Burst


def _gib(value: int) -> str:
    return f"{value / 2**30:.2f}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def describe(name: str, result: Burst, one: float, ideal: float, count: int) -> str:
    connections = (
        "n/a"
        if result.connections is None
        else f"{result.connections} ({result.workers} the cluster's, {result.active} active)"
    )
    watched = f"{len(result.delays)} live events" + (
        f", {len(result.watch_errors)} watchers lost: {result.watch_errors[0]}" if result.watch_errors else ""
    )
    return (
        f"{name} {result.wall:6.2f} s = {result.wall / one:5.2f}x one run ({result.wall / ideal:.2f}x {ideal:g} s);"
        f" RSS {_gib(result.rss)} GiB,"
        f" PSS {_gib(result.pss)} GiB over {result.processes} processes;"
        f" CPU cluster {result.cpu:.1f} s ({1000 * result.cpu / count:.0f} ms/run),"
        f" daphne {result.web_cpu:.1f} s ({1000 * result.web_cpu / count:.0f} ms/run);"
        f" db connections {connections};"
        f" events p50 {_ms(result.percentile(0.5))} ms p99 {_ms(result.percentile(0.99))} ms ({watched});"
        f" load {result.load}"
        + (f"\n      events by type, p50 / p99 ms (count): {result.by_type()}" if result.types else "")
        + (f"\n      events' parts, p50 / p99 ms: {split}" if (split := result.split()) else "")
        + (f"\n      latest events, ms @ s: {latest}" if (latest := result.latest()) else "")
        + (f"\n      {timeline}" if (timeline := result.timeline()) else "")
        + (f"\n      a run's parts: {spent}" if (spent := run_parts(result.phases)) else "")
        + (f"\n      {machine}" if (machine := result.machine(os.cpu_count() or 1)) else "")
    )


def report(row: Row, one: float, ideal: float) -> None:
    print(f"  C={row.count}:", flush=True)
    if row.cold is not None:
        print("    " + describe("cold", row.cold, one, ideal, row.count), flush=True)
    print("    " + describe("warm", row.warm, one, ideal, row.count), flush=True)


def table(rows: list[Row], ones: dict[tuple[str, str], float]) -> None:
    print(
        "\n| stack | settings | C | cold s (x one) | warm s (x one) | peak RSS GiB | peak PSS GiB | processes"
        " | CPU ms/run cluster + daphne (warm) | db connections (cluster's) | events p50 / p99 ms (warm) | load after"
        " | reference ms (cold / warm) |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for row in rows:
        one = ones[(row.stack, row.settings)]
        cold = "-" if row.cold is None else f"{row.cold.wall:.1f} ({row.cold.wall / one:.2f}x)"
        bursts = [b for b in (row.cold, row.warm) if b is not None]
        connections = (
            "n/a"
            if row.warm.connections is None
            else (f"{max(b.connections or 0 for b in bursts)} ({max(b.workers or 0 for b in bursts)})")
        )
        print(
            f"| {STACKS[row.stack][0]} | {row.settings} | {row.count}"
            f" | {cold} | {row.warm.wall:.1f} ({row.warm.wall / one:.2f}x)"
            f" | {_gib(max(b.rss for b in bursts))} | {_gib(max(b.pss for b in bursts))}"
            f" | {max(b.processes for b in bursts)}"
            f" | {1000 * row.warm.cpu / row.count:.0f} + {1000 * row.warm.web_cpu / row.count:.0f}"
            f" | {connections}"
            f" | {_ms(row.warm.percentile(0.5))} / {_ms(row.warm.percentile(0.99))} | {row.warm.load}"
            f" | {'-' if row.cold is None else f'{row.cold.reference:.0f}'} / {row.warm.reference:.0f} |"
        )

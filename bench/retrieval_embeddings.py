"""The embedding half of bench/retrieval.py: a scripted embedding endpoint in the bench
process, batch embedding with timing, embeddings-only and fused quality, fused latency.

The endpoint is tests/scripted_llm.py (deterministic bag-of-words vectors: stemmed,
hashed words) reached through the real litellm client (traces/llm.py:embed), so the
batching, storage and fusion code paths are the product's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODEL = "openai/bench-embedder"
MINILM_MODEL = "openai/all-MiniLM-L6-v2"


class _External:
    """An endpoint started by the parent process (bench/embedding_server.py): nothing to stop."""

    def stop(self) -> None:
        pass


def start_endpoint() -> Any:
    """Point AGENT_EMBEDDING_* at the endpoint (before django.setup()): the real model's
    server when the parent started one (BENCH_EMBEDDER_URL), else the scripted server,
    started here."""
    url = os.environ.get("BENCH_EMBEDDER_URL")
    if url:
        os.environ.update(
            AGENT_EMBEDDING_MODEL=MINILM_MODEL,
            AGENT_EMBEDDING_API_BASE=url,
            AGENT_EMBEDDING_API_KEY="sk-bench",
        )
        return _External()
    from tests.scripted_llm import ScriptedLLM

    server = ScriptedLLM().start()
    os.environ.update(
        AGENT_EMBEDDING_MODEL=MODEL, AGENT_EMBEDDING_API_BASE=server.url, AGENT_EMBEDDING_API_KEY="sk-bench"
    )
    return server


def embed_all() -> dict[str, Any]:
    """Embed every approved experience in batches; the count, calls and seconds it took."""
    from django.conf import settings

    from memory.retrieval import embed_missing

    started = time.perf_counter()
    done = embed_missing()
    seconds = time.perf_counter() - started
    calls = -(-done // settings.AGENT_EMBEDDING_BATCH)
    return {"embedded": done, "calls": calls, "batch": settings.AGENT_EMBEDDING_BATCH, "seconds": seconds}


def task_embeddings(tasks: list[dict[str, Any]]) -> dict[str, list[float]]:
    from memory.retrieval.embeddings import embed_task

    out = {}
    for task in tasks:
        vector = embed_task(task["task"], task["tags"])
        if vector is None:
            raise RuntimeError("the scripted embedding endpoint failed")
        out[task["task"]] = vector
    return out


def embeddings_only(vectors: list[float]) -> list[str]:
    """The top 3 approved experiences by cosine alone, over all of them (brute force)."""
    from memory.models import Experience, ExperienceStatus
    from memory.retrieval.embeddings import dot, unit, unpack

    query = unit(vectors)
    rows = Experience.objects.filter(status=ExperienceStatus.APPROVED, embedding__isnull=False)
    scored = sorted((-dot(query, unpack(v)), code) for code, v in rows.values_list("code", "embedding"))
    return [code for _, code in scored[:3]]


def fused(task: dict[str, Any], vectors: list[float], k: int = 3, explain: bool = False) -> list[str]:
    from memory.retrieval import experience_search

    found = experience_search(
        tags=task["tags"], text=task["task"], k=k, query_embedding=vectors, explain=explain
    )
    return [s.experience.code for s in found]


def fused_latency(tasks: list[dict[str, Any]], vectors: dict[str, list[float]], repeats: int) -> list[float]:
    """experience_search with fusion on (k=5, the "why"), the task's embedding given: ms per call."""
    for task in tasks:  # warm-up
        fused(task, vectors[task["task"]], k=5, explain=True)
    timings = []
    for _ in range(repeats):
        for task in tasks:
            started = time.perf_counter()
            fused(task, vectors[task["task"]], k=5, explain=True)
            timings.append((time.perf_counter() - started) * 1000)
    return sorted(timings)

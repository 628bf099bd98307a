"""Every approved experience's embedding in one matrix per process (M4, issue 24).

Fusion compares the task's vector with the candidates'. Reading the vectors of
the lexical pool only (200 rows per search) misses what embeddings are for: a
paraphrase that shares no word and no tag with the task is never a lexical
candidate. So the approved experiences embedded by the configured model are
held here as one float32 matrix (numpy), and a search scores all of them at
once (~1 ms for 10,000 x 512), then takes the best EMBEDDING_POOL as candidates
beside the lexical ones.

Freshness: each search asks the database for a fingerprint of what the matrix
holds (how many experiences are approved, the newest `embedded_at` and
`updated_at`, the highest id: four indexed sub-selects) and reloads when it
moved: a new or re-made embedding (memory/retrieval/embeddings.py stamps
`embedded_at`), an approval, a retirement, an edit (which also clears the
embedding: memory/models.py). A reload reads the vectors once (~50-80 ms at
8,000); memory is rows x dimensions x 4 bytes (20 MB at 10,000 x 512), per
process that retrieves (workers, daphne for the API). On PostgreSQL with the
pgvector extension installed the database compares the vectors instead
(memory/retrieval/pgvector.py) and no process holds a matrix.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import DatabaseError, connection

from memory.models import Experience, ExperienceStatus
from memory.retrieval import pgvector
from memory.retrieval.embeddings import unpack
from traces.process_local import PerProcess


@dataclass(frozen=True)
class Matrix:
    model: str
    fingerprint: tuple[Any, ...]
    pks: np.ndarray  # int64, one per row
    codes: np.ndarray  # object (str)
    scopes: np.ndarray  # int32: the row's scope's number in `scope_names`
    scope_names: tuple[str, ...]
    vectors: np.ndarray  # float32 (rows, dimensions), unit rows

    def ranks(
        self, query: np.ndarray, *, scopes: list[str], codes: list[str] | None, wanted: set[int], top: int
    ) -> dict[int, tuple[int, float]]:
        """pk -> (rank, cosine) among the rows in `scopes` (and `codes`) with a positive cosine,
        best first (ties: lower pk), for the best `top` and for the `wanted` pks; nothing when
        the dimensions differ (another model's vectors)."""
        if not len(self.pks) or self.vectors.shape[1] != query.shape[0]:
            return {}
        keep = np.isin(self.scopes, [n for n, name in enumerate(self.scope_names) if name in scopes])
        if codes is not None:
            keep &= np.isin(self.codes, codes)
        pks, scores = self.pks[keep], self.vectors[keep] @ query
        order = np.argsort(-scores, kind="stable")  # rows are in pk order: ties stay by pk
        order = order[scores[order] > 0]
        rank = np.zeros(len(scores), dtype=np.int64)
        rank[order] = np.arange(1, len(order) + 1)
        chosen = set(order[:top].tolist())
        if wanted:
            chosen.update(np.flatnonzero(np.isin(pks, list(wanted)) & (rank > 0)).tolist())
        return {int(pks[i]): (int(rank[i]), float(scores[i])) for i in chosen}


def _fingerprint() -> tuple[Any, ...]:
    """What moves when the matrix must: approvals, retirements and deletions (the count of
    approved rows), edits (`updated_at`), new or re-made embeddings (`embedded_at`), new
    rows (the highest id). One statement of four sub-selects, each answered by an index
    (migration 0011): one aggregate over the rows, which carry their vectors, read them
    all (~15 ms at 10,000)."""
    table = Experience._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT count(*) FROM {table} WHERE status = %s),"
            f" (SELECT max(embedded_at) FROM {table}), (SELECT max(updated_at) FROM {table}),"
            f" (SELECT max(id) FROM {table})",
            [ExperienceStatus.APPROVED.value],
        )
        row = cursor.fetchone()
    return tuple(row) if row else ()


def _load(model: str, fingerprint: tuple[Any, ...]) -> Matrix:
    rows = (
        Experience.objects.filter(
            status=ExperienceStatus.APPROVED, embedding__isnull=False, embedding_model=model
        )
        .order_by("pk")
        .values_list("pk", "code", "scope", "embedding")
    )
    pks, codes, scopes, vectors = [], [], [], []
    dimensions = None
    for pk, code, scope, stored in rows.iterator(chunk_size=2000):
        vector = unpack(stored)
        if not vector or (dimensions is not None and len(vector) != dimensions):
            continue  # another model's size under the same name: not comparable
        dimensions = len(vector)
        pks.append(pk)
        codes.append(code)
        scopes.append(scope)
        vectors.append(np.asarray(vector, dtype=np.float32))
    names = tuple(sorted(set(scopes)))
    number = {name: n for n, name in enumerate(names)}
    return Matrix(
        model=model,
        fingerprint=fingerprint,
        pks=np.asarray(pks, dtype=np.int64),
        codes=np.asarray(codes, dtype=object),
        scopes=np.asarray([number[scope] for scope in scopes], dtype=np.int32),
        scope_names=names,
        vectors=np.vstack(vectors) if vectors else np.zeros((0, 0), dtype=np.float32),
    )


class VectorIndex:
    """This process's matrix, reloaded when the database's fingerprint moves."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.matrix: Matrix | None = None

    def current(self, model: str) -> Matrix:
        fingerprint = _fingerprint()
        with self.lock:
            matrix = self.matrix
            if matrix is None or (matrix.model, matrix.fingerprint) != (model, fingerprint):
                matrix = self.matrix = _load(model, fingerprint)
            assert matrix is not None
            return matrix


_index = PerProcess(VectorIndex)


def ranks(
    query: list[float],
    *,
    model: str,
    scopes: list[str],
    codes: list[str] | None,
    wanted: set[int],
    top: int,
) -> dict[int, tuple[int, float]]:
    """pk -> (embedding rank, cosine) over every approved experience embedded by `model` in
    `scopes` (and `codes`): the best `top` and the `wanted` ones (Matrix.ranks; on
    PostgreSQL with the pgvector extension, `pgvector.ranks`)."""
    vector = np.asarray(query, dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    if not norm:
        return {}
    unit = vector / norm
    if pgvector.enabled():  # the database compares them: no matrix in this process
        try:
            return pgvector.ranks(
                unit.tolist(),
                model=model,
                scopes=scopes,
                codes=codes,
                wanted=wanted,
                top=top,
                fingerprint=_fingerprint(),
            )
        except DatabaseError as exc:
            pgvector.unusable(exc)
    matrix = _index.get().current(model)
    return matrix.ranks(unit, scopes=scopes, codes=codes, wanted=wanted, top=top)

"""Embedding ranks on PostgreSQL's pgvector extension, where the database has it (M4, issue 24).

Where `CREATE EXTENSION vector` has been run in the database (and
AGENT_EMBEDDING_PGVECTOR is on, the default), the approved experiences' vectors
are compared by the database instead of a matrix in every process
(memory/retrieval/vectors.py): no process holds rows x dimensions x 4 bytes (60 MB
at 10,000 x 1536, in each worker and web server) and nothing is reloaded.

The vectors live in `memory_experience_vector` (experience id, model, the
`embedded_at` they were made at, scope, code, a `vector`), made on first use: the table needs
the extension's type, so it is not a migration, and it holds no foreign key (a
derived copy must never block a delete or a flush). The experiences' `embedding`
column stays the source: the copy is written when experiences are embedded
(`store`) and brought up to date before a search whenever the experiences'
fingerprint moved (`sync`: copies what is missing, drops what no longer matches an approved row's
model, `embedded_at`, scope and code), as the matrix is reloaded: a search reads
the table alone, with no join to the wide experience rows.

The ranks are exact, over the whole scope (`ranks`: cosine distance `<=>`, a
window for the rank), as the matrix gives them: fusion needs the embedding rank of
a lexical candidate in the whole library, which an approximate index (HNSW) does
not give.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models.expressions import RawSQL

from memory.models import Experience, ExperienceStatus

logger = logging.getLogger(__name__)

TABLE = "memory_experience_vector"
CHECK_SECONDS = 60.0  # how long whether the extension is installed is believed
_checked: dict[tuple[Any, ...], tuple[bool, float]] = {}
_synced: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_lock = threading.Lock()


def _database() -> tuple[Any, ...]:
    options = connection.settings_dict
    return (options.get("HOST"), options.get("PORT"), options.get("NAME"))


def enabled() -> bool:
    """Whether searches rank embeddings in the database: PostgreSQL with the `vector`
    extension installed in it and AGENT_EMBEDDING_PGVECTOR on (checked once a minute)."""
    if not settings.AGENT_EMBEDDING_PGVECTOR or connection.vendor != "postgresql":
        return False
    key = _database()
    now = time.monotonic()
    with _lock:
        known = _checked.get(key)
    if known is not None and now - known[1] < CHECK_SECONDS:
        return known[0]
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
        installed = cursor.fetchone() is not None
    with _lock:
        _checked[key] = (installed, now)
    return installed


def unusable(exc: BaseException) -> None:
    """The table could not be made or read (no CREATE right on the schema, a table of that
    name made by someone else): say so, and use the matrix for the next minute."""
    logger.warning("pgvector unusable, ranking embeddings in this process instead: %s", exc)
    with _lock:
        _checked[_database()] = (False, time.monotonic())


def forget() -> None:
    """Check the extension again on the next search (after `CREATE EXTENSION`, in tests)."""
    with _lock:
        _checked.clear()
        _synced.clear()


def literal(vector: Sequence[float]) -> str:
    """A vector in pgvector's text form."""
    return "[" + ",".join(f"{float(x):.8g}" for x in vector) + "]"


def _ensure_table() -> None:
    """Make the table if it is missing; two processes making it at once is fine. Its vectors
    are stored inline (MAIN): out of line (TOAST, the default past 2 kB: 512 dimensions and
    up) a search spent most of its time fetching them (60 -> 13 ms at 8,000 x 512)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [TABLE])
        row = cursor.fetchone()
    if row is not None and row[0] is not None:
        return
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (experience_id bigint PRIMARY KEY, model text NOT NULL,"
                " embedded_at timestamptz, scope text NOT NULL, code text NOT NULL, dims integer NOT NULL,"
                " v vector NOT NULL)"
            )
            cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN v SET STORAGE MAIN")
    except DatabaseError:  # the other process's CREATE won (a unique violation in pg_type)
        pass


def _rows(experiences: Iterable[tuple[Experience, Sequence[float]]]) -> list[tuple[Any, ...]]:
    return [
        (e.pk, e.embedding_model, e.embedded_at, e.scope, e.code, len(vector), literal(vector))
        for e, vector in experiences
    ]


def store(experiences: Iterable[tuple[Experience, Sequence[float]]]) -> None:
    """Copy freshly made embeddings (unit vectors) into the table; nothing where unused."""
    if not enabled():
        return  # nothing formatted where the copy is not used (SQLite, no extension)
    rows = _rows(experiences)
    if not rows:
        return
    try:
        with transaction.atomic():  # a failure leaves the caller's transaction usable
            _ensure_table()
            _write(rows)
    except DatabaseError as exc:  # the copy is derived: `sync` makes it up later
        unusable(exc)


def _write(rows: list[tuple[Any, ...]]) -> None:
    """Upsert rows of `_rows` (the table exists: `_ensure_table`)."""
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {TABLE} (experience_id, model, embedded_at, scope, code, dims, v)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s::vector) ON CONFLICT (experience_id) DO UPDATE SET"
            " model = EXCLUDED.model, embedded_at = EXCLUDED.embedded_at, scope = EXCLUDED.scope,"
            " code = EXCLUDED.code, dims = EXCLUDED.dims, v = EXCLUDED.v",
            rows,
        )


def sync(model: str) -> int:
    """Drop the copies that no longer match an approved experience's embedding and copy the
    approved embeddings of `model` that are missing; how many were copied."""
    from memory.retrieval.embeddings import unpack

    _ensure_table()
    experiences = Experience._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {TABLE} v WHERE NOT EXISTS (SELECT 1 FROM {experiences} e"
            " WHERE e.id = v.experience_id AND e.status = %s AND e.embedding_model = v.model"
            " AND e.embedded_at IS NOT DISTINCT FROM v.embedded_at AND e.scope = v.scope AND e.code = v.code)",
            [ExperienceStatus.APPROVED.value],
        )
    missing = (
        Experience.objects.filter(
            status=ExperienceStatus.APPROVED, embedding__isnull=False, embedding_model=model
        )
        .exclude(pk__in=RawSQL(f"SELECT experience_id FROM {TABLE}", []))
        .only("pk", "embedding_model", "embedded_at", "scope", "code", "embedding")
    )
    copied = 0
    batch: list[tuple[Experience, Sequence[float]]] = []
    for experience in missing.iterator(chunk_size=1000):
        vector = unpack(experience.embedding)
        if vector:
            batch.append((experience, vector))
        if len(batch) == 1000:
            _write(_rows(batch))
            copied, batch = copied + len(batch), []
    if batch:
        _write(_rows(batch))
    return copied + len(batch)


def ranks(
    query: Sequence[float],
    *,
    model: str,
    scopes: list[str],
    codes: list[str] | None,
    wanted: set[int],
    top: int,
    fingerprint: tuple[Any, ...],
) -> dict[int, tuple[int, float]]:
    """pk -> (rank, cosine) among the approved experiences embedded by `model` in `scopes`
    (and `codes`) with a positive cosine, best first (ties: lower pk), for the best `top`
    and the `wanted` pks: what `vectors.Matrix.ranks` gives, computed by the database.
    `query` is a unit vector; `fingerprint` the experiences' (`vectors._fingerprint`):
    the table is synced first when it moved since this process last looked."""
    key = (*_database(), model)
    with _lock:
        current = _synced.get(key) == fingerprint
    where_codes = " AND code = ANY(%s)" if codes is not None else ""
    # a DatabaseError (see `unusable`) leaves the caller's transaction usable
    with transaction.atomic(), connection.cursor() as cursor:
        if not current:
            sync(model)
        cursor.execute(
            # the CASE: `<=>` raises on another size, and the planner may test `dist < 1` first;
            # `dims`, not vector_dims(v), which reads (and may decompress) the vector once more;
            # MATERIALIZED: the distance computed once per row (inlined, the scan's filter and
            # the sort each computed it)
            "WITH d AS MATERIALIZED (SELECT experience_id AS id,"
            f" CASE WHEN dims = %s THEN v <=> %s::vector END AS dist FROM {TABLE}"
            f" WHERE model = %s AND scope = ANY(%s){where_codes}),"
            " r AS (SELECT id, dist, row_number() OVER (ORDER BY dist, id) AS rank FROM d WHERE dist < 1)"
            " SELECT id, rank, 1 - dist FROM r WHERE rank <= %s OR id = ANY(%s)",
            [
                len(query),
                literal(query),
                model,
                list(scopes),
                *([list(codes)] if codes is not None else []),
                top,
                sorted(wanted),
            ],
        )
        found = {int(pk): (int(rank), float(cosine)) for pk, rank, cosine in cursor.fetchall()}
    if not current:
        with _lock:
            _synced[key] = fingerprint
    return found

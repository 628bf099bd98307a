"""Embedding ranks in PostgreSQL with the pgvector extension (memory/retrieval/pgvector.py).

These run where the database server has the extension: `scripts/test`'s pgvector pass
starts pgserver's PostgreSQL 16 with pgvector (Debian's PostgreSQL 15 here has none).
The fusion tests of test_embeddings.py run again here, through the database's ranks.
"""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import pytest
from django.db import connection

from memory.models import Experience, ExperienceStatus
from memory.retrieval import experience_search, pgvector, vectors
from memory.retrieval.embeddings import unpack
from tests.memory.test_embeddings import (  # noqa: F401  (run again here, on pgvector)
    MODEL,
    _embed_as,
    codes,
    test_a_paraphrase_sharing_no_word_and_no_tag_is_found_by_its_embedding,
    test_the_embedding_search_keeps_to_the_runs_scopes,
    test_the_library_matrix_follows_approvals_and_new_embeddings,
)


def _extension_available() -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        return cursor.fetchone() is not None


@pytest.fixture(autouse=True)
def pgvector_db(db: Any) -> Any:
    if not _extension_available():
        if os.environ.get("AGENT_TEST_REQUIRE_PGVECTOR"):
            pytest.fail("AGENT_TEST_REQUIRE_PGVECTOR is set but the server has no pgvector extension")
        pytest.skip(
            "the database server has no pgvector extension (scripts/test's pgvector pass runs "
            "these on pgserver's PostgreSQL with pgvector)"
        )
    with connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
    pgvector.forget()
    vectors._index.get().matrix = None
    yield
    pgvector.forget()


def _in_database() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT experience_id FROM {pgvector.TABLE} ORDER BY experience_id")
        return [pk for (pk,) in cursor.fetchall()]


def test_the_database_ranks_the_whole_library_as_the_matrix_does(embedder, make_experience):
    rng = random.Random(5)
    made = []
    for n in range(120):
        experience = make_experience(
            rule=f"lesson {n}", condition=f"case {n}", scope="user:7" if n % 4 == 0 else "global"
        )
        _embed_as(experience, [rng.uniform(-1, 1) for _ in range(16)])
        made.append(experience)
    query = np.asarray([rng.uniform(-1, 1) for _ in range(16)], dtype=np.float32)
    query /= np.linalg.norm(query)
    wanted = {made[7].pk, made[50].pk, made[99].pk}
    model = f"openai/{MODEL}"
    matrix = vectors._load(model, ())
    picked = [e.code for e in made[::3]]

    for scopes, subset in ((["global"], None), (["global", "user:7"], None), (["global", "user:7"], picked)):
        expected = matrix.ranks(query, scopes=scopes, codes=subset, wanted=wanted, top=20)
        got = pgvector.ranks(
            query.tolist(),
            model=model,
            scopes=scopes,
            codes=subset,
            wanted=wanted,
            top=20,
            fingerprint=vectors._fingerprint(),
        )
        assert {pk: rank for pk, (rank, _) in got.items()} == {pk: rank for pk, (rank, _) in expected.items()}
        for pk, (_, cosine) in got.items():
            assert cosine == pytest.approx(expected[pk][1], abs=1e-5)
        assert sorted(r for r, _ in got.values())[:10] == list(range(1, 11))
    assert _in_database() == sorted(e.pk for e in made)  # synced on the first search


def test_a_search_uses_the_database_and_no_matrix(embedder, make_experience):
    lesson = make_experience(
        rule="Split the batch and run the parts in parallel.", condition="the batch is slow"
    )
    _embed_as(lesson, [1.0, 0.2, 0.0, 0.0])

    found = experience_search(
        text="Make the overnight export finish sooner", query_embedding=[1.0, 0.0, 0.0, 0.0]
    )

    assert codes(found) == [lesson.code]
    assert vectors._index.get().matrix is None  # nothing of the library held in this process
    assert _in_database() == [lesson.pk]


def test_embedding_writes_the_copy_and_a_search_drops_what_no_longer_matches(embedder, make_experience):
    kept = make_experience(rule="Profile the slow report first.", condition="a report crawls")  # embedded
    retired = make_experience(rule="Cache the report's query.", condition="a report crawls")
    deleted = make_experience(rule="Index the report's table.", condition="a report crawls")
    assert _in_database() == [kept.pk, retired.pk, deleted.pk]  # written by the embedding itself
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT DISTINCT model, dims FROM {pgvector.TABLE}")
        ((model, dimensions),) = cursor.fetchall()
    assert model == f"openai/{MODEL}" and dimensions == len(
        unpack(Experience.objects.get(pk=kept.pk).embedding)
    )

    retired.status = ExperienceStatus.RETIRED
    retired.save()
    Experience.objects.filter(pk=deleted.pk).delete()  # no foreign key holds it
    query = list(unpack(Experience.objects.get(pk=kept.pk).embedding))
    found = experience_search(text="the report crawls", query_embedding=query)

    assert codes(found) == [kept.code]
    assert _in_database() == [kept.pk]


def test_a_scope_change_is_seen_by_the_next_search(embedder, make_experience):
    lesson = make_experience(rule="Split the batch.", condition="the batch is slow")
    _embed_as(lesson, [1.0, 0.0, 0.0])
    task, query = "Make the overnight export finish sooner", [1.0, 0.0, 0.0]
    assert codes(experience_search(text=task, query_embedding=query, user_id=8)) == [lesson.code]

    lesson.refresh_from_db()
    lesson.scope = "user:7"
    lesson.save()

    assert experience_search(text=task, query_embedding=query, user_id=8) == []
    assert codes(experience_search(text=task, query_embedding=query, user_id=7)) == [lesson.code]


def test_a_table_it_cannot_use_falls_back_to_the_matrix_with_a_warning(embedder, make_experience, caplog):
    with connection.cursor() as cursor:  # someone else's table of that name
        cursor.execute(f"CREATE TABLE {pgvector.TABLE} (experience_id bigint PRIMARY KEY, note text)")
    lesson = make_experience(rule="Split the batch.", condition="the batch is slow")
    _embed_as(lesson, [1.0, 0.0, 0.0])
    task, query = "Make the overnight export finish sooner", [1.0, 0.0, 0.0]
    pgvector.forget()  # the embedding's own copy failed and said so; the search tries again
    caplog.clear()

    with caplog.at_level("WARNING", logger="memory.retrieval.pgvector"):
        found = experience_search(text=task, query_embedding=query)

    assert codes(found) == [lesson.code]  # ranked by this process's matrix
    assert vectors._index.get().matrix is not None
    assert "pgvector unusable" in caplog.text and "does not exist" in caplog.text
    assert Experience.objects.filter(pk=lesson.pk).exists()  # the caller's transaction goes on
    assert not pgvector.enabled()  # for the next minute

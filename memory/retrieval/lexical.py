"""Lexical ranking of experiences: tag matches plus the database's own full-text rank.

Both backends return the same rows, (pk, intent hits, state hits, text rank in
[0, 1)), computed, scored and sorted in ONE query; only the top rows come back.

- PostgreSQL: `ts_rank_cd` (cover density) with length normalisation (flag 1:
  divide by 1 + log(length); flag 32: r / (r + 1), so the rank is in [0, 1)) over
  the stored, weighted `search_vector` (migration 0008: tags A, condition B,
  rule C, category D), written with `django.contrib.postgres.search`.
- SQLite: FTS5's `bm25()` over `memory_experience_fts` (porter stemming, columns
  tags / condition / rule / category weighted like PostgreSQL's A-D), kept in sync
  by triggers (migration 0008); the rank is squashed to [0, 1) by b / (b + BM25_HALF).

The task's words are OR-ed (a task is a sentence, not a query): an experience
sharing one rare word ranks low, one sharing several in its tags or condition
ranks high. Stopwords are dropped here because FTS5 has no stopword list.
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVectorField
from django.db import connection
from django.db.models import Case, ExpressionWrapper, F, FloatField, IntegerField, QuerySet, Value, When
from django.db.models.expressions import RawSQL

from memory.models import Experience

# ts_rank_cd weights in PostgreSQL's order {D, C, B, A}: category, rule, condition, tags.
PG_WEIGHTS = [0.1, 0.3, 0.6, 1.0]
PG_NORMALIZATION = 1 | 32
# bm25 column weights in the FTS table's column order: tags, condition, rule, category, tagset.
FTS_WEIGHTS = (1.0, 0.6, 0.3, 0.1, 0.0)  # the tagset column is matched by tag, not ranked
BM25_HALF = 4.0  # the bm25 score that maps to text rank 0.5 (calibrated by bench/retrieval.py)
from memory.fulltext import FTS_TABLE  # noqa: E402

MAX_WORDS = 24
RANK_POOL = 200  # PostgreSQL: rows ts_rank_cd is computed for (the best by tags and covered words)

_STOPWORDS = frozenset(
    """a about above after again all also an and any are as at be been before being below between both but by
    can could did do does doing down during each few for from further had has have having he her here hers how
    i if in into is it its itself just me more most my no nor not now of off on once only or other our out over
    own same she should so some such than that the their them then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your yours
    please make sure use using get want need new one""".split()
)


def query_words(text: str) -> list[str]:
    """The distinct content words of a task, lowercased, in order (no stemming: the database stems)."""
    words = re.findall(r"[^\W_]+", (text or "").lower())
    kept = [w for w in words if w not in _STOPWORDS and (len(w) > 2 or w.isdigit())]
    return list(dict.fromkeys(kept))[:MAX_WORDS]


def _tag_hits(column: str, tags: list[str]) -> Any:
    if not tags:
        return Value(0)
    hits = [Case(When(**{f"{column}__contains": f" {t} "}, then=1), default=0) for t in tags]
    total: Any = hits[0]
    for hit in hits[1:]:
        total = total + hit
    return ExpressionWrapper(total, output_field=IntegerField())


def ranked(
    *,
    statuses: list[str],
    scopes: list[str],
    tags: dict[str, list[str]],
    words: list[str],
    weights: dict[str, float],
    limit: int,
    codes: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The best `limit` candidates as {pk, intent_hits, state_hits, rank}, best first
    (among the experiences named by `codes` when given: a run's chosen set).

    A candidate is in `statuses` and `scopes` and shares a tag or a word with the
    task; `rank` is the database's
    full-text rank in [0, 1); `weights` are the intent, state, rank and trust
    weights the order uses (memory/retrieval/search.py re-scores the rows).
    """
    if connection.vendor != "postgresql":
        return _ranked_sqlite(statuses, scopes, tags, words, weights, limit, codes)
    candidates = Experience.objects.filter(status__in=statuses, scope__in=scopes)
    if codes is not None:
        candidates = candidates.filter(code__in=codes)
    annotated = candidates.annotate(
        intent_hits=_tag_hits("intent_index", tags["intent"]),
        state_hits=_tag_hits("state_index", tags["state"]),
    )
    return _ranked_postgresql(annotated, tags, words, weights, limit)


def _trust() -> Any:
    """(helpful - harmful) / (helpful + harmful + 1) / 2 + (confidence - 0.5): in (-1, 1)."""
    votes = (F("helpful") - F("harmful")) / (F("helpful") + F("harmful") + Value(1.0))
    return votes / Value(2.0) + F("confidence") - Value(0.5)


def _relevance(weights: dict[str, float]) -> Any:
    return ExpressionWrapper(
        Value(weights["intent"]) * F("intent_hits")
        + Value(weights["state"]) * F("state_hits")
        + Value(weights["rank"]) * F("text"),
        output_field=FloatField(),
    )


def _rows(queryset: QuerySet[Experience], limit: int) -> list[dict[str, Any]]:
    fields = ("pk", "intent_hits", "state_hits", "text")
    return [_row(row) for row in queryset.values_list(*fields)[:limit]]


def _row(row: Any) -> dict[str, Any]:
    pk, intent_hits, state_hits, rank = row
    return {"pk": pk, "intent_hits": intent_hits, "state_hits": state_hits, "rank": float(rank or 0.0)}


def _pg_vector() -> RawSQL:
    return RawSQL('"memory_experience"."search_vector"', [], output_field=SearchVectorField())


def _pg_query(words: list[str]) -> SearchQuery:
    # raw tsquery "w1 | w2 | ...": every word is [^\W_]+ (query_words), so no operator can slip in
    return SearchQuery(" | ".join(words), config="english", search_type="raw")


def _ranked_postgresql(
    annotated: QuerySet[Experience],
    tags: dict[str, list[str]],
    words: list[str],
    weights: dict[str, float],
    limit: int,
) -> list[dict[str, Any]]:
    """Two stages. Every candidate matches the task's words or its tags'
    words (a tag's words are in the vector at weight A), so the GIN index picks the
    rows; the inner query keeps the best RANK_POOL by tags and by the number of task
    words in their tags or condition (cheap `@@` tests); ts_rank_cd, which reads
    every position, runs on those only."""
    tag_words = [w for kind in ("intent", "state") for t in tags[kind] for w in re.findall(r"[^\W_]+", t)]
    prefilter = _pg_query(list(dict.fromkeys([*words, *tag_words])))
    annotated = annotated.annotate(vector=_pg_vector()).filter(vector=prefilter)
    hits = [
        Case(When(vector=SearchQuery(f"{w}:AB", config="english", search_type="raw"), then=1), default=0)
        for w in words
    ]
    covered: Any = Value(0)
    for hit in hits:
        covered = covered + hit
    pool = (
        annotated.annotate(
            covered=ExpressionWrapper(covered, output_field=IntegerField()),
            cheap=ExpressionWrapper(
                Value(weights["intent"]) * F("intent_hits")
                + Value(weights["state"]) * F("state_hits")
                + Value(weights["text"] / max(len(words), 1)) * F("covered"),
                output_field=FloatField(),
            ),
        )
        .order_by("-cheap", "-helpful", "code")
        .values_list("pk", flat=True)[:RANK_POOL]
    )
    # two queries, not a subquery: the raw "memory_experience"."search_vector" would bind
    # to the outer query's table inside one and correlate it (a scan per row)
    best = Experience.objects.filter(pk__in=list(pool)).annotate(
        intent_hits=_tag_hits("intent_index", tags["intent"]),
        state_hits=_tag_hits("state_index", tags["state"]),
    )
    if words:
        best = best.annotate(
            text=SearchRank(
                _pg_vector(),
                _pg_query(words),
                weights=PG_WEIGHTS,
                normalization=PG_NORMALIZATION,
                cover_density=True,
            ),
        )
    else:
        best = best.annotate(text=Value(0.0, output_field=FloatField()))
    best = best.annotate(score=_relevance(weights) + Value(weights["trust"]) * _trust()).order_by(
        "-score", "-helpful", "code"
    )
    return _rows(best, limit)


def _ranked_sqlite(
    statuses: list[str],
    scopes: list[str],
    tags: dict[str, list[str]],
    words: list[str],
    weights: dict[str, float],
    limit: int,
    codes: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Raw SQL around the ORM's candidate query (FTS5 tables cannot be joined by the ORM).

    Word matches and tag matches both come from the FTS5 index (tags as `tagset`
    tokens), each MATCH run once (MATERIALIZED); only those rows are read from
    `memory_experience`, by primary key, and filtered by status and scope there:
    no scan of the (wide) table.
    """
    params = [*statuses, *scopes, *(codes or [])]
    in_statuses, in_scopes = ", ".join(["%s"] * len(statuses)), ", ".join(["%s"] * len(scopes))
    in_codes = "" if codes is None else f" AND e.code IN ({', '.join(['%s'] * len(codes)) or 'NULL'})"
    matches = ["SELECT NULL AS id, NULL AS i, NULL AS s WHERE 0"]
    match_params: list[Any] = []
    for kind, prefix in (("intent", "i"), ("state", "s")):
        for tag in tags[kind]:
            one, other = ("1", "0") if kind == "intent" else ("0", "1")
            matches.append(
                f"SELECT rowid AS id, {one} AS i, {other} AS s FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s"
            )
            match_params.append(f'{{tagset}} : "{prefix}_{tag}"')
    fts = "SELECT NULL AS id, NULL AS b WHERE 0"
    fts_params: list[Any] = []
    if words:
        weights_sql = ", ".join(map(str, FTS_WEIGHTS))
        fts = f"SELECT rowid AS id, -bm25({FTS_TABLE}, {weights_sql}) AS b FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s"
        fts_params = [_fts_query(words)]
    w = weights
    text = f"coalesce(f.b / (f.b + {BM25_HALF!r}), 0.0)"
    intent_hits, state_hits = "coalesce(t.i, 0)", "coalesce(t.s, 0)"
    relevance = f"{w['intent']!r} * {intent_hits} + {w['state']!r} * {state_hits} + {w['rank']!r} * {text}"
    sql = f"""
        WITH f AS MATERIALIZED ({fts}),
             t AS MATERIALIZED (SELECT id, sum(i) AS i, sum(s) AS s FROM ({" UNION ALL ".join(matches)}) GROUP BY id),
             c AS (SELECT id FROM f UNION SELECT id FROM t)
        SELECT c.id, {intent_hits}, {state_hits}, {text}
        FROM c JOIN memory_experience e ON e.id = c.id LEFT JOIN f ON f.id = c.id LEFT JOIN t ON t.id = c.id
        WHERE e.status IN ({in_statuses}) AND e.scope IN ({in_scopes}){in_codes}
        ORDER BY {relevance}
                 + {w["trust"]!r} * ((e.helpful - e.harmful) / (e.helpful + e.harmful + 1.0) / 2.0
                                     + e.confidence - 0.5) DESC,
                 e.helpful DESC, e.code
        LIMIT %s
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [*fts_params, *match_params, *params, limit])
        return [_row(row) for row in cursor.fetchall()]


def _fts_query(words: list[str]) -> str:
    return " OR ".join(f'"{w}"' for w in words)


def matched_words(pks: list[int], words: list[str]) -> dict[int, list[str]]:
    """For each of a few experiences, the task words its tags or condition match (stemmed by
    the database): the words that say the lesson applies, not words of its advice."""
    out: dict[int, list[str]] = {pk: [] for pk in pks}
    if not pks or not words:
        return out
    ids = ", ".join(str(int(pk)) for pk in pks)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            columns = ", ".join("search_vector @@ to_tsquery('english', %s)" for _ in words)
            weighted = [f"{w}:AB" for w in words]  # A tags, B condition (memory/fulltext.py)
            cursor.execute(f"SELECT id, {columns} FROM memory_experience WHERE id IN ({ids})", weighted)
            for pk, *hits in cursor.fetchall():
                out[pk] = [w for w, hit in zip(words, hits, strict=True) if hit]
            return out
        # "+rowid": without the +, SQLite hands the IN list to FTS5, which then reads every row
        parts = " UNION ALL ".join(
            f"SELECT rowid, %s FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s AND +rowid IN ({ids})"
            for _ in words
        )
        cursor.execute(parts, [p for w in words for p in (w, f'{{tags condition}} : "{w}"')])
        for pk, word in cursor.fetchall():
            out[pk].append(word)
    for pk in out:
        out[pk] = [w for w in words if w in out[pk]]
    return out

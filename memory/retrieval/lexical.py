"""Lexical ranking of experiences: tag matches plus the database's own full-text rank.

Both backends return the same rows, (pk, intent hits, state hits, text rank in
[0, 1), the task words matched in tags or condition), computed, scored and sorted
in ONE raw query, in two stages: every candidate (a tag or a word shared) is
ordered by its tag hits and the share of the task's words in its tags or
condition, which the index answers cheaply; the full-text rank, which reads every
position, is computed for the best RANK_POOL of those only. Ranking every one of
the ~2,000 rows a task's words match among 10,000 was most of the time.

- PostgreSQL: `ts_rank_cd` (cover density) with length normalisation (flag 1:
  divide by 1 + log(length); flag 32: r / (r + 1), so the rank is in [0, 1)) over
  the stored, weighted `search_vector` (migration 0008: tags A, condition B,
  rule C, category D); the first stage's coverage is `ts_rank` weighted on A and B only.
- SQLite: FTS5's `bm25()` over `memory_experience_fts` (porter stemming, columns
  tags / condition / rule / category weighted like PostgreSQL's A-D), kept in sync
  by triggers (migration 0008); the rank is squashed to [0, 1) by b / (b + BM25_HALF);
  the first stage counts one unranked `{tags condition}` look-up per word.

The task's words are OR-ed (a task is a sentence, not a query): an experience
sharing one rare word ranks low, one sharing several in its tags or condition
ranks high. Stopwords are dropped here because FTS5 has no stopword list.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import connection, transaction

from memory.fulltext import FTS_TABLE

# ts_rank_cd weights in PostgreSQL's order {D, C, B, A}: category, rule, condition, tags.
PG_WEIGHTS = [0.1, 0.3, 0.6, 1.0]
PG_NORMALIZATION = 1 | 32
# bm25 column weights in the FTS table's column order: tags, condition, rule, category, tagset.
FTS_WEIGHTS = (1.0, 0.6, 0.3, 0.1, 0.0)  # the tagset column is matched by tag, not ranked
BM25_HALF = 4.0  # the bm25 score that maps to text rank 0.5 (calibrated by bench/retrieval.py)

MAX_WORDS = 24
# rows the full-text rank is computed for: the best by tags and covered words (at least `limit`)
RANK_POOL = 100

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


def ranked(
    *,
    statuses: list[str],
    scopes: list[str],
    tags: dict[str, list[str]],
    words: list[str],
    weights: dict[str, float],
    limit: int,
    codes: list[str] | None = None,
    applies_only: bool = False,
) -> list[dict[str, Any]]:
    """The best `limit` candidates as {pk, intent_hits, state_hits, rank, words}, best first
    (among the experiences named by `codes` when given: a run's chosen set).

    A candidate is in `statuses` and `scopes` and shares a tag or a word with the
    task (with `applies_only`, in its tags or condition: a lesson whose rule alone
    shares words has relevance 0, so a search with a floor above 0 asks for this
    smaller set); `rank` is the database's full-text rank in [0, 1); `words` are the task
    words its tags or condition match (stemmed by the database): the words that say
    the lesson applies, not words of its advice. `weights` are the intent, state,
    rank and trust weights the order uses (memory/retrieval/search.py re-scores the rows).
    """
    if connection.vendor != "postgresql":
        return _ranked_sqlite(statuses, scopes, tags, words, weights, limit, codes, applies_only)
    return _ranked_postgresql(statuses, scopes, tags, words, weights, limit, codes, applies_only)


def _row(row: Any) -> dict[str, Any]:
    pk, intent_hits, state_hits, rank = row
    return {"pk": pk, "intent_hits": intent_hits, "state_hits": state_hits, "rank": float(rank or 0.0)}


def _in(values: list[str]) -> str:
    return ", ".join(["%s"] * len(values)) or "NULL"


def _f(weight: float) -> str:
    """A weight as a float8 literal: numeric arithmetic would make the sort keys slow."""
    return f"{float(weight)!r}::float8"


def _pg_tag_hits(column: str, tags: list[str]) -> tuple[str, list[str]]:
    # strpos, not LIKE: "_" in a tag would be a LIKE wildcard
    sql = " + ".join(f"(strpos(e.{column}, %s) > 0)::int" for _ in tags) or "0"
    return sql, [f" {t} " for t in tags]


def _ranked_postgresql(
    statuses: list[str],
    scopes: list[str],
    tags: dict[str, list[str]],
    words: list[str],
    weights: dict[str, float],
    limit: int,
    codes: list[str] | None,
    applies_only: bool,
) -> list[dict[str, Any]]:
    """One raw query in two stages. A candidate matches the task's words or its tags'
    words (a tag's words are in both vectors at weight A) in `applies_vector` (tags and
    condition: migration 0010), or anywhere in `search_vector` unless `applies_only`;
    the GIN index picks the rows. The first stage keeps the best RANK_POOL by tags and
    by the share of the task's words in their tags or condition (`ts_rank` over
    `applies_vector`: one cheap call per row, where a test per word cost as much as
    the rest); `ts_rank_cd` over the whole `search_vector`, which reads every
    position, runs on those only, and the per-word tests (`words`) on the rows
    returned. Raw SQL, not the ORM: one round trip, and compiling one ORM expression
    per word and tag cost as much as the query."""
    tag_words = [w for kind in ("intent", "state") for t in tags[kind] for w in re.findall(r"[^\W_]+", t)]
    # raw tsquery "w1 | w2 | ...": every word is [^\W_]+ (query_words, canonical tags): no operator slips in
    prefilter = " | ".join(dict.fromkeys([*words, *tag_words]))
    intent_sql, intent_params = _pg_tag_hits("intent_index", tags["intent"])
    state_sql, state_params = _pg_tag_hits("state_index", tags["state"])
    hits = ", ".join("best.av @@ to_tsquery('english', %s)" for _ in words) or "NULL::boolean"
    covered = "ts_rank('{0, 0, 1, 1}', e.applies_vector, to_tsquery('english', %s), 0)" if words else "0"
    text = (
        "ts_rank_cd(%s::float4[], e.search_vector, to_tsquery('english', %s), %s)" if words else "0.0::float8"
    )
    vector = "applies_vector" if applies_only else "search_vector"
    in_codes = "" if codes is None else f" AND e.code IN ({_in(codes)})"
    w = weights
    sql = f"""
        WITH p AS MATERIALIZED (
            SELECT c.* FROM (
                SELECT e.id, e.code, e.helpful, e.harmful, e.confidence,
                       {intent_sql} AS i, {state_sql} AS s, {covered} AS covered
                FROM memory_experience e
                WHERE e.{vector} @@ to_tsquery('english', %s)
                  AND e.status IN ({_in(statuses)}) AND e.scope IN ({_in(scopes)}){in_codes}
            ) AS c
            ORDER BY {_f(w["intent"])} * c.i + {_f(w["state"])} * c.s + {_f(w["text"])} * c.covered DESC,
                     c.helpful DESC, c.code
            LIMIT {max(RANK_POOL, limit)}
        ),
        best AS MATERIALIZED (
            SELECT r.*, {_pg_score("r", w)} AS score FROM (
                SELECT p.*, {text} AS t, e.applies_vector AS av FROM p JOIN memory_experience e ON e.id = p.id
            ) AS r
            ORDER BY score DESC, r.helpful DESC, r.code
            LIMIT %s
        )
        SELECT best.id, best.i, best.s, best.t, ARRAY[{hits}] FROM best
        ORDER BY best.score DESC, best.helpful DESC, best.code
    """
    params: list[Any] = [
        *intent_params,
        *state_params,
        *([" | ".join(words)] if words else []),
        prefilter,
        *statuses,
        *scopes,
        *(codes or []),
        *([PG_WEIGHTS, " | ".join(words), PG_NORMALIZATION] if words else []),
        limit,
        *words,  # applies_vector holds tags and condition only
    ]
    # The planner prices `@@` like any cheap operator, so when a fifth of the rows match it
    # scans the table and tests every row (14 ms at 10,000) instead of asking the GIN index
    # (6 ms; bench/retrieval.py). Off for this statement only: SET LOCAL in a transaction of
    # its own (one server connection even behind a transaction pooler), reset after it when
    # the caller's transaction goes on; a failure rolls the SET back with the savepoint.
    outer = connection.in_atomic_block
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        if outer:
            cursor.execute("SET LOCAL enable_seqscan TO DEFAULT")
    return [
        {**_row(row[:4]), "words": [word for word, hit in zip(words, row[4] or [], strict=False) if hit]}
        for row in rows
    ]


def _pg_score(alias: str, w: dict[str, float]) -> str:
    """Tags, the full-text rank `t` and trust, as memory/retrieval/search.py weighs them."""
    trust = f"(({alias}.helpful - {alias}.harmful)::float8 / ({alias}.helpful + {alias}.harmful + 1) / 2 + {alias}.confidence - 0.5)"
    return (
        f"{_f(w['intent'])} * {alias}.i + {_f(w['state'])} * {alias}.s + {_f(w['rank'])} * {alias}.t"
        f" + {_f(w['trust'])} * {trust}"
    )


def _ranked_sqlite(
    statuses: list[str],
    scopes: list[str],
    tags: dict[str, list[str]],
    words: list[str],
    weights: dict[str, float],
    limit: int,
    codes: list[str] | None = None,
    applies_only: bool = False,
) -> list[dict[str, Any]]:
    """Raw SQL (FTS5 tables cannot be joined by the ORM), in PostgreSQL's two stages.

    Candidates, word hits and tag hits all come from the FTS5 index (tags as
    `tagset` tokens), each MATCH run once (MATERIALIZED) and none ranked; only
    those rows are read from `memory_experience`, by primary key, and filtered by
    status and scope there. The first stage keeps the best RANK_POOL by tags and
    by the task's words in their tags or condition (one index look-up per word,
    whose answers come back as `words`); bm25, the costly part, runs on those only.
    """
    params = [*statuses, *scopes, *(codes or [])]
    in_codes = "" if codes is None else f" AND e.code IN ({_in(codes)})"
    # one row per index hit, (id, intent hit, state hit, word number), summed per id in `c`;
    # the first, rows sharing a word anywhere, only when rule-only matches may be returned
    everything = _fts_query(words) if words else '""'
    parts: list[str] = []
    part_params: list[Any] = []
    if not applies_only:
        parts.append(
            f"SELECT rowid AS id, 0 AS i, 0 AS s, NULL AS n FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s"
        )
        part_params.append(everything)
    for kind, prefix in (("intent", "i"), ("state", "s")):
        for tag in tags[kind]:
            one, other = ("1", "0") if kind == "intent" else ("0", "1")
            parts.append(
                f"SELECT rowid AS id, {one} AS i, {other} AS s, NULL AS n FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s"
            )
            part_params.append(f'{{tagset}} : "{prefix}_{tag}"')
    for n, word in enumerate(words):  # in the tags or condition: what says the lesson applies
        parts.append(
            f"SELECT rowid AS id, 0 AS i, 0 AS s, {n} AS n FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s"
        )
        part_params.append(f'{{tags condition}} : "{word}"')
    w = weights
    text = f"coalesce(f.b / (f.b + {BM25_HALF!r}), 0.0)"
    weights_sql = ", ".join(map(str, FTS_WEIGHTS))
    sql = f"""
        WITH c AS MATERIALIZED (
                SELECT id, sum(i) AS i, sum(s) AS s, count(n) AS covered, group_concat(n) AS ns
                FROM ({" UNION ALL ".join(parts)}) GROUP BY id
             ),
             p AS MATERIALIZED (
                SELECT c.id, c.i, c.s, c.ns, e.code, e.helpful,
                       (e.helpful - e.harmful) / (e.helpful + e.harmful + 1.0) / 2.0 + e.confidence - 0.5 AS trust
                FROM c JOIN memory_experience e ON e.id = c.id
                WHERE e.status IN ({_in(statuses)}) AND e.scope IN ({_in(scopes)}){in_codes}
                ORDER BY {w["intent"]!r} * c.i + {w["state"]!r} * c.s
                         + {w["text"] / max(len(words), 1)!r} * c.covered DESC, e.helpful DESC, e.code
                LIMIT {max(RANK_POOL, limit)}
             ),
             f AS MATERIALIZED (
                SELECT rowid AS id, -bm25({FTS_TABLE}, {weights_sql}) AS b FROM {FTS_TABLE}
                WHERE {FTS_TABLE} MATCH %s AND +rowid IN (SELECT id FROM p)
             )
        SELECT p.id, p.i, p.s, {text}, p.ns FROM p LEFT JOIN f ON f.id = p.id
        ORDER BY {w["intent"]!r} * p.i + {w["state"]!r} * p.s + {w["rank"]!r} * {text}
                 + {w["trust"]!r} * p.trust DESC, p.helpful DESC, p.code
        LIMIT %s
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [*part_params, *params, everything, limit])
        rows = cursor.fetchall()
    return [{**_row(row[:4]), "words": _words_of(row[4], words)} for row in rows]


def _words_of(numbers: str | None, words: list[str]) -> list[str]:
    hit = {int(n) for n in (numbers or "").split(",") if n}
    return [word for n, word in enumerate(words) if n in hit]


def _fts_query(words: list[str]) -> str:
    return " OR ".join(f'"{w}"' for w in words)

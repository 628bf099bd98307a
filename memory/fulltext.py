"""The databases' own full-text indexes over experiences (M4), created by migration 0008.

PostgreSQL: `search_vector`, a generated (always in sync) tsvector weighted
tags A, condition B, rule C, category D, with a GIN index; and `applies_vector`
(migration 0010), tags A and condition B only, with its own GIN index: the words
that say a lesson applies, which pick and cover the candidates (a word in the
rule alone never makes a lesson relevant), while `search_vector` ranks the best.

SQLite: `memory_experience_fts`, an FTS5 table (porter stemming) with the same
four columns plus `tagset` (each canonical tag as one token, "i_speed_up",
"s_docker", so tag matches are index look-ups too, not a scan), kept in sync by triggers on `memory_experience`, so every write
path (save, bulk_create, queryset update and delete, raw SQL) keeps it true
without the services having to remember. Django rebuilds a SQLite table to
alter it (copy, drop, rename), which drops its triggers: `ensure_sqlite_fulltext`
runs after every `migrate` (memory/apps.py) and recreates and refills what a
rebuild removed.
"""

from __future__ import annotations

from typing import Any

FTS_TABLE = "memory_experience_fts"
_TAGS = "replace(new.intent_index || ' ' || new.state_index, '_', ' ')"
# " a  b " -> "i_a i_b": the index columns hold " tag " runs (Experience.build_indexes)
_TAGSET = (
    "replace(' ' || trim(new.intent_index), ' ', ' i_') || replace(' ' || trim(new.state_index), ' ', ' s_')"
)
_TAGS_OF_ROW = _TAGS.replace("new.", "")
_TAGSET_OF_ROW = _TAGSET.replace("new.", "")
FTS_COLUMNS = "tags, condition, rule, category, tagset"

POSTGRESQL_VECTOR = (
    "setweight(to_tsvector('english', replace(coalesce(intent_index, '') || ' ' || coalesce(state_index, ''),"
    " '_', ' ')), 'A')"
    " || setweight(to_tsvector('english', coalesce(condition, '')), 'B')"
    " || setweight(to_tsvector('english', coalesce(rule, '')), 'C')"
    " || setweight(to_tsvector('english', replace(coalesce(category, ''), '_', ' ')), 'D')"
)
POSTGRESQL_FORWARD = [
    "DROP INDEX IF EXISTS memory_experience_search_gin",
    "ALTER TABLE memory_experience DROP COLUMN IF EXISTS search_vector",
    f"ALTER TABLE memory_experience ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ({POSTGRESQL_VECTOR}) STORED",
    "CREATE INDEX memory_experience_search_gin ON memory_experience USING GIN (search_vector)",
]
# tags A and condition B only: the candidates' index (memory/retrieval/lexical.py)
POSTGRESQL_APPLIES_VECTOR = (
    "setweight(to_tsvector('english', replace(coalesce(intent_index, '') || ' ' || coalesce(state_index, ''),"
    " '_', ' ')), 'A')"
    " || setweight(to_tsvector('english', coalesce(condition, '')), 'B')"
)
POSTGRESQL_APPLIES_FORWARD = [
    "ALTER TABLE memory_experience ADD COLUMN IF NOT EXISTS applies_vector tsvector "
    f"GENERATED ALWAYS AS ({POSTGRESQL_APPLIES_VECTOR}) STORED",
    "CREATE INDEX IF NOT EXISTS memory_experience_applies_gin ON memory_experience USING GIN (applies_vector)",
]
POSTGRESQL_APPLIES_BACKWARD = [
    "DROP INDEX IF EXISTS memory_experience_applies_gin",
    "ALTER TABLE memory_experience DROP COLUMN IF EXISTS applies_vector",
]

_INSERT = (
    f"INSERT INTO {FTS_TABLE}(rowid, {FTS_COLUMNS}) "
    f"VALUES (new.id, {_TAGS}, new.condition, new.rule, new.category, {_TAGSET})"
)
SQLITE_TRIGGERS = {
    "memory_experience_fts_insert": f"AFTER INSERT ON memory_experience BEGIN {_INSERT}; END",
    "memory_experience_fts_delete": (
        f"AFTER DELETE ON memory_experience BEGIN DELETE FROM {FTS_TABLE} WHERE rowid = old.id; END"
    ),
    "memory_experience_fts_update": (
        "AFTER UPDATE OF intent_index, state_index, condition, rule, category ON memory_experience "
        f"BEGIN DELETE FROM {FTS_TABLE} WHERE rowid = old.id; {_INSERT}; END"
    ),
}


def ensure_sqlite_fulltext(connection: Any) -> bool:
    """Create the FTS5 table and its triggers where missing and refill the table from
    `memory_experience` when anything was missing. True when it had to repair."""
    if connection.vendor != "sqlite":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE (type = 'trigger' AND tbl_name = 'memory_experience')"
            " OR (type = 'table' AND name = %s)",
            [FTS_TABLE],
        )
        present = {name for (name,) in cursor.fetchall()}
        if "memory_experience" not in connection.introspection.table_names(cursor):
            return False
        if present >= {FTS_TABLE, *SQLITE_TRIGGERS}:
            return False
        cursor.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} "
            f"USING fts5({FTS_COLUMNS}, tokenize = \"porter unicode61 tokenchars '_'\")"
        )
        for name, body in SQLITE_TRIGGERS.items():
            cursor.execute(f"CREATE TRIGGER IF NOT EXISTS {name} {body}")
        cursor.execute(f"DELETE FROM {FTS_TABLE}")
        cursor.execute(
            f"INSERT INTO {FTS_TABLE}(rowid, {FTS_COLUMNS}) "
            f"SELECT id, {_TAGS_OF_ROW}, condition, rule, category, {_TAGSET_OF_ROW} FROM memory_experience"
        )
    return True


def drop_sqlite_fulltext(connection: Any) -> None:
    with connection.cursor() as cursor:
        for name in SQLITE_TRIGGERS:
            cursor.execute(f"DROP TRIGGER IF EXISTS {name}")
        cursor.execute(f"DROP TABLE IF EXISTS {FTS_TABLE}")


def ensure_after_migrate(sender: Any = None, *, using: str = "default", **kwargs: Any) -> None:
    """post_migrate: repair the SQLite full-text table after a table rebuild."""
    from django.db import connections

    ensure_sqlite_fulltext(connections[using])

"""Real full-text ranking on both databases (memory/fulltext.py).

PostgreSQL: the generated search_vector of 0003 becomes weighted (tags A,
condition B, rule C, category D) for ts_rank_cd. SQLite: an FTS5 table kept in
sync by triggers, for bm25(). The hand-stemmed `search_terms` column goes.
"""

from __future__ import annotations

from django.db import migrations

from memory import fulltext

POSTGRESQL_BACKWARD = [
    "DROP INDEX IF EXISTS memory_experience_search_gin",
    "ALTER TABLE memory_experience DROP COLUMN IF EXISTS search_vector",
    "ALTER TABLE memory_experience ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', coalesce(search_text, ''))) STORED",
    "CREATE INDEX memory_experience_search_gin ON memory_experience USING GIN (search_vector)",
]


def forward(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor == "postgresql":
        for statement in fulltext.POSTGRESQL_FORWARD:
            schema_editor.execute(statement)
    elif connection.vendor == "sqlite":
        fulltext.ensure_sqlite_fulltext(connection)


def backward(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor == "postgresql":
        for statement in POSTGRESQL_BACKWARD:
            schema_editor.execute(statement)
    elif connection.vendor == "sqlite":
        fulltext.drop_sqlite_fulltext(connection)


class Migration(migrations.Migration):
    dependencies = [("memory", "0007_read_result_in_readonly_presets")]

    operations = [
        migrations.RemoveField(model_name="experience", name="search_terms"),
        migrations.RunPython(forward, backward),
    ]

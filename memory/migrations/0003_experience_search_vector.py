"""PostgreSQL only: a generated tsvector over Experience.search_text with a GIN index.

`memory.selectors` queries it for full-text retrieval (M4); SQLite has no such
column and uses the portable token-overlap path instead.
"""

from __future__ import annotations

from django.db import migrations

FORWARD = [
    "ALTER TABLE memory_experience ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', coalesce(search_text, ''))) STORED",
    "CREATE INDEX memory_experience_search_gin ON memory_experience USING GIN (search_vector)",
]
BACKWARD = [
    "DROP INDEX IF EXISTS memory_experience_search_gin",
    "ALTER TABLE memory_experience DROP COLUMN IF EXISTS search_vector",
]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in FORWARD:
            schema_editor.execute(statement)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in BACKWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("memory", "0002_builtin_presets")]

    operations = [migrations.RunPython(forward, backward)]

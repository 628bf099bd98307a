"""PostgreSQL: `applies_vector`, the tags (A) and condition (B) of an experience as a
generated tsvector with its own GIN index (memory/fulltext.py), so retrieval picks
its candidates from the words that say a lesson applies instead of every word of
its rule. SQLite needs nothing: its FTS5 table already has per-column look-ups.
"""

from __future__ import annotations

from django.db import migrations

from memory import fulltext


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in fulltext.POSTGRESQL_APPLIES_FORWARD:
            schema_editor.execute(statement)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in fulltext.POSTGRESQL_APPLIES_BACKWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("memory", "0009_experience_canonical_tag_index")]

    operations = [migrations.RunPython(forward, backward)]

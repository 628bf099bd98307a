"""When an experience's embedding was made, and indexes on it and on `updated_at`: what a
process's matrix of vectors watches to know it must reload (memory/retrieval/vectors.py);
embeddings made before stay unstamped."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0010_experience_applies_vector")]

    operations = [
        migrations.AddField(
            model_name="experience",
            name="embedded_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddIndex(
            model_name="experience",
            index=models.Index(fields=["embedded_at"], name="memory_exp_embedded_at"),
        ),
        migrations.AddIndex(
            model_name="experience",
            index=models.Index(fields=["updated_at"], name="memory_exp_updated_at"),
        ),
    ]

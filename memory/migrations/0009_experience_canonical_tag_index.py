"""The tag index columns hold canonical tags (memory/tags.py:canonical_tag) so that
"Dockerfile" and "docker" meet; refill them for the stored experiences (the stored
tags themselves stay as written)."""

from __future__ import annotations

from django.db import migrations

from memory.tags import normalize_tags


def refill(apps, schema_editor):
    Experience = apps.get_model("memory", "Experience")
    for experience in Experience.objects.only("id", "tags").iterator():
        canonical = normalize_tags(experience.tags, canonical=True)
        Experience.objects.filter(pk=experience.pk).update(
            intent_index="".join(f" {t} " for t in canonical["intent"]),
            state_index="".join(f" {t} " for t in canonical["state"]),
        )


class Migration(migrations.Migration):
    dependencies = [("memory", "0008_experience_fulltext")]

    operations = [migrations.RunPython(refill, migrations.RunPython.noop)]

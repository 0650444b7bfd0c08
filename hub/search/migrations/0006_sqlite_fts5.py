"""SQLite only: the FTS5 index of the search entries' text and the triggers that keep it (``hub.search.fts``).
PostgreSQL keeps its tsvector (migration 0002)."""

from django.db import migrations


def create(apps, schema_editor):
    from hub.search import fts

    fts.install(schema_editor.connection)


def drop(apps, schema_editor):
    from hub.search import fts

    if schema_editor.connection.vendor == "sqlite":
        fts.uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("search", "0005_index_format")]

    operations = [migrations.RunPython(create, drop)]

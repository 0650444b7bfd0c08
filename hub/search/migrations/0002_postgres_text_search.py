"""PostgreSQL only: a GIN index on the tsvector (other databases search the text columns)."""

from django.db import migrations

GIN = "CREATE INDEX IF NOT EXISTS search_entry_vector_gin ON search_searchentry USING gin (search_vector)"
DROP = "DROP INDEX IF EXISTS search_entry_vector_gin"


def create_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(GIN)


def drop_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("search", "0001_initial")]

    operations = [migrations.RunPython(create_index, drop_index)]

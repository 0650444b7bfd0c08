"""Entries learn their derived parent and take their words and facets from every live version. Existing
entries change when their artifact next changes; `manage.py hub_reindex` rebuilds them all at once (not run
here: a migration must not depend on today's models)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('registry', '0002_artifact_downloads'),
        ('search', '0003_memory_index'),
    ]

    operations = [
        migrations.AddField(
            model_name='searchentry',
            name='parent',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='registry.artifact'),
        ),
    ]

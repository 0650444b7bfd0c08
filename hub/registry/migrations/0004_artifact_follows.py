"""Artifacts made by the hub from another (MLCube projects, ``<model>-mlcube``) follow it: existing cubes are
linked to their model and take its visibility and collaborators now (a cube of a deleted model turns private;
the search index is rebuilt by ``migrate`` since hub.search.index.INDEX_FORMAT 2)."""

import django.db.models.deletion
from django.db import migrations, models


CUBE_SUFFIX = "-mlcube"


def link_cubes(apps, schema_editor) -> None:
    Artifact = apps.get_model("registry", "Artifact")
    cubes = Artifact.objects.filter(kind="project", name__endswith=CUBE_SUFFIX, follows__isnull=True,
                                    deleted_at__isnull=True)
    for cube in cubes:
        candidates = Artifact.objects.filter(owner_id=cube.owner_id, name=cube.name[:-len(CUBE_SUFFIX)])
        source = candidates.filter(deleted_at__isnull=True).first() or candidates.order_by("-deleted_at").first()
        if source is None or source.pk == cube.pk:
            continue
        cube.follows = source
        cube.visibility = "private" if source.deleted_at else source.visibility
        cube.save(update_fields=["follows", "visibility"])
        cube.collaborators.set(source.collaborators.all())


class Migration(migrations.Migration):

    dependencies = [
        ('registry', '0003_upload_direct'),
    ]

    operations = [
        migrations.AddField(
            model_name='artifact',
            name='follows',
            field=models.ForeignKey(blank=True, help_text="The artifact whose bytes this one carries, made by the hub (an MLCube project of a model): it has that artifact's visibility and collaborators, always, and is deleted with it.", null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='followers', to='registry.artifact'),
        ),
        migrations.RunPython(link_cubes, migrations.RunPython.noop),
    ]

"""Job.slurm becomes Job.execution, the neutral record of any batch executor: the field is renamed and each row's
data gains ``"executor": "slurm"`` (and loses it again when migrated back)."""

from django.db import migrations, models


def forwards(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.filter(execution__isnull=False).only("pk", "execution").iterator():
        Job.objects.filter(pk=job.pk).update(execution={"executor": "slurm", **job.execution})


def backwards(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    for job in Job.objects.filter(execution__isnull=False).only("pk", "execution").iterator():
        data = dict(job.execution)
        if data.pop("executor", "slurm") != "slurm":
            data = None  # another executor's job has no Slurm record
        Job.objects.filter(pk=job.pk).update(execution=data)


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0008_job_counted"),
    ]

    operations = [
        migrations.RenameField(model_name="job", old_name="slurm", new_name="execution"),
        migrations.AlterField(
            model_name="job",
            name="execution",
            field=models.JSONField(blank=True, help_text="The batch job that runs it (hub.jobs.executors): executor, id, partition, nodes, state, folder; null for Celery jobs.", null=True),
        ),
        migrations.RunPython(forwards, backwards),
    ]

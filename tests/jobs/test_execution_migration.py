"""Migration 0009_job_slurm_to_execution: a job's Slurm record becomes its neutral ``execution``, named ``slurm``,
and back again (a Celery job's null stays null)."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = [pytest.mark.slow, pytest.mark.cpu, pytest.mark.django_db(transaction=True)]  # migrates: 3-8 s

BEFORE, AFTER = [("jobs", "0008_job_counted")], [("jobs", "0009_job_slurm_to_execution")]


def migrate(target):
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def test_the_slurm_record_moves_into_execution_and_back():
    old = migrate(BEFORE).get_model("jobs", "Job")
    slurm, celery = uuid.uuid4(), uuid.uuid4()
    old.objects.create(id=slurm, kind="infer", slurm={"id": "42", "partition": "cpu", "tasks": 3})
    old.objects.create(id=celery, kind="infer")
    new = migrate(AFTER).get_model("jobs", "Job")
    assert new.objects.get(pk=slurm).execution == {"executor": "slurm", "id": "42", "partition": "cpu", "tasks": 3}
    assert new.objects.get(pk=celery).execution is None
    back = migrate(BEFORE).get_model("jobs", "Job")
    assert back.objects.get(pk=slurm).slurm == {"id": "42", "partition": "cpu", "tasks": 3}
    migrate(AFTER)

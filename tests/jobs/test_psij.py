"""The PSI/J executor (hub/jobs/executors/psij.py) through psij-python's slurm executor on the private cluster of
scripts/slurm.sh: a real Celery worker with HUB_EXECUTORS=infer=psij submits a batch inference as one PSI/J job per
shard and follows it; its outputs equal bare ONNX Runtime's, and a cancelled job's Slurm jobs are cancelled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hub.jobs.models import Job
from tests.conftest import wait_for_job
from tests.gateway import models
from tests.jobs.test_slurm import (
    MLP,
    batch,
    cluster_worker,
    dataset,
    outputs_of,
    point_at,
    running,
    slow_job,
    slurm_state,
    wait_for,
)

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def psij_root(django_db_setup, django_db_blocker, tmp_path_factory):
    yield from cluster_worker(tmp_path_factory, "psij", HUB_EXECUTORS="infer=psij")


@pytest.fixture
def hub(settings, psij_root):
    point_at(settings, psij_root, HUB_EXECUTORS=["infer=psij"])
    return psij_root


def test_a_batch_inference_through_psij_equals_onnx_runtime(hub, owner, publish, api):
    publish(owner, "mlp", {"mlp.onnx": MLP})
    x = dataset(owner, publish, 40)
    job = wait_for_job(batch(api, owner, "digits-40-5", worker_num=2), timeout=120)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-8:])
    np.testing.assert_allclose(outputs_of(job)["logits"], models.reference(MLP, {"x": x})["logits"],
                               rtol=1e-5, atol=1e-6)
    run = job.execution
    assert run["executor"] == "psij" and run["tasks"] == 2 and len(run["ids"]) == 2 and run["partition"] == "cpu"
    assert job.worker == f"psij:{run['id']}"
    assert all(slurm_state(native) == "COMPLETED" for native in run["ids"])  # real Slurm jobs, one per shard
    messages = [line["message"] for line in job.log]
    assert any("[task 1] " in m and "rows 20-40 of 40" in m for m in messages), messages  # the node's lines
    assert job.result["execution"]["executor"] == "psij" and job.result["execution"]["job"] == run["id"]
    assert not Path(run["folder"]).parent.exists()
    shown = api.get(f"/api/v1/jobs/{job.pk}/").json()
    assert shown["execution"]["executor"] == "psij" and shown["slurm"] is None  # `slurm` is Slurm's only


def test_cancelling_a_psij_job_cancels_its_slurm_jobs(hub, owner, publish, api):
    job = running(slow_job(api, owner, publish))  # its runner is at work on the node
    assert job.execution["executor"] == "psij"
    assert api.post(f"/api/v1/jobs/{job.pk}/cancel").status_code in (200, 202)
    wait_for(lambda: all(slurm_state(n) == "CANCELLED" for n in job.execution["ids"]), 20, "Slurm still runs it")
    assert Job.objects.get(pk=job.pk).state == "cancelled" and not Path(job.execution["folder"]).exists()

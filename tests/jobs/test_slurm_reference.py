"""A version that references a folder on a declared path is the input of a batch inference on the private Slurm
cluster, handed over by its path: the job's folder holds no copy of its bytes (issue 58)."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from hub.jobs.models import Job
from hub.registry.models import File
from tests.conftest import start_worker, stop_process, valid_metadata, wait_for_job, worker_env
from tests.gateway import models
from tests.jobs.test_slurm import MLP, SLURM, outputs_of
from tests.system_packages import installed_profile

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def cluster(django_db_setup, django_db_blocker, tmp_path_factory):
    """A worker that submits to the private cluster and may read the declared root ``lustre``."""
    from workers.celery import app

    if not os.environ.get("SLURM_CONF"):
        (pytest.fail if installed_profile() else pytest.skip)("needs the private Slurm cluster: run through "
                                                              "`make test` (scripts/services.sh sets SLURM_CONF)")
    root = tmp_path_factory.mktemp("slurm-ref")
    (root / "lustre").mkdir()
    env = worker_env(root, **SLURM, HUB_SLURM_JOB_DIR=str(root / "jobs"), HUB_REFERENCE_ROOTS=str(root / "lustre"))
    app.control.purge()
    proc = start_worker(root, env, name="slurm-ref-worker")
    yield root
    stop_process(proc)


def test_a_referenced_folder_is_read_by_the_slurm_job_in_place(cluster, settings, api, owner, publish):
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(cluster / "blobs")}
    settings.HUB_UPLOAD_DIR = cluster / "uploads"
    settings.HUB_EXECUTOR = "slurm"
    settings.HUB_SLURM_KINDS = SLURM["HUB_SLURM_KINDS"].split(",")
    settings.HUB_SLURM_JOB_DIR = cluster / "jobs"
    settings.HUB_REFERENCE_ROOTS = [str(cluster / "lustre")]
    publish(owner, "mlp", {"mlp.onnx": MLP})
    run = cluster / "lustre" / "campaign" / "run1"
    run.mkdir(parents=True)
    x = np.random.default_rng(7).standard_normal((40, 784)).astype(np.float32)
    np.save(run / "inputs.npy", x)
    (run / "README.txt").write_text("inputs of run 1\n")

    opened = api.post("/api/v1/uploads/", {"reference": str(run)}, format="json").json()
    read = wait_for_job(opened["job"]["id"], timeout=60)
    assert read.state == "succeeded", (read.error_code, read.error_detail)
    published = api.post("/api/v1/artifacts/alice/campaign/versions/", {
        "artifact": {"kind": "dataset"}, "metadata": valid_metadata("dataset"),
        "files": [{"path": "run1", "upload": opened["id"]}]}, format="json")
    assert published.status_code == 201, published.content
    assert File.objects.get(path="run1/inputs.npy").location == str(run / "inputs.npy")

    response = api.post("/api/v1/artifacts/alice/mlp/versions/latest/infer",
                        {"dataset": "alice/campaign", "dataset_file": "run1/inputs.npy", "batch_size": 16},
                        format="json")
    assert response.status_code == 202, response.content
    job_id = response.json()["id"]
    folder, seen = cluster / "jobs" / job_id, {}
    deadline = time.monotonic() + 120
    while not Job.objects.get(pk=job_id).is_final and time.monotonic() < deadline:
        for path in list(folder.rglob("*")) if folder.exists() else []:  # the folder while the node runs
            try:
                if path.is_file() and not path.is_symlink():
                    seen[path] = (path.stat().st_size, path.stat().st_ino,
                                  path.read_text() if path.name == "job.json" else "")
            except FileNotFoundError:
                pass  # removed meanwhile (the job ended)
        time.sleep(0.1)
    job = wait_for_job(job_id, timeout=5)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log)
    np.testing.assert_allclose(outputs_of(job)["logits"], models.reference(MLP, {"x": x})["logits"],
                               rtol=1e-5, atol=1e-6)
    specs = [json.loads(text) for _, _, text in seen.values() if text]
    assert specs and specs[0]["inputs"] == str(run / "inputs.npy")  # handed over by its path
    size, inode = (run / "inputs.npy").stat().st_size, (run / "inputs.npy").stat().st_ino
    assert all(found != size and number != inode for found, number, _ in seen.values()), "a copy of the inputs"

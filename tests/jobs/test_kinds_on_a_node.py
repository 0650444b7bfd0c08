"""The kinds a Slurm node can compute, without Slurm: ``stage`` writes a job folder, the node's runner
(``hpcfair.slurm_runner``: the compute library only, no Django) computes from it in this process, and
``publish`` makes what the Celery path makes. The real scheduler runs the same kinds in tests/jobs/test_slurm.py."""

from __future__ import annotations

import json

import pytest
from hpcfair import slurm_runner

from hub.conversions.services import request_optimization
from hub.jobs import kinds
from hub.jobs.models import Job
from hub.jobs.runner import execute
from hub.registry.models import Version
from tests.gateway import models

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.cpu]  # computes in this process


def on_a_node(job: Job, folder) -> dict:
    """Stage, compute with the node's runner, publish: the Slurm path without the scheduler."""
    kind = kinds.get(job.kind)
    folder.mkdir()
    plan = kind.stage(job, folder)
    assert plan is not None, f"{job.kind} would not go to a node"
    (folder / "job.json").write_text(json.dumps(plan.spec))
    code = slurm_runner.main([str(folder)])
    error = folder / "out" / "error-0.json"
    assert code == 0, error.read_text() if error.exists() else code
    job.execution = {"executor": "slurm", "tasks": plan.tasks}
    return kind.publish(job, folder, {"executor": "slurm", "elapsed_s": 1.0})


@pytest.fixture
def mlp(owner, publish):
    _, version = publish(owner, "mlp", {"mlp.onnx": models.mlp(hidden=16)})
    return version


def test_a_verification_computed_by_the_node_s_runner_is_published(mlp, tmp_path):
    job = Job.objects.get(version=mlp, kind="verify")  # queued by the upload itself
    result = on_a_node(job, tmp_path / "job")
    assert result["verified"] is True and result["files"]["mlp.onnx"]["verification"]["passed"]
    assert any(line["message"].startswith("mlp.onnx: verified") for line in Job.objects.get(pk=job.pk).log)


def test_an_optimisation_computed_by_the_node_s_runner_is_published(mlp, owner, tmp_path):
    job = request_optimization(mlp, owner)
    result = on_a_node(job, tmp_path / "job")
    optimized = Version.objects.get(pid=result["pid"])
    variants = optimized.metadata["optimization"]["variants"]
    assert {f.path for f in optimized.files.all()} == set(variants) and variants
    assert all(v["max_abs_diff"] < 0.1 for v in variants.values())
    assert optimized.provenance.get().relation == "derived_from" and optimized.metadata["job"] == str(job.pk)


def test_a_node_s_coded_failure_is_the_celery_path_s(owner, publish, tmp_path):
    """A file the sandbox refuses fails with the same code and words on a node as in a Celery worker."""
    _, version = publish(owner, "broken", {"broken.onnx": b"not a protobuf at all"})
    job = Job.objects.get(version=version, kind="verify")
    folder = tmp_path / "job"
    folder.mkdir()
    plan = kinds.get("verify").stage(job, folder)
    (folder / "job.json").write_text(json.dumps(plan.spec))
    assert slurm_runner.main([str(folder)]) == 1
    node = json.loads((folder / "out" / "error-0.json").read_text())
    execute(str(job.pk), kinds.get("verify").run)
    job.refresh_from_db()
    assert job.state == "failed" and (job.error_code, job.error_detail) == (node["code"], node["detail"])
    assert node["detail"].startswith("broken.onnx: ")

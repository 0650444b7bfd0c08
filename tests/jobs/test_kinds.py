"""The kinds of job (``hub.jobs.kinds``): one registry that the Job row, job creation and both executors read,
and kinds tested without a worker: fixity whole, inference's Slurm side staged, computed by the node's
runner in this process (the compute library, no Django) and published."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hpcfair import slurm_runner
from hpcfair.compute import CodedError

from hub.jobs import kinds
from hub.jobs.models import Job
from hub.jobs.runner import execute
from hub.registry.models import Version
from hub.storage import get_blob_store
from tests.gateway import models

pytestmark = pytest.mark.django_db

EXPECTED = {"fixity", "reference", "fetch", "convert", "verify", "optimize", "infer", "benchmark", "collaborate",
            "container", "finetune",
            "generation", "gguf", "generate", "serve"}


def test_every_kind_is_registered_once_and_the_job_row_offers_them():
    assert set(kinds.KINDS) == EXPECTED
    assert all(kind.name == name and kind.label for name, kind in kinds.KINDS.items())
    field = Job._meta.get_field("kind")
    assert sorted(dict(field.choices)) == sorted(EXPECTED)  # the choices are the registry's
    assert Job(kind="finetune").get_kind_display() == "fine-tuning"


def test_a_job_waits_in_its_kind_s_queue(owner, publish, monkeypatch):
    """The queue is the kind's (``JobKind.queue``): the converters' for conversions, the device's for the kinds
    that compute on one, the CPU workers' for the rest; no caller picks it."""
    from hub.jobs import services

    monkeypatch.setattr(services, "dispatch", lambda job: None)  # no broker here: the row is what is checked
    _, version = publish(owner, "m")
    queued = {(name, device): services.create_job(name, owner, version=version, device=device).queue
              for name, device in (("convert", "cpu"), ("fixity", "cpu"), ("infer", "gpu"), ("infer", "cpu"),
                                   ("finetune", "gpu"), ("container", "gpu"))}
    assert queued == {("convert", "cpu"): "convert", ("fixity", "cpu"): "cpu", ("infer", "gpu"): "gpu",
                      ("infer", "cpu"): "cpu", ("finetune", "gpu"): "gpu", ("container", "gpu"): "convert"}
    assert {kind.queue for kind in kinds.KINDS.values()} == {"cpu", "convert", kinds.DEVICE}


def test_a_second_class_cannot_take_a_kind_s_name():
    class Impostor(kinds.JobKind):
        name = "fixity"
        label = "not a fixity check"

    with pytest.raises(ValueError, match="registered twice"):
        kinds.register(Impostor)
    assert type(kinds.get("fixity")).__name__ == "FixityJob"


def test_only_kinds_that_stage_can_run_on_slurm(settings):
    settings.HUB_EXECUTOR = "slurm"
    settings.HUB_SLURM_KINDS = sorted(EXPECTED)
    from hub.jobs.executors import executor_for

    nodes = {name for name in EXPECTED if executor_for(name).name == "slurm"}
    assert nodes == {"convert", "verify", "optimize", "infer", "container", "finetune", "generation",
                     "generate", "gguf", "serve"}


def test_creating_a_job_of_an_unknown_kind_is_refused(owner):
    from hub.jobs.services import create_job

    with pytest.raises(ValueError, match="no app registers"):
        create_job("defragment", owner)


def test_the_one_celery_task_carries_every_kind(owner, monkeypatch):
    from hub.celery import app
    from hub.jobs import services

    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, **options: sent.append((name, options)))
    job = Job.objects.create(kind="benchmark", requester=owner, queue="gpu")
    services.dispatch(job)
    assert sent == [("hub.job", {"args": [str(job.pk)], "queue": "gpu", "task_id": str(job.pk)})]


# --- fixity, whole --------------------------------------------------------------------------------------


def test_fixity_finds_each_file_sound_corrupt_or_missing(owner, publish, hub_dirs):
    _, version = publish(owner, "fix", {"a.bin": b"a" * 100, "b.bin": b"b" * 50, "c.bin": b"c" * 10})
    files = {f.path: f for f in version.files.all()}
    store = get_blob_store()
    corrupt = store.local_path(files["b.bin"].blob_id)
    corrupt.chmod(0o644)
    corrupt.write_bytes(b"B" * 50)  # same size, other bytes
    store.local_path(files["c.bin"].blob_id).unlink()
    job = Job.objects.create(kind="fixity", requester=owner, version=version)
    execute(str(job.pk), kinds.get("fixity").run)
    job.refresh_from_db()
    found = {item["path"]: item for item in job.result["files"]}
    assert job.state == "succeeded" and job.result["ok"] is False
    assert found["a.bin"]["ok"] and found["a.bin"]["size"] == 100
    assert not found["b.bin"]["ok"] and found["b.bin"]["sha256"] != files["b.bin"].blob_id
    assert found["c.bin"] == {"path": "c.bin", "ok": False, "problem": "missing from the object store"}


def test_fixity_of_a_deleted_version_fails_gone(owner, publish):
    _, version = publish(owner, "gone")
    Version.objects.filter(pk=version.pk).update(deleted_at="2026-01-01T00:00:00Z")
    job = Job.objects.create(kind="fixity", requester=owner, version=version)
    execute(str(job.pk), kinds.get("fixity").run)
    job.refresh_from_db()
    assert job.state == "failed" and job.error_code == "gone"


# --- inference's Slurm side, without Slurm ---------------------------------------------------------------


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@pytest.fixture
def staged_infer(owner, publish, tmp_path, settings):
    """An inference job over a 30-row dataset with its folder staged as the login node stages it."""
    from hub.gateway.protocol import Options
    from hub.gateway.services import dataset_input, model_for, start_infer_job

    settings.HUB_EXECUTOR = "celery"  # only to create it: nothing is sent without a commit
    publish(owner, "mlp", {"mlp.onnx": models.mlp(hidden=16)})
    x = np.random.default_rng(3).standard_normal((30, 784)).astype(np.float32)
    publish(owner, "rows", {"inputs.npy": npy(x)}, kind="dataset")
    dataset, path = dataset_input(owner, "alice/rows", "")
    job = start_infer_job(owner, [model_for(owner, "alice/mlp")], Options.parse({}), dataset=dataset,
                          dataset_file=path, batch_size=8)
    folder = tmp_path / "job"
    folder.mkdir()
    plan = kinds.get("infer").stage(job, folder)
    (folder / "job.json").write_text(json.dumps(plan.spec))
    return job, folder, plan, x


def test_inference_stages_a_folder_a_node_can_compute_alone(staged_infer):
    job, folder, plan, _ = staged_infer
    assert plan.spec["compute"] == "infer" and plan.tasks == 1 and plan.spec["batch_size"] == 8
    assert sorted(p.name for p in folder.iterdir()) == ["inputs.npy", "job.json", "model-0"]
    assert plan.spec["steps"][0]["model"] == "model-0/mlp.onnx"  # its folder would hold its data files too
    assert [p.name for p in (folder / "model-0").iterdir()] == ["mlp.onnx"]
    assert 256 <= plan.memory_mb < 260  # twice the model's files, beside the runtime


def test_a_task_asks_slurm_for_what_its_model_needs_when_that_is_more(settings):
    from hub.jobs.executors.batch import memory_mb, task_memory
    from hub.jobs.kinds import Plan

    settings.HUB_SLURM_MEM = "4G"
    assert [memory_mb(text) for text in ("4G", "512M", "2048", "1T")] == [4096, 512, 2048, 1024 * 1024]
    assert task_memory(Plan({}, memory_mb=300)) == "4G"
    assert task_memory(Plan({}, memory_mb=5000)) == "5000M"  # a 2.3 GiB model's files: twice that, and more


def test_inference_publishes_what_the_node_wrote(staged_infer, monkeypatch):
    job, folder, _, x = staged_infer
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "0")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "1")
    assert slurm_runner.main([str(folder)]) == 0  # the node's compute, here: the compute library only
    job.execution = {"executor": "slurm", "tasks": 1}
    result = kinds.get("infer").publish(job, folder, {"elapsed_s": 0.5, "executor": "slurm"})
    version = Version.objects.get(pid=result["pid"])
    file = version.files.get(path="outputs.npz")
    with get_blob_store().open(file.blob_id) as stream, np.load(io.BytesIO(stream.read())) as archive:
        logits = archive["logits"]
    np.testing.assert_allclose(logits, models.reference(models.mlp(hidden=16), {"x": x})["logits"],
                               rtol=1e-5, atol=1e-6)
    assert result["outputs"] == {"logits": {"shape": [30, 10], "dtype": "float32"}}
    assert version.metadata["execution"]["executor"] == "slurm" and version.metadata["job"] == str(job.pk)


def test_a_node_that_wrote_nothing_fails_the_job_with_a_code(staged_infer):
    job, folder, _, _ = staged_infer
    job.execution = {"executor": "slurm", "tasks": 1}
    (folder / "out").mkdir()
    with pytest.raises(CodedError) as caught:
        kinds.get("infer").publish(job, folder, {})
    assert caught.value.code == "invalid_inputs"

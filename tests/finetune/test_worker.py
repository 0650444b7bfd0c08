"""Fine-tuning through the whole hub: a real Celery worker trains in the sandbox, streams its epochs into the
job's log, publishes a private model version with provenance and metadata, and the automatic conversion
turns it into a verified ONNX version; the same seed repeats the metrics; cancelling leaves nothing. One test:
the content (and the base model's own conversion) is made once."""

from __future__ import annotations

import json
import time

import pytest

from hub.jobs.models import Job
from hub.registry.models import Artifact
from tests.conftest import multipart_file, wait_for_job
from tests.finetune import fixtures

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
META = {"description": "For fine-tuning tests.", "creators": [{"name": "Alice Example"}], "license": "MIT"}


def publish(api, name: str, kind: str, files: dict, **metadata) -> None:
    assert api.post("/api/v1/artifacts/", {"kind": kind, "name": name, "title": name}, format="json").status_code == 201
    response = api.post(f"/api/v1/artifacts/alice/{name}/versions/",
                        {"files": [multipart_file(p, d) for p, d in files.items()],
                         "metadata": json.dumps({**META, "title": name, **metadata})}, format="multipart")
    assert response.status_code == 201, response.content


@pytest.fixture
def hub_content(api, shared_storage, tmp_path):
    model = fixtures.torchscript_mlp(tmp_path)
    publish(api, "mlp", "model", {"mlp.pt": model.read_bytes()}, task="classification", framework="pytorch",
            inputs=[{"name": "features", "shape": [None, 4], "dtype": "float32"}])
    csv = fixtures.blobs_csv(tmp_path / "data", rows=1000)
    publish(api, "blobs", "dataset", {"blobs.csv": csv.read_bytes()})
    for job in Job.objects.filter(kind__in=["convert", "verify"]):  # the base model's own conversion
        wait_for_job(job.pk, timeout=180)


def start(api, **body) -> Job:
    response = api.post("/api/v1/artifacts/alice/mlp/versions/1/finetune",
                        {"dataset": "alice/blobs@1", "target": "label", "epochs": 3, "learning_rate": 0.01,
                         "seed": 5, **body}, format="json")
    assert response.status_code == 202, response.content
    return Job.objects.get(pk=response.json()["id"])


def test_finetune_publishes_a_verified_private_model_and_cancels(api, anon, hub_content):
    job = wait_for_job(start(api).pk, timeout=240)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-5:])
    epochs = [line["message"] for line in job.log if line["message"].startswith("epoch ")]
    assert [e.split(":")[0] for e in epochs] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"], job.log
    assert "validation loss" in epochs[0] and "accuracy" in epochs[0]
    result = job.result
    assert result["version"] == "alice/mlp-finetuned@1" and result["final"]["accuracy"] > result["base"]["accuracy"]

    artifact = Artifact.objects.get(owner__username="alice", name="mlp-finetuned")
    assert artifact.visibility == "private" and artifact.kind == "model"
    assert anon.get("/api/v1/artifacts/alice/mlp-finetuned/").status_code == 404
    shown = api.get("/api/v1/artifacts/alice/mlp-finetuned/versions/1/").json()
    relations = {(p["relation"], p["target"]) for p in shown["provenance"]}
    assert relations == {("derived_from", "alice/mlp@1"), ("trained_on", "alice/blobs@1")}
    assert {f["path"] for f in shown["files"]} == {"model.pt", "sample_inputs.npz", "loss_curve.png"}
    meta = shown["metadata"]
    assert meta["hyperparameters"] == {"epochs": 3, "learning_rate": 0.01, "batch_size": 32, "freeze": "none",
                                       "validation_split": 0.2, "seed": 5, "early_stopping": 0, "max_length": 64}
    assert meta["accuracy"] == result["final"]["accuracy"] and meta["learning_type"] == "supervised"
    assert meta["metrics"]["validation_accuracy"] > meta["metrics"]["base_validation_accuracy"]
    training = meta["training"]
    assert training["seed"] == 5 and training["target"] == "label" and len(training["history"]) == 3
    assert "torch" in training["libraries"] and training["hardware"]["cores"] >= 1
    assert training["rows"] == {"train": 800, "validation": 200}
    assert {training["base"], training["dataset"]} == {p["target_pid"] for p in shown["provenance"]}
    assert meta["inputs"] == [{"name": "features", "shape": [None, 4], "dtype": "float32"}]

    conversion = wait_for_job(result["conversion_job"], timeout=240)
    assert conversion.state == "succeeded" and conversion.result["verified"] is True, conversion.error_detail
    onnx = api.get("/api/v1/artifacts/alice/mlp-finetuned/versions/1-onnx/").json()
    assert onnx["metadata"]["verified"] is True and onnx["metadata"]["training"]["seed"] == 5

    turtle = api.get("/api/v1/artifacts/alice/mlp-finetuned/versions/1/metadata/turtle").content.decode()
    assert "wasDerivedFromDataset" in turtle and "hyperParameter" in turtle and "hpc:accuracy" in turtle

    api.force_authenticate(user=artifact.owner)  # the landing page is a browser's: a session, not a token
    html = api.get(f"/pid/{shown['pid']}", HTTP_ACCEPT="text/html", follow=True).content.decode()
    assert "loss_curve.png" in html and "<img" in html

    # The same config and seed again: the same metrics, and files identical to the byte, so the hub's
    # uniqueness check points at the first result instead of publishing a copy.
    again = wait_for_job(start(api, name="mlp-again").pk, timeout=240)
    assert again.state == "succeeded", again.error_detail
    assert again.result["final"] == result["final"] and again.result["version"] == "alice/mlp-finetuned@1"
    assert any("identical to alice/mlp-finetuned@1" in line["message"] for line in again.log)
    assert not Artifact.objects.filter(name="mlp-again").exists()

    # Cancelled mid-training: the sandboxed trainer is stopped and nothing is published.
    job = start(api, epochs=1000, batch_size=1, name="cancelled")
    deadline = time.monotonic() + 120
    while not any(line["message"].startswith("epoch 1/") for line in Job.objects.get(pk=job.pk).log):
        assert time.monotonic() < deadline, Job.objects.get(pk=job.pk).log
        time.sleep(0.3)
    assert api.post(f"/api/v1/jobs/{job.pk}/cancel").status_code in (200, 202)
    job = wait_for_job(job.pk, timeout=60)
    assert job.state == "cancelled"
    assert not Artifact.objects.filter(name="cancelled").exists()

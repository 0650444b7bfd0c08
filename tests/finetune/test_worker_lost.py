"""A worker killed in the middle of a fine-tune. Its own module: no other worker may be running."""

from __future__ import annotations

import os
import signal
import time

import pytest

from hub.jobs.models import Job
from hub.registry.models import Version
from tests.conftest import doomed_worker_env, poll_job_api, start_worker, stop_process
from tests.finetune import fixtures
from tests.finetune.test_worker import publish

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_worker_killed_mid_training_is_retried_and_publishes_once(tmp_path, settings, api):
    """SIGKILL the worker after the first epoch: the sandboxed trainer dies with it, nothing is published,
    the hub queues the job again and a new worker trains it from the start (attempts == 2); one version."""
    env = doomed_worker_env(tmp_path, settings)
    model = fixtures.torchscript_mlp(tmp_path)
    publish(api, "mlp", "model", {"mlp.pt": model.read_bytes()}, task="classification", framework="pytorch")
    publish(api, "blobs", "dataset", {"blobs.csv": fixtures.blobs_csv(tmp_path / "d", rows=1000).read_bytes()})
    response = api.post("/api/v1/artifacts/alice/mlp/versions/1/finetune",
                        {"dataset": "alice/blobs", "target": "label", "epochs": 6, "batch_size": 8}, format="json")
    assert response.status_code == 202, response.content
    job_id = response.json()["id"]
    first = start_worker(tmp_path, env, "doomed")
    try:
        deadline = time.monotonic() + 180
        while not any(line["message"].startswith("epoch 1/") for line in Job.objects.get(pk=job_id).log):
            assert time.monotonic() < deadline, Job.objects.get(pk=job_id).log
            time.sleep(0.2)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        stop_process(first)
    assert not Version.objects.filter(artifact__name="mlp-finetuned").exists()
    second = start_worker(tmp_path, env, "rescuer")
    try:
        shown = poll_job_api(api, job_id)
    finally:
        stop_process(second)
    assert shown["state"] == "succeeded", shown
    assert shown["attempts"] == 2 and any("was lost" in line["message"] for line in shown["log"])
    assert list(Version.objects.filter(artifact__name="mlp-finetuned").values_list("label", flat=True)) in (
        ["1"], ["1-onnx", "1"], ["1", "1-onnx"])  # its conversion may have run meanwhile

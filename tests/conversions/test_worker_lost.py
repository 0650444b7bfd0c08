"""A worker killed in the middle of a conversion. Its own module: no other worker may be running."""

from __future__ import annotations

import os
import signal
import time

import pytest

from hub.jobs.models import Job
from hub.registry.models import Version
from tests.conftest import doomed_worker_env, poll_job_api, start_worker, stop_process
from tests.conversions.test_worker import conversion_job, publish_model

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_worker_killed_mid_job_is_requeued_and_finishes(built_models, tmp_path, settings, api):
    """SIGKILL the worker during a conversion: the job's heartbeats stop, the hub queues it again and a
    new worker finishes it (attempts == 2); nothing stays "running"."""
    env = doomed_worker_env(tmp_path, settings)
    first = start_worker(tmp_path, env, "doomed")
    try:
        path, metadata = built_models["bert"]
        publish_model(api, "killed", {path.name: path.read_bytes()}, {"title": "killed", **metadata})
        job = conversion_job("1", "killed")
        deadline = time.monotonic() + 60
        while Job.objects.get(pk=job.pk).state != "running":
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.2)
        time.sleep(1.0)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        stop_process(first)
    second = start_worker(tmp_path, env, "rescuer")
    try:
        shown = poll_job_api(api, job.pk)
    finally:
        stop_process(second)
    assert shown["state"] == "succeeded", shown
    assert shown["attempts"] == 2 and any("was lost" in line["message"] for line in shown["log"])
    assert Version.objects.filter(artifact__name="killed", label="1-onnx").count() == 1

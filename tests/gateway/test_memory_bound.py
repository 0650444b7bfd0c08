"""Issue 38, point 1, through the real hub and worker: a public graph that allocates whatever its inputs
ask (``ConstantOfShape(n) -> ReduceSum``) is answered 422 ``memory_limit`` on the synchronous path and as
a job, a single kernel past the synchronous deadline is stopped, and the worker answers the next request."""

from __future__ import annotations

import time

import pytest

from tests.conftest import wait_for_job
from tests.gateway import models

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

HUGE = [20, 268435456]  # 20 GiB of float32, as the held-out probe asked


@pytest.fixture
def fill(shared_storage, owner, publish):
    publish(owner, "fill", {"fill.onnx": models.fill()})


def infer_url(name: str) -> str:
    return f"/api/v1/artifacts/alice/{name}/versions/latest/infer"


def test_a_graph_asking_for_20_gib_is_refused_and_the_worker_goes_on(fill, api):
    refused = api.post(infer_url("fill"), {"inputs": {"n": HUGE}}, format="json")
    assert refused.status_code == 422, refused.content
    error = refused.json()
    assert error["code"] == "memory_limit" and "MiB (HUB_INFER_MEMORY_MB)" in error["detail"], error
    assert "20 GiB" in error["detail"]
    answered = api.post(infer_url("fill"), {"inputs": {"n": [2, 3]}}, format="json")
    assert answered.status_code == 200 and answered.json()["outputs"]["total"] == 6.0


def test_the_same_graph_as_a_job_fails_with_the_code(fill, api):
    response = api.post(infer_url("fill"), {"inputs": {"n": HUGE}, "mode": "async"}, format="json")
    assert response.status_code == 202, response.content
    job = wait_for_job(response.json()["id"], timeout=120)
    assert job.state == "failed" and job.error_code == "memory_limit", (job.error_code, job.error_detail)
    assert "HUB_INFER_MEMORY_MB" in job.error_detail
    shown = api.get(f"/api/v1/jobs/{job.pk}/").json()
    assert shown["error_code"] == "memory_limit"


def test_a_kernel_past_the_synchronous_deadline_is_stopped(shared_storage, owner, publish, api, settings):
    publish(owner, "long", {"long.onnx": models.one_long_kernel()})
    settings.HUB_INFER_SYNC_S = 0.5  # a 6000 x 6000 MatMul takes seconds in one kernel
    started = time.perf_counter()
    stopped = api.post(infer_url("long"), {"inputs": {"n": [6000, 6000]}, "mode": "sync"}, format="json")
    assert stopped.status_code == 504 and stopped.json()["code"] == "worker_timeout", stopped.content
    assert time.perf_counter() - started < 0.5 + 2.0 + 1.0, "the worker answered when it stopped the run"
    settings.HUB_INFER_SYNC_S = 10
    answered = api.post(infer_url("long"), {"inputs": {"n": [2, 2]}}, format="json")
    assert answered.status_code == 200 and answered.json()["outputs"]["total"] == pytest.approx(2.0)

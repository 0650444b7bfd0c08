"""The CUDA path: a worker on the ``gpu`` queue runs requests with ONNX Runtime's CUDA execution
provider and says so. Runs only where a GPU and onnxruntime-gpu are present (never in CI here); the
routing that refuses or queues GPU work without such a worker is tested in test_infer.py."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from tests.conftest import client_for, start_worker, stop_process, worker_env
from tests.gateway import models

pytestmark = [
    pytest.mark.worker, pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("CUDAExecutionProvider" not in ort.get_available_providers(),
                       reason="needs a GPU and onnxruntime-gpu (ONNX Runtime here offers "
                              f"{', '.join(ort.get_available_providers())})"),
]


def test_gpu_worker_runs_on_cuda(tmp_path, settings, owner, publish):
    env = worker_env(tmp_path)
    proc = start_worker(tmp_path, env, name="gpu-worker", queues="gpu")
    try:
        settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(tmp_path / "blobs")}
        mlp = models.mlp()
        publish(owner, "mlp", {"mlp.onnx": mlp})
        x = np.random.default_rng(0).standard_normal((8, 784)).astype(np.float32)
        response = client_for(owner).post("/api/v1/artifacts/alice/mlp/versions/latest/infer",
                                          {"inputs": {"x": x.tolist()}, "device": "gpu"}, format="json")
        assert response.status_code == 200, response.content
        assert response.json()["device"] == "gpu" and response.json()["provider"] == "CUDAExecutionProvider"
        np.testing.assert_allclose(np.array(response.json()["outputs"]["logits"], np.float32),
                                   models.reference(mlp, {"x": x})["logits"], rtol=1e-3, atol=1e-4)
    finally:
        stop_process(proc)

"""The embedded default's gateway: no Redis, the lane is files under var/gateway, the worker is a real
Celery worker on kombu's filesystem broker."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from hub.gateway import local
from hub.gateway.lane import get_lane
from tests.conftest import client_for, start_worker, stop_process, worker_env
from tests.gateway import models

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def file_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    root = tmp_path_factory.mktemp("embedded")
    var = root / "var"
    for folder in ("queue", "processed"):
        (var / "broker" / folder).mkdir(parents=True)
    env = worker_env(root, HUB_BROKER_URL="filesystem://", HUB_VAR_DIR=str(var))
    env.pop("HUB_GATEWAY_URL", None)
    proc = start_worker(root, env, name="embedded")
    yield root
    stop_process(proc)


def test_sync_inference_over_the_file_lane(file_worker, settings, owner, publish):
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(file_worker / "blobs")}
    settings.HUB_UPLOAD_DIR = file_worker / "uploads"
    settings.HUB_GATEWAY_URL = "filesystem://"
    settings.VAR_DIR = file_worker / "var"
    mlp = models.mlp()
    publish(owner, "mlp", {"mlp.onnx": mlp})
    x = np.random.default_rng(9).standard_normal((2, 784)).astype(np.float32)
    response = client_for(owner).post("/api/v1/artifacts/alice/mlp/versions/latest/infer",
                                      {"inputs": {"x": x.tolist()}}, format="json")
    assert response.status_code == 200, response.content
    np.testing.assert_allclose(np.array(response.json()["outputs"]["logits"], np.float32),
                               models.reference(mlp, {"x": x})["logits"], rtol=1e-5, atol=1e-6)
    assert (file_worker / "var" / "gateway" / "alive" / "cpu").is_dir()
    # The worker's presence file holds its local socket (hub.gateway.local), which this process (same host) used.
    (address,) = [json.loads(raw) for raw in get_lane().nearby("cpu")]
    assert address["host"] == local.host() and stat.S_ISSOCK(os.stat(address["path"]).st_mode)
    gpu = client_for(owner).post("/api/v1/artifacts/alice/mlp/versions/latest/infer",
                                 {"inputs": {"x": x.tolist()}, "device": "gpu"}, format="json")
    assert gpu.status_code == 503 and gpu.json()["code"] == "no_worker"

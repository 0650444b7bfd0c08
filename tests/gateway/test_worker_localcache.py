"""A real worker's local copies of models (hub.gateway.localcache, workers.housekeeping.CacheSweepStep): the folder
it puts a model with external data together in stays while its engine holds the session, even after the version is
deleted, and goes at the worker's next sweep once the session is evicted; a model still published keeps its copy."""

from __future__ import annotations

import time

import numpy as np
import onnx
import pytest
from onnx.external_data_helper import convert_model_to_external_data

from tests.conftest import start_worker, stop_process, worker_env
from tests.gateway.test_model_memory import matmul

pytestmark = [pytest.mark.worker, pytest.mark.services, pytest.mark.django_db(transaction=True)]
SIDE = 300  # 360 KB of weights: a session costs twice its files, so a 1 MiB session cache holds one model


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """A worker of its own: its var dir (and so its model copies) in the test's folder, one engine whose session
    cache has room for one of these models, and a sweep every second with no grace period."""
    from workers.celery import app

    root = tmp_path_factory.mktemp("worker")
    env = worker_env(root, HUB_VAR_DIR=str(root / "var"), HUB_GATEWAY_CACHE_MB="1", HUB_GATEWAY_THREADS="1",
                     HUB_WORKER_CACHE_SWEEP_S="1", HUB_WORKER_CACHE_GRACE_S="0")
    app.control.purge()
    proc = start_worker(root, env)
    yield root
    stop_process(proc)


def model_files(tmp_path, value: float) -> dict[str, bytes]:
    model = matmul(np.full((SIDE, SIDE), value, np.float32))
    convert_model_to_external_data(model, location="model.onnx.data", size_threshold=0)
    folder = tmp_path / f"m{value}"
    folder.mkdir()
    onnx.save_model(model, str(folder / "model.onnx"))
    return {name: (folder / name).read_bytes() for name in ("model.onnx", "model.onnx.data")}


def infer(api, name: str, value: float) -> None:
    response = api.post(f"/api/v1/artifacts/alice/{name}/versions/latest/infer",
                        {"inputs": {"x": [[1.0] * SIDE]}}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["outputs"]["y"][0][0] == pytest.approx(SIDE * value)


def wait_until(condition, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.25)
    return False


def test_a_deleted_models_copy_stays_while_held_and_goes_once_let_go(shared_storage, owner, publish, api, tmp_path):
    from hub.registry import services

    copies = shared_storage / "var" / "gateway" / "models" / "with-data"
    _, first = publish(owner, "first", model_files(tmp_path, 1.0))
    publish(owner, "second", model_files(tmp_path, 2.0))
    infer(api, "first", 1.0)
    [held] = list(copies.iterdir())
    services.delete_version(first)  # its blobs leave the store; the worker's folder holds its last links
    time.sleep(3)  # three sweeps
    assert held.exists(), "a copy the engine's cached session holds was removed"
    infer(api, "second", 2.0)  # the session cache has room for one: the first session goes, and its hold
    assert wait_until(lambda: not held.exists()), "the deleted model's copy was not dropped"
    [kept] = list(copies.iterdir())
    assert kept != held
    time.sleep(2)
    assert kept.exists()  # still published (and held)
    infer(api, "second", 2.0)

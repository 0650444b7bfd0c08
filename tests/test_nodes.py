"""Two web nodes and a worker on "another machine": each has its own ``HUB_VAR_DIR`` and they share only
PostgreSQL, Redis and the S3 store (SeaweedFS). Nothing one node needs may be on another node's disk: an
asynchronous inference asked of web node B runs on worker C, and a resumable upload whose chunks alternate
between A and B completes, becomes a version on B and downloads from A with the same bytes."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import requests

from hub.registry.models import Upload, Version
from hub.storage import get_blob_store
from tests.conftest import (
    ROOT,
    start_worker,
    stop_process,
    use_s3_bucket,
    valid_metadata,
    wait_for_job,
    wait_for_port,
    worker_env,
)
from tests.gateway import models
from tests.ports import free_port

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MLP = models.mlp()


def node_env(root: Path, settings) -> dict[str, str]:
    """A node's environment: its own var dir (uploads, SPARQL store, static files), the shared database and
    broker (``worker_env``), and the shared S3 bucket."""
    store = settings.HUB_STORAGE
    env = worker_env(root, HUB_VAR_DIR=str(root), HUB_STORAGE="s3", HUB_S3_ENDPOINT=store["S3_ENDPOINT"],
                     HUB_S3_BUCKET=store["S3_BUCKET"], HUB_S3_ACCESS_KEY=store["S3_ACCESS_KEY"],
                     HUB_S3_SECRET_KEY=store["S3_SECRET_KEY"])
    for name in ("HUB_STORAGE_DIR", "HUB_UPLOAD_DIR", "HUB_SPARQL_STORE_DIR"):
        env.pop(name, None)  # under this node's var dir
    return env


@pytest.fixture
def nodes(tmp_path, settings, s3_server):
    """(url of A, url of B, worker C's folder): two web-only ``hub_serve`` nodes and a Celery worker."""
    from workers.celery import app

    use_s3_bucket(settings, s3_server)
    app.control.purge()  # messages left by tests that queued jobs without a worker
    started, urls = [], []
    (tmp_path / "c").mkdir()
    worker = start_worker(tmp_path / "c", node_env(tmp_path / "c", settings), "worker-c")
    started.append(worker)
    try:
        for name in ("a", "b"):
            root, port = tmp_path / name, free_port()
            root.mkdir()
            log = open(root / "serve.log", "w")  # noqa: SIM115 - closed with the process
            proc = subprocess.Popen(
                [sys.executable, "manage.py", "hub_serve", "--bind", f"127.0.0.1:{port}", "--web-workers", "1",
                 "--celery-workers", "0", "--no-migrate", "--no-demo"],
                cwd=ROOT, env=node_env(root, settings), stdout=log, stderr=subprocess.STDOUT)
            started.append(proc)
            urls.append(f"http://127.0.0.1:{port}")
        for url, proc in zip(urls, started[1:], strict=True):
            wait_for_port(int(url.rsplit(":", 1)[1]), timeout=180, proc=proc)
        yield urls[0], urls[1], tmp_path / "c"
    finally:
        for proc in started[1:]:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)
        stop_process(worker)


def local_files(root: Path) -> list[Path]:
    """What a node keeps under its uploads folder."""
    folder = root / "uploads"
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_async_inference_and_resumable_uploads_cross_nodes(nodes, owner, publish, tmp_path):
    from hub.accounts.models import ApiToken

    a, b, worker_root = nodes
    _, token = ApiToken.issue(owner, scope="write")
    auth = {"Authorization": f"Bearer {token}"}
    model = publish(owner, "mlp", {"mlp.onnx": MLP})[1]

    # asynchronous inference asked of B, run by worker C: the inputs are in the object store, not on B's disk
    x = np.random.default_rng(7).standard_normal((3, 784)).astype(np.float32)
    response = requests.post(f"{b}/api/v1/artifacts/alice/mlp/versions/latest/infer", headers=auth, timeout=60,
                             json={"inputs": {"x": x.tolist()}, "mode": "async"})
    assert response.status_code == 202, response.text
    job = wait_for_job(response.json()["id"], timeout=180)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log)
    outputs = Version.objects.get(pid=job.result["pid"])
    assert [p.target_id for p in outputs.provenance.all()] == [model.pk]
    with get_blob_store().open(outputs.files.get(path="outputs.npz").blob_id) as stream:
        got = np.load(io.BytesIO(stream.read()))["logits"]
    np.testing.assert_allclose(got, models.reference(MLP, {"x": x})["logits"], rtol=1e-5, atol=1e-6)
    assert not [key for key, _ in get_blob_store().iter_staged() if key.startswith(f"jobs/{job.pk}/")], \
        "a finished job's staged inputs are removed from the store"

    # a resumable upload whose chunks alternate between A and B
    data = os.urandom(2_500_000)
    sha = hashlib.sha256(data).hexdigest()
    opened = requests.post(f"{a}/api/v1/uploads/", headers=auth, json={"size": len(data), "expected_sha256": sha},
                           timeout=30)
    assert opened.status_code == 201, opened.text
    uid = opened.json()["id"]
    bounds = [0, 1_000_000, 1_700_000, len(data)]
    for number, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False)):
        node = (b, a)[number % 2]
        held = requests.get(f"{node}/api/v1/uploads/{uid}", headers=auth, timeout=30)
        assert held.headers["Upload-Offset"] == str(start), "every node tells the same offset"
        sent = requests.put(f"{node}/api/v1/uploads/{uid}", data=data[start:end], timeout=60,
                            headers={**auth, "Content-Range": f"bytes {start}-{end - 1}/{len(data)}",
                                     "Content-Type": "application/octet-stream"})
        assert sent.status_code == 200 and sent.headers["Upload-Offset"] == str(end), sent.text
    stale = requests.put(f"{a}/api/v1/uploads/{uid}", data=data[:10], timeout=30,
                         headers={**auth, "Content-Range": f"bytes 0-9/{len(data)}"})
    assert stale.status_code == 409 and stale.json()["offset"] == len(data)
    done = requests.post(f"{b}/api/v1/uploads/{uid}/complete", headers=auth, json={}, timeout=60)
    assert done.status_code == 200 and done.json()["sha256"] == sha, done.text
    requests.post(f"{b}/api/v1/artifacts/", headers=auth, json={"kind": "dataset", "name": "big"}, timeout=30)
    body = {"files": [{"path": "data.bin", "upload": uid}], "metadata": valid_metadata("dataset")}
    version = requests.post(f"{a}/api/v1/artifacts/alice/big/versions/", headers=auth, json=body, timeout=60)
    assert version.status_code == 201, version.text
    assert Upload.objects.get(pk=uid).state == Upload.State.CONSUMED
    got = requests.get(f"{b}/api/v1/artifacts/alice/big/versions/latest/files/data.bin", headers=auth, timeout=60)
    assert got.status_code == 200 and hashlib.sha256(got.content).hexdigest() == sha
    assert not [key for key, _ in get_blob_store().iter_staged() if key.startswith(f"uploads/{uid}/")]
    for node in ("a", "b"):
        assert local_files(tmp_path / node) == [], f"node {node} keeps files another node would need"
    assert local_files(worker_root) == []

"""Two web nodes and a worker on "another machine": each has its own ``HUB_VAR_DIR`` and they share only
PostgreSQL, Redis, the S3 store (SeaweedFS) and the SPARQL store (``oxigraph serve``). Nothing one node needs may
be on another node's disk, and what one node changes the other answers at once: asynchronous, large and chained
inference asked of a web node runs on worker C; a resumable upload whose chunks alternate between A and B
completes and is published; a share link made on A opens restricted files on B and, revoked on A, closes
there; search, SPARQL and the API on one node follow a publish, a visibility change and a
deletion made on the other; the collector, run on C, removes what every node left staged."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import requests

from hub.registry.models import Upload, Version
from hub.storage import get_blob_store
from tests.conftest import (
    ROOT,
    installed_profile,
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


def sparql_url() -> str:
    """The shared Oxigraph server `scripts/services.sh` starts (as `make test` does)."""
    url = os.environ.get("HUB_TEST_SPARQL_URL", "")
    if not url:
        (pytest.fail if installed_profile() else pytest.skip)("needs `oxigraph serve`: run through `make test`")
    return url


def node_env(root: Path, settings) -> dict[str, str]:
    """A node's environment: its own var dir (uploads, static files), the shared database and broker
    (``worker_env``), the shared S3 bucket and SPARQL server; inputs over 1 MiB run as jobs (large inference)."""
    store = settings.HUB_STORAGE
    env = worker_env(root, HUB_VAR_DIR=str(root), HUB_STORAGE="s3", HUB_S3_ENDPOINT=store["S3_ENDPOINT"],
                     HUB_S3_BUCKET=store["S3_BUCKET"], HUB_S3_ACCESS_KEY=store["S3_ACCESS_KEY"],
                     HUB_S3_SECRET_KEY=store["S3_SECRET_KEY"], HUB_SPARQL_STORE_URL=sparql_url(),
                     HUB_INFER_SYNC_MAX_MB="1")
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


def outputs_of(job) -> dict[str, np.ndarray]:
    """The arrays a succeeded inference job published (read from the shared store)."""
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log)
    version = Version.objects.get(pid=job.result["pid"])
    with get_blob_store().open(version.files.get(path="outputs.npz").blob_id) as stream:
        return dict(np.load(io.BytesIO(stream.read())))


def staged_keys(prefix: str) -> list[str]:
    return [key for key, _ in get_blob_store().iter_staged() if key.startswith(prefix)]


def eventually(check, timeout: float = 10.0):
    """``check()``'s first true answer within ``timeout`` s (what one node wrote, read on the other)."""
    deadline = time.monotonic() + timeout
    while not (answer := check()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return answer


def test_two_web_nodes_and_a_worker_share_only_the_database_broker_object_store_and_sparql(nodes, owner, publish,
                                                                                          tmp_path, settings):
    from hub.accounts.models import ApiToken

    a, b, worker_root = nodes
    _, token = ApiToken.issue(owner, scope="write")
    auth = {"Authorization": f"Bearer {token}"}
    model = publish(owner, "mlp", {"mlp.onnx": MLP})[1]
    publish(owner, "fan", {"fan.onnx": models.fan_out()})
    inference_asked_of_a_web_node_runs_on_the_worker(a, b, auth, model)
    title = "Cross-node survey of plasma turbulence"
    resumable_upload_across_nodes_then_published(a, b, auth, title)
    changes_on_one_node_are_answered_by_the_other(a, b, auth, title)
    a_share_link_made_on_one_node_opens_and_closes_on_the_other(a, b, auth, publish(owner, "reviewed")[1])
    the_collector_on_the_worker_removes_what_every_node_left_staged(a, b, auth, node_env(worker_root, settings))
    for node in ("a", "b"):
        assert local_files(tmp_path / node) == [], f"node {node} keeps files another node would need"
        assert not (tmp_path / node / "sparql").exists(), f"node {node} keeps a SPARQL store of its own"
    assert local_files(worker_root) == []


def inference_asked_of_a_web_node_runs_on_the_worker(a: str, b: str, auth: dict, model: Version) -> None:
    """Async (B), large (B: over the nodes' 1 MiB, so a job) and a chain (A): the inputs are in the object store,
    not on the web node's disk, and are removed once the job ends."""
    x = np.random.default_rng(7).standard_normal((3, 784)).astype(np.float32)
    response = requests.post(f"{b}/api/v1/artifacts/alice/mlp/versions/latest/infer", headers=auth, timeout=60,
                             json={"inputs": {"x": x.tolist()}, "mode": "async"})
    assert response.status_code == 202, response.text
    job = wait_for_job(response.json()["id"], timeout=180)
    np.testing.assert_allclose(outputs_of(job)["logits"], models.reference(MLP, {"x": x})["logits"],
                               rtol=1e-5, atol=1e-6)
    assert [p.target_id for p in Version.objects.get(pid=job.result["pid"]).provenance.all()] == [model.pk]
    assert not staged_keys(f"jobs/{job.pk}/"), "a finished job's staged inputs are removed from the store"

    large = np.random.default_rng(8).standard_normal((400, 784)).astype(np.float32)  # 1.2 MiB
    body = io.BytesIO()
    np.save(body, large)
    response = requests.post(f"{b}/api/v1/artifacts/alice/mlp/versions/latest/infer?mode=auto", timeout=60,
                             data=body.getvalue(), headers={**auth, "Content-Type": "application/x-npy"})
    assert response.status_code == 202 and response.json()["params"]["reason"] == "large inputs", response.text
    job = wait_for_job(response.json()["id"], timeout=180)
    np.testing.assert_allclose(outputs_of(job)["logits"], models.reference(MLP, {"x": large})["logits"],
                               rtol=1e-5, atol=1e-5)
    assert not staged_keys(f"jobs/{job.pk}/")

    response = requests.post(f"{a}/api/v1/collaborate", headers=auth, timeout=60,
                             json={"models": ["alice/mlp", "alice/fan"], "inputs": x.tolist(), "mode": "async"})
    assert response.status_code == 202, response.text
    got = outputs_of(wait_for_job(response.json()["id"], timeout=180))
    logits = models.reference(MLP, {"x": x})["logits"]
    np.testing.assert_allclose(got["p"], logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["q"], -logits, rtol=1e-5, atol=1e-6)


def resumable_upload_across_nodes_then_published(a: str, b: str, auth: dict, title: str) -> None:
    """A resumable upload whose chunks alternate between A and B, completed on B, published on A as ``big``."""
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
    body = {"files": [{"path": "data.bin", "upload": uid}], "metadata": valid_metadata("dataset", title=title)}
    version = requests.post(f"{a}/api/v1/artifacts/alice/big/versions/", headers=auth, json=body, timeout=60)
    assert version.status_code == 201, version.text
    assert Upload.objects.get(pk=uid).state == Upload.State.CONSUMED
    got = requests.get(f"{b}/api/v1/artifacts/alice/big/versions/latest/files/data.bin", headers=auth, timeout=60)
    assert got.status_code == 200 and hashlib.sha256(got.content).hexdigest() == sha
    assert not staged_keys(f"uploads/{uid}/")


def changes_on_one_node_are_answered_by_the_other(a: str, b: str, auth: dict, title: str) -> None:
    """What A published, B's search, SPARQL (the shared Oxigraph server) and API show to the public; A makes it
    private and B hides it everywhere; public again, then deleted on B: A no longer shows it, and its PID is a
    tombstone."""

    def found(node: str) -> bool:
        listed = requests.get(f"{node}/api/v1/artifacts/", params={"q": "plasma turbulence"}, timeout=30)
        assert listed.status_code == 200, listed.text
        return "big" in [item["name"] for item in listed.json()["results"]]

    def in_sparql(node: str) -> bool:
        asked = requests.get(f"{node}/sparql", params={"query": f'ASK {{ ?s <https://schema.org/name> "{title}" }}'},
                             headers={"Accept": "application/sparql-results+json"}, timeout=30)
        assert asked.status_code == 200, asked.text
        return asked.json()["boolean"]

    def shown(node: str) -> int:
        return requests.get(f"{node}/api/v1/artifacts/alice/big/", timeout=30).status_code

    assert eventually(lambda: found(b)) and in_sparql(b) and shown(b) == 200 and in_sparql(a)
    held = requests.post(f"{sparql_url()}/query", data={"query": f'ASK {{ GRAPH ?g {{ ?s ?p "{title}" }} }}'},
                         headers={"Accept": "application/sparql-results+json"}, timeout=30)
    assert held.json()["boolean"], "the nodes' SPARQL store is the shared server"
    made = requests.patch(f"{a}/api/v1/artifacts/alice/big/", headers=auth, json={"visibility": "private"}, timeout=30)
    assert made.status_code == 200, made.text
    assert shown(b) == 404 and not in_sparql(b) and eventually(lambda: not found(b))
    made = requests.patch(f"{a}/api/v1/artifacts/alice/big/", headers=auth, json={"visibility": "public"}, timeout=30)
    assert made.status_code == 200 and in_sparql(b) and eventually(lambda: found(b))
    deleted = requests.delete(f"{b}/api/v1/artifacts/alice/big/?reason=withdrawn", headers=auth, timeout=30)
    assert deleted.status_code == 204, deleted.text
    assert shown(a) == 404 and not in_sparql(a) and eventually(lambda: not found(a))
    tombstone = requests.get(f"{a}/{Version.objects.get(artifact__name='big').pid}", timeout=30)
    assert tombstone.status_code == 410 and "withdrawn" in tombstone.text


def a_share_link_made_on_one_node_opens_and_closes_on_the_other(a: str, b: str, auth: dict, version: Version) -> None:
    """A share link to restricted files made on A opens them on B; revoked on A, B refuses it at the next request
    (the token's sha256 is in PostgreSQL, nothing is cached per node)."""
    Version.objects.filter(pk=version.pk).update(files_access="restricted")
    base = f"/api/v1/artifacts/{version.artifact.full_name}/versions/{version.label}"
    url = f"{b}{base}/files/weights.bin"
    assert requests.get(url, allow_redirects=False, timeout=30).status_code == 403
    link = requests.post(f"{a}{base}/share-links/", json={"note": "reviewer"}, headers=auth, timeout=30).json()
    opened = requests.get(url, headers={"X-Share-Token": link["token"]}, allow_redirects=False, timeout=30)
    assert opened.status_code in (200, 302), opened.text  # 302: a presigned URL of the shared store
    assert requests.delete(f"{a}{base}/share-links/{link['id']}", headers=auth, timeout=30).status_code == 204
    closed = requests.get(url, headers={"X-Share-Token": link["token"]}, allow_redirects=False, timeout=30)
    assert closed.status_code == 403 and closed.headers["X-Error-Code"] == "access_restricted"


def the_collector_on_the_worker_removes_what_every_node_left_staged(a: str, b: str, auth: dict, worker_env: dict
                                                                    ) -> None:
    """Parts of an abandoned upload sent to A, the inputs of a job that died on B's side (gone from the
    database), and an open upload's part on B: ``hub_gc`` on C removes the first two and keeps the third."""
    uploads = []
    for node in (a, b):
        opened = requests.post(f"{node}/api/v1/uploads/", headers=auth, timeout=30,
                               json={"size": 20, "expected_sha256": hashlib.sha256(b"x" * 20).hexdigest()})
        assert opened.status_code == 201, opened.text
        uid = opened.json()["id"]
        sent = requests.put(f"{node}/api/v1/uploads/{uid}", data=b"x" * 10, timeout=30, headers={
            **auth, "Content-Range": "bytes 0-9/20", "Content-Type": "application/octet-stream"})
        assert sent.status_code == 200, sent.text
        uploads.append(uid)
    abandoned, open_ = uploads
    Upload.objects.filter(pk=abandoned).update(expires=Upload.objects.get(pk=abandoned).created)
    dead_job = uuid.uuid4()
    leftover = Path(worker_env["HUB_VAR_DIR"]) / "inputs.npz"
    leftover.write_bytes(b"inputs of a job whose row is gone")
    get_blob_store().put_staged(f"jobs/{dead_job}/inputs.npz", leftover)
    assert staged_keys(f"uploads/{abandoned}/") and staged_keys(f"uploads/{open_}/")
    collected = subprocess.run([sys.executable, "manage.py", "hub_gc", "--grace-hours", "0"], cwd=ROOT,
                               env=worker_env, capture_output=True, text=True,
                               timeout=120)
    assert collected.returncode == 0, collected.stderr
    assert not staged_keys(f"uploads/{abandoned}/") and not staged_keys(f"jobs/{dead_job}/")
    assert Upload.objects.get(pk=abandoned).state == Upload.State.ABORTED
    assert staged_keys(f"uploads/{open_}/"), "an open upload's parts are kept"
    leftover.unlink()

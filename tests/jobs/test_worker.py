"""Jobs through a real Celery worker process and a real Redis broker."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from django.conf import settings as django_settings

from hub.jobs.models import Job
from hub.storage import blob_key
from tests.conftest import ROOT, stop_process

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """A Celery worker on the test database and Redis; yields the blob directory it uses."""
    broker = os.environ.get("HUB_BROKER_URL", "")
    if not broker.startswith("redis://"):
        pytest.skip("needs Redis: run through `make test` (sets HUB_BROKER_URL)")
    db = django_settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.postgresql":
        pytest.skip("needs PostgreSQL: run through `make test` (sets DATABASE_URL)")
    root = tmp_path_factory.mktemp("worker")
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "HUB_STORAGE": "filesystem",
        "HUB_STORAGE_DIR": str(root / "blobs"),
        "HUB_UPLOAD_DIR": str(root / "uploads"),
    }
    log = open(root / "worker.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", "convert,cpu", "--concurrency", "1",
         "--pool", "solo", "--loglevel", "INFO", "--hostname", f"test-{os.getpid()}@%h"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    time.sleep(1.0)
    if proc.poll() is not None:
        raise RuntimeError((root / "worker.log").read_text())
    yield root
    stop_process(proc)
    log.close()


def wait_for_job(job_id, timeout: float = 60.0) -> Job:
    """Poll the Job row until it is final (pulpcore's monitor_task)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        if job.is_final:
            return job
        time.sleep(0.2)
    raise TimeoutError(f"job {job_id} still {job.state} after {timeout}s")


@pytest.fixture
def shared_storage(settings, worker):
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(worker / "blobs")}
    settings.HUB_UPLOAD_DIR = worker / "uploads"
    return worker


def test_fixity_job_runs_on_the_worker(shared_storage, api, publish, owner):
    publish(owner, "fix", {"a.bin": b"alpha", "b.bin": b"beta"})
    response = api.post("/api/v1/artifacts/alice/fix/versions/1/fixity")
    assert response.status_code == 202
    body = response.json()
    assert body["state"] == "queued" and response["Location"] == body["url"]
    job = wait_for_job(body["id"])
    assert job.state == "succeeded", (job.error_code, job.error_detail)
    assert job.result["ok"] is True and {f["path"] for f in job.result["files"]} == {"a.bin", "b.bin"}
    assert job.worker and job.attempts == 1
    shown = api.get(f"/api/v1/jobs/{job.pk}/").json()
    assert shown["state"] == "succeeded" and shown["requester"] == "alice" and shown["duration"] >= 0
    assert [j["id"] for j in api.get("/api/v1/jobs/").json()["results"]] == [str(job.pk)]


def test_fixity_finds_a_corrupted_blob(shared_storage, api, publish, owner):
    import hashlib

    publish(owner, "rot", {"a.bin": b"intact bytes"})
    path = shared_storage / "blobs" / blob_key(hashlib.sha256(b"intact bytes").hexdigest())
    path.chmod(0o644)
    path.write_bytes(b"bit rot!")
    job = wait_for_job(api.post("/api/v1/artifacts/alice/rot/versions/1/fixity").json()["id"])
    assert job.state == "succeeded" and job.result["ok"] is False
    assert any("CORRUPT" in line["message"] for line in job.log)

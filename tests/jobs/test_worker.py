"""Jobs through a real Celery worker process and a real Redis broker."""

from __future__ import annotations

import pytest

from hub.storage import blob_key
from tests.conftest import wait_for_job

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_fixity_job_runs_on_the_worker(shared_storage, api, publish, owner):
    publish(owner, "fix", {"a.bin": b"alpha", "b.bin": b"beta"})
    response = api.post("/api/v1/artifacts/alice/fix/versions/1/fixity")
    assert response.status_code == 202
    body = response.json()
    assert body["state"] == "queued" and response["Location"] == body["url"]
    job = wait_for_job(body["id"])
    assert job.state == "succeeded", (job.error_code, job.error_detail)
    assert job.result["ok"] is True and {f["path"] for f in job.result["files"]} == {"a.bin", "b.bin", "README.md"}
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

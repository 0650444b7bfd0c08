"""Job cancellation through the API, the client, the CLI and the job page, with a real Celery worker:
queued jobs never run, running ones stop, and nothing they had made is left (no version, no blob, no folder)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from django.test import Client

from hub.jobs.models import Job
from hub.registry.models import File, Version
from hub.storage import get_blob_store
from tests.conftest import client_for, start_worker, stop_process, wait_for_job, worker_env
from tests.conversions.test_worker import conversion_job, publish_model
from tests.jobs.test_faults import forest
from tests.jobs.test_recovery import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def root(tmp_path, settings):
    from workers.celery import app

    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(tmp_path / "blobs")}
    settings.HUB_UPLOAD_DIR = tmp_path / "uploads"
    app.control.purge()
    (tmp_path / "tmp").mkdir()
    return tmp_path


def queued_conversion(api, root, name: str) -> Job:
    """Publishing a model queues its conversion (no worker runs yet)."""
    publish_model(api, name, {"forest.pkl": forest(root, sum(name.encode())).read_bytes()})
    return conversion_job("1", name)


def test_a_queued_job_is_cancelled_at_once_and_never_runs(root, api, owner, other, publish):
    job = queued_conversion(api, root, "waiting")
    assert client_for(other).post(f"/api/v1/jobs/{job.pk}/cancel").status_code == 404  # not theirs
    assert client_for(owner, "read").post(f"/api/v1/jobs/{job.pk}/cancel").status_code == 403
    response = api.post(f"/api/v1/jobs/{job.pk}/cancel")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "cancelled" and body["error_code"] == "cancelled" and body["finished"]
    again = api.post(f"/api/v1/jobs/{job.pk}/cancel")
    assert again.status_code == 409 and again.json()["code"] == "job_final"
    worker = start_worker(root, worker_env(root), "after-cancel")
    try:
        publish(owner, "later", {"a.bin": b"a later job"})
        fixity = api.post("/api/v1/artifacts/alice/later/versions/1/fixity").json()
        assert wait_for_job(fixity["id"]).state == "succeeded"  # the worker took the queue, in order
    finally:
        stop_process(worker)
    job.refresh_from_db()
    assert job.state == "cancelled" and job.attempts == 0 and job.worker == ""
    assert not Version.objects.filter(artifact__name="waiting", label="1-onnx").exists()


@pytest.mark.parametrize("pool", ["prefork", "solo"])  # revoked with terminate / noticed by the heartbeat
def test_a_running_conversion_stops_and_leaves_nothing(pool, root, api):
    env = worker_env(root, HUB_JOB_HEARTBEAT_S="1", TMPDIR=str(root / "tmp"))
    worker = start_worker(root, env, f"cancel-{pool}", pool=pool)
    try:
        job = queued_conversion(api, root, f"running-{pool}")
        wait_for(lambda: Job.objects.filter(pk=job.pk, state="running").exists(), 60, "never started")
        time.sleep(0.5)  # inside the conversion (its sandbox takes seconds)
        assert list((root / "tmp").glob("hpcfair-job-*"))  # its work folder
        asked = time.monotonic()
        response = api.post(f"/api/v1/jobs/{job.pk}/cancel")
        assert response.status_code == 202 and response.json()["state"] == "running", response.content
        job = wait_for_job(job.pk, timeout=60)
        print(f"{pool}: the running job stopped {time.monotonic() - asked:.2f} s after the cancel")
        assert job.state == "cancelled" and job.error_code == "cancelled", (job.state, job.log[-4:])
        assert worker.poll() is None  # the worker lives on
        assert not Version.objects.filter(artifact__name=f"running-{pool}", label="1-onnx").exists()
        referenced = set(File.objects.values_list("blob_id", flat=True))
        stored = {sha256 for sha256, _ in get_blob_store().iter_blobs()}
        assert stored == referenced  # no blob of a half-published version
        assert not list((root / "tmp").glob("hpcfair-*"))  # the job's work folder went too
        again = queued_conversion(api, root, f"next-{pool}")  # and the next job runs normally
        assert wait_for_job(again.pk, timeout=120).state == "succeeded"
    finally:
        stop_process(worker)


def test_the_artifact_s_owner_may_cancel_another_user_s_job_on_it_without_reading_it(root, owner, other, publish):
    _, version = publish(owner, "shared", {"a.bin": b"owned by alice"})
    theirs = Job.objects.create(kind="fixity", requester=other, version=version, params={"secret": "x"})
    response = client_for(owner).post(f"/api/v1/jobs/{theirs.pk}/cancel")
    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    assert "params" not in response.json() and "log" not in response.json()
    _, elsewhere = publish(other, "own", {"a.bin": b"owned by mallory"})
    mine = Job.objects.create(kind="fixity", requester=other, version=elsewhere)
    assert client_for(owner).post(f"/api/v1/jobs/{mine.pk}/cancel").status_code == 404


def test_the_client_and_the_cli_cancel(root, api, owner, live_server):
    from hpcfair import HubClient
    from hpcfair.errors import HubError

    token = api._credentials["HTTP_AUTHORIZATION"].split()[1]
    client = HubClient(live_server.url, token)
    first, second = queued_conversion(api, root, "by-client"), queued_conversion(api, root, "by-cli")
    assert client.cancel(str(first.pk))["state"] == "cancelled"
    with pytest.raises(HubError) as refused:
        client.cancel(str(first.pk))
    assert refused.value.code == "job_final"
    env = {**os.environ, "HPCFAIR_ENDPOINT": live_server.url, "HPCFAIR_TOKEN": token}
    done = subprocess.run([sys.executable, "-m", "hpcfair.cli", "jobs", "cancel", str(second.pk)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "cancelled" in done.stdout, done.stdout + done.stderr
    second.refresh_from_db()
    assert second.state == "cancelled"


def test_the_job_page_has_a_cancel_button(root, api, owner):
    job = queued_conversion(api, root, "by-page")
    browser = Client()
    browser.force_login(owner)
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert f'action="/jobs/{job.pk}/cancel"' in page and "Cancel job" in page
    assert browser.get(f"/jobs/{job.pk}/cancel").status_code == 405  # a POST, with its CSRF token
    followed = browser.post(f"/jobs/{job.pk}/cancel", follow=True).content.decode()
    assert "Job cancelled." in followed and "Cancel job" not in followed and "state-cancelled" in followed
    job.refresh_from_db()
    assert job.state == "cancelled"

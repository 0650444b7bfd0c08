"""Fetched data (``hub.registry.fetch``): the hub reads an allow-listed URL into a resumable upload, hashed as it
reads, bounded (size, deadline, redirects); from a loopback HTTP server and from the suite's SeaweedFS bucket."""

from __future__ import annotations

import hashlib
import io
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from hub.jobs import kinds
from hub.jobs.models import Job
from hub.jobs.runner import execute
from hub.registry.models import Upload
from hub.storage import get_blob_store

pytestmark = pytest.mark.django_db

DATA = os.urandom(3_000_000)


class Handler(BaseHTTPRequestHandler):
    flaky_served = 0

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        host = f"{self.server.server_address[0]}:{self.server.server_address[1]}"
        if self.path == "/redirect-here":
            return self._redirect(f"http://{host}/data.bin")
        if self.path == "/redirect-away":  # the same server under a name the allow list does not hold
            return self._redirect(f"http://localhost:{self.server.server_address[1]}/data.bin")
        if self.path == "/loop":
            return self._redirect("/loop")
        if self.path == "/nosize":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"abc")
            return None
        if self.path not in ("/data.bin", "/flaky.bin"):
            self.send_error(404)
            return None
        start = int(self.headers.get("Range", "bytes=0-")[6:].rstrip("-") or 0)
        body = DATA[start:]
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(DATA) - 1}/{len(DATA)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.path == "/flaky.bin" and Handler.flaky_served == 0:
            Handler.flaky_served += 1
            self.wfile.write(body[:1_000_000])  # then the connection drops
            self.close_connection = True
            return None
        self.wfile.write(body)
        return None

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def server(settings):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    settings.HUB_FETCH_ALLOWED = [url + "/"]
    Handler.flaky_served = 0
    yield url
    httpd.shutdown()
    httpd.server_close()


def start(api, url: str) -> dict:
    response = api.post("/api/v1/uploads/", {"fetch": url}, format="json")
    assert response.status_code == 202, response.content
    return response.json()


def run(body: dict) -> Job:
    job = Job.objects.create(kind="fetch", requester=Upload.objects.get(pk=body["id"]).owner,
                             params={"upload": body["id"]}) if body.get("again") else Job.objects.get(
        pk=body["job"]["id"])
    execute(str(job.pk), kinds.get("fetch").run)
    job.refresh_from_db()
    return job


def test_a_fetch_reads_the_url_into_the_store_hashed_and_a_version_takes_it(api, server, backend):
    body = start(api, server + "/redirect-here")
    assert body["job"]["kind"] == "fetch" and body["filename"] == "redirect-here"
    job = run(body)
    assert job.state == "succeeded", (job.error_code, job.error)
    upload = Upload.objects.get(pk=body["id"])
    assert upload.state == "completed" and upload.size == len(DATA)
    assert upload.sha256 == job.result["sha256"] == hashlib.sha256(DATA).hexdigest()
    assert get_blob_store().exists(upload.sha256)
    response = api.post("/api/v1/artifacts/alice/fetched/versions/", {
        "artifact": {"kind": "dataset"}, "files": [{"path": "data.bin", "upload": body["id"]}],
        "metadata": {"title": "Fetched", "description": "d", "creators": [{"name": "A"}], "license": "MIT"}},
        format="json")
    assert response.status_code == 201, response.content
    assert "location" not in response.json()["files"][0]  # fetched: the hub holds the bytes


def test_a_broken_transfer_resumes_where_it_stopped(api, server):
    body = start(api, server + "/flaky.bin")
    first = run(body)
    assert first.state == "failed" and first.error_code == "fetch_failed"
    held = Upload.objects.get(pk=body["id"]).received
    assert 0 < held < len(DATA)  # what arrived is kept in the upload's parts
    again = run({**body, "again": True})
    assert again.state == "succeeded", (again.error_code, again.error)
    assert Upload.objects.get(pk=body["id"]).sha256 == hashlib.sha256(DATA).hexdigest()
    assert "resuming at byte" in " ".join(line["message"] for line in again.log)


def test_urls_outside_the_allow_list_and_odd_schemes_are_refused_before_any_job(api, server, settings):
    for url, code in [("http://10.0.0.1/data.bin", "fetch_not_allowed"), ("file:///etc/passwd", "invalid"),
                      (server.replace("127.0.0.1", "user:pw@127.0.0.1") + "/data.bin", "invalid"),
                      (server + "evil.example/data.bin", "fetch_not_allowed")]:
        response = api.post("/api/v1/uploads/", {"fetch": url}, format="json")
        assert response.status_code in (400, 403) and response["X-Error-Code"] == code, (url, response.content)
    settings.HUB_FETCH_ALLOWED = []
    response = api.post("/api/v1/uploads/", {"fetch": server + "/data.bin"}, format="json")
    assert response["X-Error-Code"] == "fetch_not_allowed" and "fetching is off" in response.json()["detail"]
    assert not Job.objects.exists() and not Upload.objects.exists()


@pytest.mark.parametrize(("path", "code"), [("/redirect-away", "fetch_not_allowed"), ("/loop", "fetch_not_allowed"),
                                            ("/nosize", "fetch_failed"), ("/missing", "fetch_failed")])
def test_redirects_elsewhere_endless_redirects_and_bad_answers_fail_the_job_coded(api, server, path, code):
    job = run(start(api, server + path))
    assert job.state == "failed" and job.error_code == code, job.error
    assert Upload.objects.get().received == 0


def test_a_file_past_the_size_limit_or_the_deadline_is_refused(api, server, settings):
    settings.HUB_FETCH_MAX_SIZE = len(DATA) - 1
    job = run(start(api, server + "/data.bin"))
    assert job.state == "failed" and job.error_code == "upload_too_large"
    settings.HUB_FETCH_MAX_SIZE = len(DATA)
    settings.HUB_FETCH_DEADLINE_S = 0
    job = run(start(api, server + "/data.bin"))
    assert job.state == "failed" and job.error_code == "time_limit"


def test_a_fetch_from_the_suite_s3_bucket(api, s3, settings):
    s3.client.put_object(s3.bucket, "public/set.bin", io.BytesIO(DATA), len(DATA))
    settings.HUB_FETCH_ALLOWED = [f"s3://{s3.bucket}/public/"]
    settings.HUB_REFERENCE_S3 = {"ENDPOINT": settings.HUB_STORAGE["S3_ENDPOINT"], "SECURE": False,
                                 "REGION": "us-east-1", "ACCESS_KEY": settings.HUB_STORAGE["S3_ACCESS_KEY"],
                                 "SECRET_KEY": settings.HUB_STORAGE["S3_SECRET_KEY"]}
    refused = api.post("/api/v1/uploads/", {"fetch": f"s3://{s3.bucket}/private/set.bin"}, format="json")
    assert refused["X-Error-Code"] == "fetch_not_allowed"
    body = start(api, f"s3://{s3.bucket}/public/set.bin")
    job = run(body)
    assert job.state == "succeeded", (job.error_code, job.error)
    upload = Upload.objects.get(pk=body["id"])
    assert upload.sha256 == hashlib.sha256(DATA).hexdigest() and s3.exists(upload.sha256)

"""`make run`'s embedded default, end to end: hub_serve starts granian and a Celery worker on the
filesystem broker (no Redis, SQLite, files under a private var dir); a client publishes, downloads,
and runs a job through it."""

from __future__ import annotations

import os
import time

import pytest
import requests

pytestmark = pytest.mark.slow


def test_demo_content_and_pages(embedded_hub):
    url, _, _ = embedded_hub
    home = requests.get(url + "/", timeout=10)
    assert home.status_code == 200 and "Synthetic Iris-like measurements" in home.text
    found = requests.get(url + "/api/v1/artifacts/", params={"q": "iris"}, timeout=10).json()["results"]
    assert {"demo/synthetic-iris", "demo/iris-classifier"} <= {a["full_name"] for a in found}
    found = requests.get(url + "/api/v1/artifacts/", params={"q": "iris", "kind": "dataset"}, timeout=10).json()
    found = found["results"]
    assert [a["full_name"] for a in found] == ["demo/synthetic-iris"]
    landing = requests.get(found[0]["pid_url"], timeout=10)
    assert landing.status_code == 200 and "data.csv" in landing.text
    assert requests.get(url + "/static/web/hub.css", timeout=10).status_code == 200
    assert requests.get(url + "/api/docs/", timeout=10).status_code == 200


def test_publish_download_and_a_job_on_the_embedded_worker(embedded_hub, tmp_path):
    from hpcfair import HubClient

    url, token, var = embedded_hub
    client = HubClient(url, token)
    client.create_artifact("model", "embedded-model")
    source = tmp_path / "weights.bin"
    source.write_bytes(os.urandom(5_000_000))
    version = client.create_version("demo/embedded-model", {"weights/w.bin": source}, metadata={
        "description": "Random weights.", "creators": ["Demo User"], "license": "MIT", "framework": "pytorch",
        "task": "regression", "extra": {"x": 1}})
    dest = client.download_file("demo/embedded-model", "latest", "weights/w.bin", tmp_path / "back.bin")
    assert dest.read_bytes() == source.read_bytes()
    job = client.request("POST", f"artifacts/demo/embedded-model/versions/{version['version']}/fixity").json()
    deadline = time.monotonic() + 60
    while job["state"] not in ("succeeded", "failed") and time.monotonic() < deadline:
        time.sleep(0.3)
        job = client.request("GET", job["url"]).json()
    assert job["state"] == "succeeded" and job["result"]["ok"] is True, job
    assert list((var / "broker" / "control").glob("*.exchange"))  # the broker's tables stay under var/

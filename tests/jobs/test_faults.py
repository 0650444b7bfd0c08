"""Faults heal by themselves: ``hub_serve`` (granian + a Celery worker on the embedded broker) while its worker
is SIGKILLed again and again in the middle of conversions. The site answers throughout, the worker comes
back, and every job ends succeeded or failed with a clear code; nothing is left half-published."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import ROOT, wait_for_port
from tests.conversions import models
from tests.ports import free_port

pytestmark = [pytest.mark.slow]

KILLS = 3
FINAL = {"succeeded", "failed", "cancelled"}


class Hub:
    def __init__(self, url: str, token: str, proc: subprocess.Popen, log: Path) -> None:
        self.url, self.proc, self.log = url, proc, log
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        return self.session.request(method, f"{self.url}/api/v1/{path}", timeout=30, **kwargs)

    def jobs(self) -> list[dict]:
        return self.api("GET", "jobs/", params={"page_size": 100}).json()["results"]

    def readies(self) -> int:
        return len(re.findall(r"embedded\d*@\S+ ready\.", self.log.read_text(errors="replace")))


@pytest.fixture
def hub(tmp_path):
    """A private ``hub_serve`` (SQLite, filesystem broker, files under tmp_path) with quick reaping."""
    var = tmp_path / "var"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"}}
    env.update(HUB_VAR_DIR=str(var), HUB_PUBLIC_URL=f"http://127.0.0.1:{port}", HUB_CUBE_ON_CONVERT="off",
               HUB_JOB_HEARTBEAT_S="1", HUB_JOB_REAP_S="2", HUB_JOB_QUEUED_STALE_S="20", TMPDIR=str(tmp_path))
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "manage.py", "hub_serve", "--bind", f"127.0.0.1:{port}", "--no-demo"],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, timeout=120, proc=proc)
        token = subprocess.run([sys.executable, "manage.py", "hub_token", "demo", "--create", "--scope", "write"],
                               cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout.strip()
        yield Hub(f"http://127.0.0.1:{port}", token.splitlines()[-1], proc, log)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)


def forest(folder: Path, seed: int, trees: int = 10) -> Path:
    """A pickled random forest (a different one per seed: the hub refuses identical versions)."""
    import pickle

    from sklearn.ensemble import RandomForestClassifier

    features, labels = models._iris_like()
    path = folder / f"forest-{seed}.pkl"
    with open(path, "wb") as handle:
        pickle.dump(RandomForestClassifier(n_estimators=trees, max_depth=5, random_state=seed).fit(features, labels),
                    handle)
    return path


def publish_forest(hub: Hub, name: str, model: Path) -> None:
    assert hub.api("POST", "artifacts/", json={"kind": "model", "name": name, "title": name}).status_code == 201
    with open(model, "rb") as handle:
        response = hub.api("POST", f"artifacts/demo/{name}/versions/", files={"files": ("forest.pkl", handle)}, data={
            "metadata": json.dumps({"title": name, "description": "A random forest.", "creators": [{"name": "Demo"}],
                                    "license": "MIT", "task": "classification"})})
    assert response.status_code == 201, response.text


def worker_pid(job: dict, parent: int) -> int | None:
    """The pid of the process running ``job``, if it is hub_serve's own worker (we only kill our children)."""
    pid = int(job["worker"].rpartition(":")[2])
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return pid if int(stat.rsplit(")", 1)[1].split()[1]) == parent else None


def test_killing_the_worker_again_and_again_heals(hub, tmp_path):
    answers: list[object] = []
    stop = threading.Event()

    def watch() -> None:  # the site, as a visitor sees it, every 0.2 s
        while not stop.is_set():
            for path in ("/", "/api/v1/artifacts/"):
                try:
                    answers.append(requests.get(hub.url + path, timeout=10).status_code)
                except requests.RequestException as exc:
                    answers.append(repr(exc))
            stop.wait(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    for index in range(4):  # each publish queues a conversion (several seconds of work each)
        publish_forest(hub, f"forest-{index}", forest(tmp_path, index))
    figures = []
    try:
        for _ in range(KILLS):
            deadline = time.monotonic() + 120
            while True:
                running = [job for job in hub.jobs() if job["state"] == "running" and job["worker"]]
                pid = worker_pid(running[0], hub.proc.pid) if running else None
                if pid:
                    break
                assert time.monotonic() < deadline, "no job started"
                time.sleep(0.2)
            time.sleep(0.5)
            readies = hub.readies()
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            requeued = ready = None
            while requeued is None or ready is None:
                now = time.monotonic()
                assert now - killed_at < 90, "the worker did not come back"
                shown = hub.api("GET", f"jobs/{running[0]['id']}/").json()
                if requeued is None and (shown["state"] != "running" or shown["worker"] != running[0]["worker"]):
                    requeued = now - killed_at
                if ready is None and hub.readies() > readies:
                    ready = now - killed_at
                time.sleep(0.1)
            figures.append((ready, requeued))
        deadline = time.monotonic() + 300
        while not all(job["state"] in FINAL for job in hub.jobs()):
            jobs = hub.jobs()
            assert time.monotonic() < deadline, [(j["state"], j["attempts"]) for j in jobs]
            time.sleep(0.5)
    finally:
        stop.set()
        watcher.join()
    jobs = hub.jobs()
    print("worker back after (s):", [round(r, 2) for r, _ in figures],
          "killed job requeued after (s):", [round(q, 2) for _, q in figures])
    assert hub.proc.poll() is None, "hub_serve itself stopped"
    assert len(answers) > 50 and set(answers) == {200}, [a for a in answers if a != 200][:5]
    assert len(jobs) == 4
    for job in jobs:
        assert job["state"] == "succeeded" or job["error_code"] == "worker_lost", job
    lost = [job for job in jobs if job["attempts"] > 1]
    assert lost and all(any("was lost" in line["message"] for line in job["log"]) for job in lost)
    for index in range(4):  # exactly one conversion result per succeeded job, none for a failed one
        labels = [v["version"] for v in hub.api("GET", f"artifacts/demo/forest-{index}/versions/").json()]
        job = next(j for j in jobs if j["version"]["name"] == f"demo/forest-{index}@1")
        assert sorted(labels) == (["1", "1-onnx"] if job["state"] == "succeeded" else ["1"]), (labels, job["state"])
    log = hub.log.read_text(errors="replace")
    assert len(re.findall(r"Celery worker \d+ restarted", log)) == KILLS and "exited with signal SIGKILL" in log

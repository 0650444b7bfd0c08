"""Stuck jobs heal, through a real Celery worker on Redis and PostgreSQL: pool processes killed in a row
(as an OOM killer would), a killed pool process in the middle of a job, a queued job whose message is gone."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from hub.jobs.models import Job
from hub.registry.models import Version
from tests.conftest import start_worker, stop_process, wait_for_job, worker_env
from tests.conversions.test_worker import conversion_job, publish_model
from tests.jobs.test_faults import forest
from tests.ports import free_port

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker_root(tmp_path, settings):
    """This test process and its workers share the blob store; stray messages of earlier tests are purged."""
    from workers.celery import app

    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(tmp_path / "blobs")}
    settings.HUB_UPLOAD_DIR = tmp_path / "uploads"
    app.control.purge()
    return tmp_path


def pool_processes(worker) -> list[int]:
    """The worker's pool processes: its children (our own processes, by PID)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == worker.pid and fields[0] != "Z":
                children.append(int(entry.name))
    return children


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return found


def test_pool_processes_killed_in_a_row_leave_a_worker_that_still_runs_jobs(worker_root, api, publish, owner):
    env = worker_env(worker_root, HUB_JOB_HEARTBEAT_S="1", HUB_JOB_REAP_S="1")
    worker = start_worker(worker_root, env, "prefork", pool="prefork")
    try:
        for _ in range(4):  # idle pool processes, killed one after the other
            victim = wait_for(lambda: pool_processes(worker), 30, "no pool process")[0]
            os.kill(victim, signal.SIGKILL)
            wait_for(lambda v=victim: pool_processes(worker) and v not in pool_processes(worker), 30,
                     "the pool process was not replaced")
        publish_model(api, "oom", {"forest.pkl": forest(worker_root, 1).read_bytes()})
        job = conversion_job("1", "oom")
        running = wait_for(lambda: Job.objects.filter(pk=job.pk, state="running").first(), 60, "never started")
        pid = int(running.worker.rpartition(":")[2])
        assert pid in pool_processes(worker)
        time.sleep(0.5)
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)  # mid-job: Celery rejects the message (worker lost) and it comes back
        wait_for(lambda: Job.objects.filter(pk=job.pk, attempts=2).exists(), 60, "the job was not run again")
        print(f"a job whose pool process was killed ran again after {time.monotonic() - killed:.2f} s")
        job = wait_for_job(job.pk, timeout=120)
        assert job.state == "succeeded", (job.error_code, job.log[-5:])
        assert any("was lost" in line["message"] for line in job.log)
        assert Version.objects.filter(artifact__name="oom", label="1-onnx").count() == 1
        publish(owner, "after", {"a.bin": b"after the kills"})  # and new jobs, for anyone, still run
        fixity = api.post("/api/v1/artifacts/alice/after/versions/1/fixity").json()
        assert wait_for_job(fixity["id"], timeout=60).state == "succeeded"
        assert worker.poll() is None
    finally:
        stop_process(worker)


def test_a_queued_job_whose_message_was_lost_is_sent_again(worker_root, api, publish, owner, settings):
    """A job row says queued but no broker holds its message (lost with a killed worker or a broker restart):
    a worker's reaper sends it again; one whose worker died after taking it is queued again at once."""
    _, version = publish(owner, "lost", {"a.bin": b"lost message"})
    lost = Job.objects.create(kind="fixity", requester=owner, version=version,
                              dispatched=timezone.now() - timedelta(seconds=30))
    dead = Job.objects.create(kind="fixity", requester=owner, version=version, state="running", attempts=1,
                              worker=f"{os.uname().nodename}:{2**22 + 7}",  # no such process on this host
                              heartbeat=timezone.now(), started=timezone.now())
    env = worker_env(worker_root, HUB_JOB_QUEUED_STALE_S="20", HUB_JOB_REAP_S="1")
    started = time.monotonic()
    worker = start_worker(worker_root, env, "reaper")
    try:
        for job in (lost, dead):
            done = wait_for_job(job.pk, timeout=60)
            assert done.state == "succeeded", (done.error_code, done.log)
        print(f"stuck jobs ran {time.monotonic() - started:.2f} s after a worker started")
        lost.refresh_from_db()
        dead.refresh_from_db()
        assert any("sent again" in line["message"] for line in lost.log) and lost.attempts == 1
        assert any("was lost" in line["message"] for line in dead.log) and dead.attempts == 2
        # A job queued a moment ago is waiting, not lost: it is not sent twice.
        fresh = Job.objects.create(kind="fixity", requester=owner, version=version, dispatched=timezone.now())
        time.sleep(3)
        fresh.refresh_from_db()
        assert fresh.state == "queued" and not any("sent again" in line["message"] for line in fresh.log)
    finally:
        stop_process(worker)


def test_a_broker_down_at_publish_time_loses_nothing_and_the_job_runs_once_it_is_back(worker_root, api, monkeypatch):
    """The version is committed before its conversion is sent: a broker that cannot be reached then (a real
    Celery app on a Redis port nothing listens on) must not turn the publish into a 500 with its uploads spent.
    The job waits, queued, its log says why, and a worker's reaper sends it once the broker answers."""
    from celery import Celery

    from hub.jobs.executors import celery as celery_executor

    down = Celery("down", broker=f"redis://127.0.0.1:{free_port()}/0")
    down.conf.broker_connection_timeout = 1
    monkeypatch.setattr(celery_executor, "app", down)  # the Celery executor sends
    publish_model(api, "unsent", {"forest.pkl": forest(worker_root, 3).read_bytes()})
    job = conversion_job("1", "unsent")
    assert job.state == "queued" and job.dispatched is None
    assert any("job queue could not be reached" in line["message"] for line in job.log), job.log
    monkeypatch.undo()
    time.sleep(2)
    worker = start_worker(worker_root, worker_env(worker_root, HUB_JOB_QUEUED_STALE_S="2", HUB_JOB_REAP_S="1"),
                          "unsent")
    try:
        done = wait_for_job(job.pk, timeout=180)
        assert done.state == "succeeded", (done.error_code, done.log)
        assert any("sent again" in line["message"] for line in done.log)
    finally:
        stop_process(worker)


def test_a_job_past_the_celery_time_limit_fails_with_time_limit(worker_root, api):
    # 2,000 trees: the sandboxed child's restricted unpickling alone takes about 2 s here (a 10-tree forest's whole
    # conversion 0.2 s on a quiet machine, which once finished inside the limit): 1 s is always past.
    env = worker_env(worker_root, HUB_JOB_TIME_LIMIT_S="1")
    worker = start_worker(worker_root, env, "limited", pool="prefork")
    try:
        publish_model(api, "slow", {"forest.pkl": forest(worker_root, 2, trees=2000).read_bytes()})
        job = wait_for_job(conversion_job("1", "slow").pk, timeout=60)
        assert job.state == "failed" and job.error_code == "time_limit" and "1 s" in job.error_detail, job.log[-3:]
        assert job.attempts == 1 and not Version.objects.filter(artifact__name="slow", label="1-onnx").exists()
        assert worker.poll() is None
    finally:
        stop_process(worker)

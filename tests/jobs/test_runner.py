"""The job runner's state machine: success, coded failure, unexpected failure, lost workers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from hpcfair.compute import CodedError

from hub.jobs.models import Job
from hub.jobs.runner import execute

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(owner):
    return Job.objects.create(kind="fixity", requester=owner)


def test_success_records_result_progress_and_logs(job):
    def work(ctx):
        ctx.log("halfway")
        ctx.progress(0.5)
        return {"answer": 42}

    execute(str(job.pk), work)
    job.refresh_from_db()
    assert job.state == "succeeded" and job.result == {"answer": 42} and job.progress == 1.0
    assert job.log[0]["message"] == "halfway" and job.attempts == 1
    assert job.started <= job.finished and job.duration >= 0


def test_coded_failure_keeps_the_scientists_message(job):
    def work(ctx):
        raise CodedError("unsupported_operator", "Operator Foo has no ONNX equivalent; try opset 18.")

    execute(str(job.pk), work)
    job.refresh_from_db()
    assert job.state == "failed" and job.error_code == "unsupported_operator"
    assert "opset 18" in job.error_detail


def test_unexpected_failure_hides_its_text(job):
    def work(ctx):
        raise KeyError("secret internal detail /etc/shadow")

    execute(str(job.pk), work)
    job.refresh_from_db()
    assert job.state == "failed" and job.error_code == "internal_error"
    assert "secret" not in job.error_detail and str(job.pk) in job.error_detail


def test_redelivered_job_after_a_lost_worker_is_retried_then_failed(job, settings):
    settings.HUB_JOB_MAX_ATTEMPTS = 2
    Job.objects.filter(pk=job.pk).update(state="running", attempts=1, worker="w1")  # w1 died mid-task
    execute(str(job.pk), lambda ctx: {"ok": True})
    job.refresh_from_db()
    assert job.state == "succeeded" and job.attempts == 2
    assert any("was lost" in line["message"] for line in job.log)
    # Its heartbeat stopped (the worker is gone): the redelivered message counts one more start.
    stale = timezone.now() - timedelta(hours=1)
    Job.objects.filter(pk=job.pk).update(state="running", attempts=2, heartbeat=stale)
    execute(str(job.pk), lambda ctx: {"ok": True})
    job.refresh_from_db()
    assert job.state == "failed" and job.error_code == "worker_lost"


def test_finished_jobs_are_not_run_again(job):
    calls = []
    execute(str(job.pk), lambda ctx: calls.append(1) or {})
    execute(str(job.pk), lambda ctx: calls.append(1) or {})
    assert calls == [1]


def test_duplicate_message_for_a_job_that_is_still_beating_is_dropped(job):
    Job.objects.filter(pk=job.pk).update(state="running", attempts=1, worker="w1", heartbeat=timezone.now())
    ran = []
    execute(str(job.pk), lambda ctx: ran.append(1) or {"ok": True})
    job.refresh_from_db()
    assert ran == [] and job.state == "running" and job.attempts == 1

"""The per-person job quota: past HUB_USER_MAX_ACTIVE_JOBS queued or running, each endpoint that starts a job
answers 429 too_many_jobs; publishing (which starts its own verification job) is never refused."""

from __future__ import annotations

import pytest

from hub.jobs.models import Job
from tests.conftest import client_for
from tests.gateway import models

pytestmark = pytest.mark.django_db

MLP = models.mlp()
BASE = "/api/v1/artifacts/alice/mlp/versions/1"


@pytest.fixture
def at_quota(owner, publish, settings):
    """alice's model, published (its verification job queued), and alice at her quota of 2 active jobs."""
    settings.HUB_USER_MAX_ACTIVE_JOBS = 2
    publish(owner, "mlp", {"mlp.onnx": MLP}, label="1")
    Job.objects.create(kind="fixity", requester=owner, state=Job.State.RUNNING)
    return owner


def refused(response) -> dict:
    assert response.status_code == 429, response.content
    assert response["X-Error-Code"] == "too_many_jobs" and int(response["Retry-After"]) > 0
    return response.json()


@pytest.mark.parametrize("path, body", [
    ("/convert", {}),
    ("/finetune", {"dataset": "alice/nothing", "target": "y"}),
    ("/optimize", {}),
    ("/fixity", None),
    ("/container", {}),
    ("/benchmark", {"if_no_worker": "queue"}),
    ("/infer", {"inputs": {"x": [[0.0] * 784]}, "mode": "async"}),
])
def test_every_job_endpoint_refuses_past_the_quota(at_quota, api, path, body):
    before = Job.objects.count()
    answer = refused(api.post(BASE + path, body, format="json"))
    assert answer["active"] == 2 and answer["limit"] == 2 and "at most 2" in answer["detail"]
    assert Job.objects.count() == before  # nothing queued, nothing staged


def test_publishing_is_never_refused_and_others_are_not_limited(at_quota, owner, publish, make_user, settings):
    _, version = publish(owner, "mlp", {"mlp.onnx": MLP, "README.md": b"# two"}, label="2")
    assert Job.objects.filter(requester=owner, version=version).exists(), "its verification was queued anyway"
    bob = make_user("bob")
    response = client_for(bob).post(BASE + "/fixity", {}, format="json")
    assert response.status_code in (403, 404) and response["X-Error-Code"] != "too_many_jobs"  # not bob's
    Job.objects.filter(requester=owner).update(state=Job.State.SUCCEEDED)
    assert client_for(owner).post(BASE + "/fixity", {}, format="json").status_code == 202
    settings.HUB_USER_MAX_ACTIVE_JOBS = 0  # no limit
    assert client_for(owner).post(BASE + "/fixity", {}, format="json").status_code == 202

"""The inference gateway with its Redis unreachable (a real redis client on a 127.0.0.1 port nothing listens
on): runs answer 503 ``broker_unavailable`` within seconds, on the full path and the express one, and leave
nothing behind; registry changes still commit."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from hub.accounts.models import ApiToken
from hub.gateway import memory, pipeline, presence, services, wsgi
from hub.jobs.models import Job
from tests.gateway import models
from tests.gateway.test_express import Counted, json_body, post
from tests.ports import free_port

pytestmark = pytest.mark.django_db(transaction=True)
MLP = models.mlp()
X = np.zeros((1, 784), np.float32)


@pytest.fixture
def down(settings):
    """The gateway's Redis is a port nothing listens on; the presence cache forgets it afterwards."""
    settings.HUB_GATEWAY_URL = f"redis://127.0.0.1:{free_port()}/0"
    presence._presence.cache_clear()
    yield
    presence._presence.cache_clear()


@pytest.fixture
def mlp(shared_storage, owner, publish):
    return publish(owner, "mlp", {"mlp.onnx": MLP})[1]


def test_a_synchronous_run_says_the_queue_is_unreachable(down, mlp, owner, api):
    started = time.monotonic()
    answer = api.post("/api/v1/artifacts/alice/mlp/versions/latest/infer", {"inputs": {"x": X.tolist()}},
                      format="json")
    assert answer.status_code == 503 and answer.json()["code"] == "broker_unavailable", answer.content
    assert "queue" in answer.json()["detail"] and time.monotonic() - started < 10


def test_the_express_path_hands_over_and_says_the_same(down, mlp, owner):
    """With a grant remembered from before the outage, the express path sends, finds presence unreachable
    and hands the request to Django, which answers the coded 503 (the express path only writes 200s)."""
    handed: list[bool] = []  # whether each request reached Django with the express path's answer
    inner = Counted()
    django = inner.django
    inner.django = lambda environ, start_response: (handed.append(pipeline.EARLIER_ANSWER in environ)
                                                    or django(environ, start_response))
    _, token = ApiToken.issue(owner, scope="write")
    memory.answers.reset(b"7")
    model = services.model_for(owner, "alice/mlp")
    key = memory._grant_key(f"Bearer {token}", "alice", "mlp", "latest", "")
    memory.answers.put(key, (b"7", model, owner.pk), b"7")  # what memory.grant keeps
    answer = post(wsgi.Express(inner), token, json_body(X))
    assert answer.status == 503 and json.loads(answer.body)["code"] == "broker_unavailable", answer.body
    assert handed == [True], "the express path sent it, then handed over"
    memory.answers.reset(b"0")


def test_a_run_asked_as_a_job_is_refused_the_same_way_and_leaves_no_job(down, mlp, owner, api):
    answer = api.post("/api/v1/artifacts/alice/mlp/versions/latest/infer", {"inputs": {"x": X.tolist()},
                      "mode": "async"}, format="json")
    assert answer.status_code == 503 and answer.json()["code"] == "broker_unavailable", answer.content
    assert not Job.objects.filter(kind="infer").exists()


def test_a_registry_change_with_the_broker_down_still_commits(down, owner, publish):
    """Publishing announces the change to the gateway's memory after commit; unreachable, it only logs."""
    _, version = publish(owner, "while-down", {"w.bin": b"w"})
    assert version.pk is not None and version.artifact.name == "while-down"

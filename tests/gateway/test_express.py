"""The express path (``hub.gateway.wsgi``) in front of Django, with a real Celery worker on Redis.

Each test calls the WSGI application that granian serves (``Express`` around Django's handler) with a
plain WSGI environ; ``Counted`` records which requests reached Django, so a test can tell which path
answered."""

from __future__ import annotations

import io
import json
import sys

import numpy as np
import pytest
from django.core.handlers.wsgi import WSGIHandler

from hub.accounts.models import ApiToken
from hub.gateway import memory, wsgi
from hub.gateway.presence import NoWorker, Stale, get_presence
from hub.registry.models import Artifact
from tests.conftest import wait_for_job
from tests.gateway import models

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MLP = models.mlp()
PATH = "/api/v1/artifacts/alice/{name}/versions/latest/infer"
VARYING = {"Date", "Server", "X-Request-ID", "Server-Timing", "Content-Length"}


class Counted:
    """Django's WSGI handler, counting the requests it was given."""

    def __init__(self) -> None:
        self.django = WSGIHandler()
        self.calls = 0

    def __call__(self, environ, start_response):
        self.calls += 1
        return self.django(environ, start_response)


class Answer:
    def __init__(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = int(status.split()[0])
        self.headers = dict(headers)
        self.body = body

    def json(self):
        return json.loads(self.body)


@pytest.fixture
def hub(settings):
    """(the WSGI app, the Django handler behind it), with the gateway's memory emptied."""
    memory.answers.reset(get_presence().generation())
    inner = Counted()
    return wsgi.Express(inner), inner


def post(app, token: str, body: bytes, content_type: str = "application/json", name: str = "mlp", query: str = "",
         **extra: str) -> Answer:
    environ = {
        "REQUEST_METHOD": "POST", "PATH_INFO": PATH.format(name=name), "QUERY_STRING": query, "SCRIPT_NAME": "",
        "CONTENT_TYPE": content_type, "CONTENT_LENGTH": str(len(body)), "HTTP_AUTHORIZATION": f"Bearer {token}",
        "HTTP_HOST": "testserver", "SERVER_NAME": "testserver", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.input": io.BytesIO(body), "wsgi.url_scheme": "http", "wsgi.errors": io.StringIO(),
        "wsgi.version": (1, 0), "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
        **extra,
    }
    started: dict = {}
    chunks = app(environ, lambda status, headers: started.update(status=status, headers=headers))
    body_out = b"".join(chunks)
    if hasattr(chunks, "close"):
        chunks.close()
    return Answer(started["status"], started["headers"], body_out)


def json_body(x: np.ndarray, **options) -> bytes:
    return json.dumps({"inputs": {"x": x.tolist()}, **options}).encode()


@pytest.fixture
def mlp(shared_storage, owner, publish):
    return publish(owner, "mlp", {"mlp.onnx": MLP})[1]


def test_a_repeated_request_skips_django_and_answers_the_same(mlp, owner, hub):
    app, inner = hub
    _, token = ApiToken.issue(owner, scope="write")
    x = np.random.default_rng(1).standard_normal((2, 784)).astype(np.float32)
    expected = models.reference(MLP, {"x": x})["logits"]

    first = post(app, token, json_body(x))
    assert first.status == 200, first.body
    assert inner.calls == 1  # the full path checked the token and the model, and granted the express path
    second = post(app, token, json_body(x))
    assert second.status == 200 and inner.calls == 1  # answered without Django
    for answer in (first, second):
        np.testing.assert_allclose(np.array(answer.json()["outputs"]["logits"], np.float32), expected,
                                   rtol=1e-5, atol=1e-6)
    assert set(first.json()) == set(second.json())
    assert {k: v for k, v in first.headers.items() if k not in VARYING} == \
           {k: v for k, v in second.headers.items() if k not in VARYING}
    assert second.headers["X-Request-ID"] != first.headers["X-Request-ID"]
    assert "lane;dur=" in second.headers["Server-Timing"]

    buffer = io.BytesIO()
    np.save(buffer, x)
    npy = post(app, token, buffer.getvalue(), "application/x-npy")
    assert npy.status == 200 and npy.headers["Content-Type"] == "application/x-npy" and inner.calls == 1
    np.testing.assert_allclose(np.load(io.BytesIO(npy.body)), expected, rtol=1e-5, atol=1e-6)

    given = post(app, token, json_body(x), HTTP_X_REQUEST_ID="client-chosen-id-42")
    assert given.headers["X-Request-ID"] == "client-chosen-id-42"


def test_the_express_path_counts_against_the_persons_rates_and_django_refuses_past_them(mlp, owner, hub, settings):
    """hub.ops.throttles: a request the express path answers counts as one the full path answers; past the
    inference rate the request goes to Django, whose throttle answers 429 throttled."""
    settings.HUB_THROTTLE_RATES = {**dict.fromkeys(settings.HUB_THROTTLE_RATES, "off"), "inference": "3/min"}
    app, inner = hub
    _, token = ApiToken.issue(owner, scope="write")
    x = np.zeros((1, 784), np.float32)
    assert post(app, token, json_body(x)).status == 200 and inner.calls == 1  # the full path, counted by DRF
    assert post(app, token, json_body(x)).status == 200 and inner.calls == 1  # express, counted by it
    assert post(app, token, json_body(x)).status == 200 and inner.calls == 1
    refused = post(app, token, json_body(x))
    assert refused.status == 429 and inner.calls == 2
    assert refused.json()["code"] == "throttled" and int(refused.headers["Retry-After"]) >= 1


def test_a_grant_is_per_token_and_per_model(mlp, owner, other, publish, hub):
    app, inner = hub
    _, token = ApiToken.issue(owner, scope="write")
    _, other_token = ApiToken.issue(other, scope="write")
    publish(owner, "mlp2", {"mlp.onnx": models.mlp(seed=7)})
    x = np.zeros((1, 784), np.float32)
    assert post(app, token, json_body(x)).status == 200 and inner.calls == 1
    assert post(app, other_token, json_body(x)).status == 200 and inner.calls == 2  # another token: Django
    assert post(app, token, json_body(x), name="mlp2").status == 200 and inner.calls == 3  # another model
    assert post(app, token, json_body(x), query="file=other.onnx").status == 404 and inner.calls == 4
    assert post(app, token + "x", json_body(x)).status == 401 and inner.calls == 5


def test_bad_input_async_and_foreign_hosts_go_to_django(mlp, owner, hub):
    app, inner = hub
    _, token = ApiToken.issue(owner, scope="write")
    x = np.zeros((1, 784), np.float32)
    assert post(app, token, json_body(x)).status == 200 and inner.calls == 1

    wrong = post(app, token, json.dumps({"inputs": {"x": [[0.0] * 100]}}).encode())
    assert wrong.status == 400 and wrong.json()["code"] == "invalid_inputs" and inner.calls == 2
    assert "784" in wrong.json()["detail"] and wrong.headers["X-Error-Code"] == "invalid_inputs"
    broken = post(app, token, b"{not json")
    assert broken.status == 400 and broken.json()["code"] == "malformed_request" and inner.calls == 3
    job = post(app, token, json_body(x, mode="async"))
    assert job.status == 202 and inner.calls == 4
    foreign = post(app, token, json_body(x), HTTP_HOST="evil.example")
    assert foreign.status == 400 and inner.calls == 5  # Django's ALLOWED_HOSTS check, as for any request


def test_a_read_token_may_not_run_inference_on_either_path(mlp, owner, other, hub):
    """Inference takes worker time and may write (an async or batch run publishes a private outputs
    dataset for the requester), so it needs the write scope; the express path only serves what the full
    path granted, and it never grants a read token."""
    from hub.jobs.models import Job

    app, inner = hub
    x = np.zeros((1, 784), np.float32)
    jobs = Job.objects.count()  # the publish's own verification
    for user in (owner, other):  # the model's owner too: the scope decides, not who owns it
        _, read = ApiToken.issue(user, scope="read")
        for body in (json_body(x), json_body(x, mode="async"), json_body(x, dataset="alice/mlp")):
            calls = inner.calls
            refused = post(app, read, body)
            assert refused.status == 403 and refused.json()["code"] == "insufficient_scope", refused.body
            assert inner.calls == calls + 1  # Django answered, not the express path
        refused = post(app, read, json_body(x))
        assert refused.status == 403 and inner.calls == calls + 2
    assert Job.objects.count() == jobs
    _, write = ApiToken.issue(other, scope="write")
    assert post(app, write, json_body(x)).status == 200


@pytest.mark.parametrize("options, query", [
    ({"output_format": [None, None]}, ""), ({"mode": {}}, ""), ({"threads": 2.7}, ""), ({"outputs": [1]}, ""),
    ({}, "threads=2.7"), ({}, "output_format=xml"),
])
def test_bad_options_get_the_same_coded_400_on_both_paths(mlp, owner, hub, options, query):
    app, inner = hub
    _, token = ApiToken.issue(owner, scope="write")
    x = np.zeros((1, 784), np.float32)
    assert post(app, token, json_body(x)).status == 200 and inner.calls == 1  # granted: express from now on
    answer = post(app, token, json_body(x, **options), query=query)
    assert answer.status == 400 and answer.json()["code"] == "invalid", answer.body
    assert answer.headers["X-Error-Code"] == "invalid" and inner.calls == 2  # the express path handed it over
    assert set(answer.json()["errors"]) <= {"output_format", "mode", "threads", "outputs"}


def test_revoking_the_token_or_hiding_the_model_ends_the_grant(mlp, owner, other, hub):
    app, inner = hub
    token, raw = ApiToken.issue(owner, scope="write")
    x = np.zeros((1, 784), np.float32)
    assert post(app, raw, json_body(x)).status == 200
    assert post(app, raw, json_body(x)).status == 200 and inner.calls == 1

    assert ApiToken.revoke(owner, token.pk)  # as the account page and the API do it
    refused = post(app, raw, json_body(x))
    assert refused.status == 401 and refused.json()["code"] == "invalid_token" and inner.calls == 2

    artifact = Artifact.objects.get(name="mlp")  # public: anyone signed in may run it
    _, other_raw = ApiToken.issue(other, scope="write")
    assert post(app, other_raw, json_body(x)).status == 200
    assert post(app, other_raw, json_body(x)).status == 200 and inner.calls == 3
    artifact.visibility = "private"
    artifact.save()
    hidden = post(app, other_raw, json_body(x))
    assert hidden.status == 404 and inner.calls == 4


def test_an_answer_that_is_not_a_success_is_handed_to_django_without_running_again(
        shared_storage, owner, publish, hub, settings, monkeypatch):
    app, inner = hub
    _, token = ApiToken.issue(owner, scope="write")
    slow = models.slow(size=1024, repeats=8)
    publish(owner, "slow", {"slow.onnx": slow})
    x = np.random.default_rng(4).standard_normal((256, 1024)).astype(np.float32) / 32
    buffer = io.BytesIO()
    np.save(buffer, x)
    body = buffer.getvalue()
    assert post(app, token, body, "application/x-npy", name="slow").status == 200 and inner.calls == 1

    from hub.gateway import pipeline

    sent = []  # requests a worker received (a stale or workerless call sends nothing)
    real_call = pipeline.call

    def counting(*args, **kwargs):
        try:
            return real_call(*args, **kwargs)
        except (Stale, NoWorker):
            raise
        finally:
            if sys.exc_info()[0] not in (Stale, NoWorker):
                sent.append(1)

    monkeypatch.setattr(pipeline, "call", counting)
    settings.HUB_INFER_SYNC_S = 0.001  # the worker stops the run at this deadline
    answer = post(app, token, body, "application/x-npy", name="slow")
    assert answer.status == 202 and inner.calls == 2
    assert len(sent) == 1  # Django made the job from the express path's answer, without a second run
    job = wait_for_job(answer.json()["id"], timeout=120)
    assert job.params["reason"] == "longer than the synchronous limit" and job.state == "succeeded"

    # New inputs: the job's answer for the first ones may be remembered by now, and would answer 200.
    buffer = io.BytesIO()
    np.save(buffer, np.random.default_rng(5).standard_normal((256, 1024)).astype(np.float32) / 32)
    strict = post(app, token, buffer.getvalue(), "application/x-npy", name="slow", query="mode=sync")
    assert strict.status == 504 and strict.json()["code"] == "worker_timeout" and len(sent) == 2

"""The generation endpoints' refusals, before any worker is asked (logic tier)."""

import pytest

from tests.conftest import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def plain_model(owner, publish):
    artifact, version = publish(owner, "plain", {"weights.bin": b"123"})
    return f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/generate"


@pytest.mark.parametrize("body, words", [
    ({"prompt": "x", "max_new_tokens": 0}, "'max_new_tokens' must be from 1"),
    ({"prompt": "x", "beams": 4}, "Unknown field 'beams'"),
    ({"prompt": "x", "stream": "yes"}, "'stream' must be true or false"),
    ({"prompt": "x", "device": "tpu"}, "'device' must be cpu or gpu"),
    ({}, "Give either 'prompt'"),
])
def test_bad_generation_requests_are_refused(api, plain_model, body, words):
    refused = api.post(plain_model, body, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "invalid"
    assert words in refused.json()["detail"]


def test_a_model_without_generation_is_not_runnable(api, plain_model):
    refused = api.post(plain_model, {"prompt": "x"}, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "not_runnable"
    assert "offers no text generation" in refused.json()["detail"]
    assert client_for(None).post(plain_model, {"prompt": "x"}, format="json").status_code == 401


def test_openai_errors_have_openai_shape(owner, plain_model):
    api = client_for(owner)
    refused = api.post("/v1/chat/completions", {"model": "alice/plain", "messages": [{"role": "user", "content": "x"}]},
                       format="json")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "not_runnable" and refused.json()["error"]["message"]
    refused = api.post("/v1/completions", {"prompt": "x"}, format="json")
    assert refused.status_code == 400 and "Name the model" in refused.json()["error"]["message"]
    refused = api.post("/v1/chat/completions", {"model": "alice/plain", "messages": [], "n": 2}, format="json")
    assert refused.status_code == 400 and refused.json()["error"]["type"] == "invalid_request_error"
    assert client_for(None).get("/v1/models").status_code == 401
    assert api.get("/v1/models").json() == {"object": "list", "data": []}

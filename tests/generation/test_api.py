"""The generation endpoints' refusals, before any worker is asked (logic tier)."""

import json
from urllib.parse import quote

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
    refused = api.post(plain_model, {"prompt": "x"}, format="json", HTTP_ACCEPT="text/event-stream")
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


def _lm_files(architecture: str = "LlamaForCausalLM", tokenizer: bool = True, **config) -> dict[str, bytes]:
    files = {"lm/config.json": json.dumps({"architectures": [architecture], **config}).encode(),
             "lm/model.safetensors": b"not read here"}
    if tokenizer:
        files["lm/tokenizer.json"] = b"{}"
    return files


@pytest.mark.parametrize("files, queued", [
    (_lm_files(), True),
    (_lm_files("GPT2LMHeadModel"), True),  # the general route (onnxruntime-genai does not build it)
    (_lm_files("T5ForConditionalGeneration", is_encoder_decoder=True), True),  # a text encoder-decoder
    (_lm_files("WhisperForConditionalGeneration", is_encoder_decoder=True, num_mel_bins=80), False),  # speech
    (_lm_files("BertModel"), False),  # no language model head
    (_lm_files(tokenizer=False), False),  # no fast tokenizer
])
def test_publishing_a_causal_lm_queues_its_generation_build(owner, publish, files, queued):
    from hub.jobs.models import Job

    _, version = publish(owner, "lm", files)
    jobs = Job.objects.filter(version=version, kind="generation")
    assert jobs.exists() is queued
    if queued:
        assert jobs.get().params == {"folder": "lm", "precision": "fp32", "auto": True}


def test_optimize_asks_a_language_model_for_an_int4_build(api, owner, publish, plain_model):
    artifact, version = publish(owner, "lm", _lm_files())
    url = f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/optimize"
    accepted = api.post(url, {"precision": "int4"}, format="json")
    assert accepted.status_code == 202, accepted.json()
    assert (accepted.json()["kind"], accepted.json()["params"]["precision"]) == ("generation", "int4")
    refused = api.post(plain_model.replace("/generate", "/optimize"), {"precision": "int4"}, format="json")
    assert refused.status_code == 415 or refused.json()["code"] == "unsupported_format"
    assert "causal language model" in refused.json()["detail"]
    refused = api.post(url, {"precision": "int2"}, format="json")
    assert refused.status_code == 400
    gpt2, gpt2_version = publish(owner, "gpt2", _lm_files("GPT2LMHeadModel"))  # the general route: fp32 only
    refused = api.post(f"/api/v1/artifacts/{gpt2.full_name}/versions/{gpt2_version.label}/optimize",
                       {"precision": "int4"}, format="json")
    assert (refused.status_code, refused.json()["code"]) == (400, "invalid")
    assert "fp32 only" in refused.json()["detail"]


def test_int8_is_asked_for_and_half_precision_refused_up_front(api, owner, publish):
    from hub.jobs.models import Job

    artifact, version = publish(owner, "lm", _lm_files())
    url = f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/optimize"
    accepted = api.post(url, {"precision": "int8"}, format="json")
    assert accepted.status_code == 202, accepted.json()
    assert (accepted.json()["kind"], accepted.json()["params"]["precision"]) == ("generation", "int8")
    before = Job.objects.count()
    for precision in ("fp16", "bf16"):
        refused = api.post(url, {"precision": precision}, format="json")
        assert (refused.status_code, refused.json()["code"]) == (400, "unsupported_precision")
        assert refused["X-Error-Code"] == "unsupported_precision"
        assert "run on CPUs" in refused.json()["detail"] and "int8" in refused.json()["detail"]
    assert Job.objects.count() == before  # no job that would fail in the runtime


def test_v1_models_lists_the_names_people_type(owner, api, publish, tmp_path, make_user):
    """Issue 55: ``/v1/models`` listed the build's label (``alice/lm@1-genai``) where the README and the docs
    use the name (``alice/lm``): the newest full-precision build is listed by the name, an older one by its
    source's version, a precision copy by its own label; each name answers with that build, and the labels
    still resolve."""
    from hub.generation import services as generation
    from hub.registry import services
    from hub.registry.models import ProvenanceLink
    from tests.conftest import staged, valid_metadata

    def build(source, label: str, precision: str = "fp32"):
        return services.create_version(
            source.artifact, owner, label=label, files=[staged(tmp_path, "lm/model.onnx", label.encode())],
            metadata=valid_metadata(format="onnx-genai", job="1", generation={"precision": precision}),
            provenance=[services.ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, source)], system=True)

    _, first = publish(owner, "lm", _lm_files(), label="1")
    older = build(first, "1-genai")
    copy = build(first, "1-genai-int4", "int4")
    _, second = publish(owner, "lm", {**_lm_files(), "lm/extra.txt": b"2"}, label="2")
    newest = build(second, "2-genai")
    data = api.get("/v1/models").json()["data"]
    listed = [m["id"] for m in data]
    assert listed == ["alice/lm", "alice/lm@1-genai-int4", "alice/lm@1"]
    for entry in data:  # client.models.retrieve(id): the id quoted as one path segment, the entry listed
        one = api.get(f"/v1/models/{quote(entry['id'], safe='')}")
        assert one.status_code == 200 and one.json() == entry
    for missing in ("alice%2Fnope", "alice%2Flm%402-genai", "alice"):
        refused = api.get(f"/v1/models/{missing}")
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found", missing
        assert "GET /v1/models lists" in refused.json()["error"]["message"]
    private = client_for(make_user("carol")).get("/v1/models/alice%2Flm")
    services.update_artifact(first.artifact, {"visibility": "private"})
    assert client_for(make_user("dave")).get("/v1/models/alice%2Flm").status_code == 404
    assert private.status_code == 200  # while it was public
    for name, built in zip(listed, (newest, copy, older), strict=True):
        assert generation.generation_model(generation.named(owner, name)) == built, name
    for label, built in (("1-genai", older), ("2-genai", newest)):  # the labels still resolve
        assert generation.generation_model(generation.named(owner, f"alice/lm@{label}")) == built


@pytest.mark.slow
@pytest.mark.cpu  # builds a generation model: over 1 s on a quiet machine
@pytest.mark.django_db(transaction=True)
def test_generate_before_the_build_finishes_names_its_job(live_server, owner, publish, settings):
    """Issue 55: ``hpcfair generate`` (on the hub or ``--device local``) while the build is queued names
    ``hpcfair jobs wait ID``, the command that returns when the build is there."""
    import os
    import subprocess
    import sys

    from hub.accounts.models import ApiToken
    from hub.jobs.models import Job

    settings.HUB_PUBLIC_URL = live_server.url
    _, version = publish(owner, "queued-lm", _lm_files())
    job = Job.objects.get(version=version, kind="generation")
    _, token = ApiToken.issue(owner, scope="infer")
    env = {**os.environ, "HPCFAIR_ENDPOINT": live_server.url, "HPCFAIR_TOKEN": token}
    env.pop("HPCFAIR_OFFLINE", None)
    for device in ([], ["--device", "local"]):
        done = subprocess.run([sys.executable, "-m", "hpcfair.cli", "generate", "alice/queued-lm", "hi", *device],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and done.stderr.startswith("error [not_ready]"), (device, done.stderr)
        assert f"`hpcfair jobs wait {job.pk}` returns when it has finished" in done.stderr, (device, done.stderr)


def test_a_build_gets_address_space_for_its_weights(owner, publish, settings):
    """A quantized build holds the fp32 weights and their copy: the sandbox's floor plus 4 MB per MB of weights
    (a 702 M Llama's int8 build ran out of the floor alone), unless HUB_CONVERT_MEMORY_MB fixes the limit."""
    from hpcfair.convert import sandbox

    from hub.generation.jobs import BUILD_MEMORY_PER_MB, build_limits

    settings.HUB_CONVERT_MEMORY_MB = 0
    _, version = publish(owner, "lm", {**_lm_files(), "lm/model.safetensors": b"\1" * 2**21})
    assert build_limits(version, "lm").memory_mb == min(sandbox.memory_for(0) + 2 * BUILD_MEMORY_PER_MB,
                                                        sandbox.memory_ceiling_mb())
    settings.HUB_CONVERT_MEMORY_MB = 3000
    assert build_limits(version, "lm").memory_mb == 3000

"""Serve jobs on the hub's side, before any node (logic tier): what is refused in words, which engine a model
gets, one job per person and model, the states ``/v1/models`` reports, who reaches a served model, and a server
that no longer answers. The node's side is tests/client/test_serve.py; the whole path on the private Slurm
cluster is tests/generation/test_serve_slurm.py."""

import pytest
from django.utils import timezone

from hub.generation.models import Endpoint
from hub.jobs.models import Job
from tests.conftest import client_for
from tests.generation.test_api import _lm_files
from tests.ports import free_ports

pytestmark = pytest.mark.django_db


def url(artifact, version) -> str:
    return f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/serve"


@pytest.fixture
def built(owner, publish, tmp_path):
    """A causal LM upload and a generation build of it (its files are not read here)."""
    from hub.registry import services
    from hub.registry.models import ProvenanceLink
    from tests.conftest import staged, valid_metadata

    artifact, source = publish(owner, "lm", _lm_files(), label="1")
    build = services.create_version(
        artifact, owner, label="1-genai", files=[staged(tmp_path, "model.onnx", b"onnx")],
        metadata=valid_metadata(format="onnx-genai", job="1", generation={"precision": "fp32"}),
        provenance=[services.ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, source)], system=True)
    return artifact, source, build


@pytest.mark.parametrize("body, words", [
    ({"idle_s": 0}, "'idle_s' (seconds without a request before the server stops) must be an integer from 1"),
    ({"idle_s": 86401}, "to 86400 (HUB_SERVE_IDLE_MAX_S); it is 86401"),
    ({"idle_s": True}, "'idle_s'"),
    ({"idle_s": "60"}, "'idle_s'"),
    ({"idle_s": 1.5}, "'idle_s'"),
    ({"device": "tpu"}, "'device' must be cpu or gpu"),
    ({"idle_s": 60, "port": 80}, "Send a JSON object with 'idle_s'"),
])
def test_bad_serve_requests_are_refused_in_words(api, built, body, words):
    artifact, _, build = built
    refused = api.post(url(artifact, build), body, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "invalid", refused.json()
    assert words in refused.json()["detail"]
    assert not Job.objects.filter(kind="serve").exists()


def test_a_model_no_node_can_serve_is_refused(api, owner, publish):
    artifact, version = publish(owner, "plain", {"weights.bin": b"123"})
    for device in ("cpu", "gpu"):
        refused = api.post(url(artifact, version), {"device": device}, format="json")
        assert refused.status_code == 409 and refused.json()["code"] == "not_runnable"
        assert "cannot be served on a node" in refused.json()["detail"]
    assert client_for(None).post(url(artifact, version), {}, format="json").status_code == 401


def test_a_model_whose_build_is_under_way_names_its_job(api, owner, publish):
    artifact, source = publish(owner, "lm", _lm_files(), label="1")  # publishing queued its build
    refused = api.post(url(artifact, source), {}, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "not_ready"
    assert refused.json()["job"] == str(Job.objects.get(kind="generation").pk)


def test_each_model_gets_its_engine_and_one_job_per_person(api, built, other, settings):
    artifact, source, build = built
    onnx = api.post(url(artifact, source), {"idle_s": 30}, format="json")  # the upload: its build is served
    assert onnx.status_code == 202, onnx.json()
    job = Job.objects.get(pk=onnx.json()["id"])
    assert job.kind == "serve" and job.version == build and job.queue == "cpu"
    assert job.params == {"idle_s": 30, "engine": "onnx", "folder": "", "name": "alice/lm@1-genai"}
    assert api.post(url(artifact, build), {}, format="json").json()["id"] == str(job.pk)  # the same job again
    gpu = api.post(url(artifact, source), {"device": "gpu"}, format="json")  # the folder itself, with vLLM
    assert gpu.status_code == 202
    vllm = Job.objects.get(pk=gpu.json()["id"])
    assert vllm.version == source and vllm.queue == "gpu"
    assert vllm.params == {"idle_s": settings.HUB_SERVE_IDLE_S, "engine": "vllm", "folder": "lm",
                           "name": "alice/lm@1"}
    theirs = client_for(other).post(url(artifact, build), {}, format="json")  # a public model: anyone may serve it
    assert theirs.status_code == 202 and theirs.json()["id"] != str(job.pk)


def test_v1_models_reports_each_served_models_state(api, built):
    artifact, source, build = built
    job = Job.objects.get(pk=api.post(url(artifact, build), {}, format="json").json()["id"])

    def states() -> dict:
        return {m["id"]: m.get("state") for m in api.get("/v1/models").json()["data"]}

    assert states() == {"alice/lm": "queued"}
    job.state = Job.State.RUNNING
    job.save()
    assert states() == {"alice/lm": "starting"}  # on a node, loading: not announced yet
    Endpoint.objects.create(job=job, secret="x", url="http://127.0.0.1:9", announced=timezone.now())
    assert states() == {"alice/lm": "live"}
    job.mark_cancelled("cancelled by the test")
    job.save()
    assert states() == {"alice/lm": "offline"}
    gpu = Job.objects.get(pk=api.post(url(artifact, source), {"device": "gpu"}, format="json").json()["id"])
    assert states() == {"alice/lm": "offline", "alice/lm@1": "queued"}  # the folder, listed as served
    assert gpu.version == source


def test_only_readers_reach_a_served_model_and_a_server_gone_is_a_503(owner, other, publish, tmp_path):
    """A private model's server: its owner's requests go there (and meet a closed port: 503 no_worker in OpenAI's
    shape); another person's find no such model, and cannot serve it."""
    from hub.registry import services
    from hub.registry.models import ProvenanceLink
    from tests.conftest import staged, valid_metadata

    artifact, source = publish(owner, "secret-lm", _lm_files(), label="1", visibility="private")
    build = services.create_version(
        artifact, owner, label="1-genai", files=[staged(tmp_path, "model.onnx", b"onnx")],
        metadata=valid_metadata(format="onnx-genai", job="1", generation={"precision": "fp32"}),
        provenance=[services.ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, source)], system=True)
    mine = client_for(owner)
    job = Job.objects.get(pk=mine.post(url(artifact, build), {}, format="json").json()["id"])
    job.state = Job.State.RUNNING
    job.save()
    port = free_ports(1)  # nothing listens there
    Endpoint.objects.create(job=job, secret="x", url=f"http://127.0.0.1:{port}", announced=timezone.now())
    chat = {"model": "alice/secret-lm", "messages": [{"role": "user", "content": "hi"}]}
    gone = mine.post("/v1/chat/completions", chat, format="json")
    assert gone.status_code == 503 and gone.json()["error"]["code"] == "no_worker"
    assert f"serve job {job.pk}" in gone.json()["error"]["message"]
    theirs = client_for(other)
    assert theirs.post("/v1/chat/completions", chat, format="json").status_code == 404
    assert theirs.get("/v1/models").json()["data"] == []
    assert theirs.post(url(artifact, build), {}, format="json").status_code == 404

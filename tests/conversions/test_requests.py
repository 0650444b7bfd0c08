"""Asking for a conversion or an optimisation (no worker: the job's row and its parameters are what is checked;
the worker's side is tests/conversions/test_worker.py)."""

from __future__ import annotations

import pytest

from hub.jobs.models import Job
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

CONVERT = "/api/v1/artifacts/alice/{name}/versions/1/convert"
OPTIMIZE = "/api/v1/artifacts/alice/{name}/versions/1/optimize"


@pytest.fixture
def mixed(owner, publish):
    """A model version with a TorchScript file, a card and a table of sample inputs."""
    return publish(owner, "mixed", {"model.pt": b"PK\x03\x04 not really", "README.md": b"# Mixed\n",
                                    "table.csv": b"a,b\n1,2\n"})


def test_publishing_a_model_queues_its_conversion_and_a_request_takes_options(api, mixed):
    _, version = mixed
    auto = Job.objects.get(version=version)
    assert (auto.kind, auto.queue, auto.params["files"], auto.params["auto"]) == ("convert", "convert",
                                                                                   ["model.pt"], True)
    response = api.post(CONVERT.format(name="mixed"), {"files": ["model.pt"], "opset": 13, "atol": 1e-3},
                        format="json")
    assert response.status_code == 202 and response["Location"].endswith(f"/api/v1/jobs/{response.json()['id']}/")
    job = Job.objects.get(pk=response.json()["id"])
    assert job.params["opset"] == 13 and job.params["atol"] == 1e-3 and job.params["auto"] is False


@pytest.mark.parametrize("body, code, field", [
    ({"files": ["nope.pt"]}, "invalid", "files"),
    ({"files": ["table.csv"]}, "unsupported_format", None),
    ({"opset": 30}, "invalid", "opset"),
    ({"atol": -1}, "invalid", "atol"),
    ({"memory_mb": 10}, "invalid", "memory_mb"),
])
def test_bad_conversion_requests_are_400s_that_queue_nothing(api, mixed, body, code, field):
    before = Job.objects.count()
    response = api.post(CONVERT.format(name="mixed"), body, format="json")
    assert response.status_code == 400 and response.json()["code"] == code and response["X-Error-Code"] == code
    if field:
        assert field in response.json()["errors"]
    assert Job.objects.count() == before


def test_a_version_without_a_model_file_is_refused_naming_every_family_the_table_converts(api, owner, publish):
    from hpcfair.convert import families

    publish(owner, "notes", {"README.md": b"# Notes\n", "table.csv": b"a,b\n1,2\n"})
    response = api.post(CONVERT.format(name="notes"), {}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "unsupported_format"
    assert [f.label for f in families.converted() if f.label not in response.json()["detail"]] == []


def test_an_onnx_only_version_is_verified_and_optimising_needs_an_onnx_file(api, owner, publish, mixed):
    _, version = publish(owner, "onnx-only", {"model.onnx": b"\x08\x07 not parsed here"})
    assert Job.objects.get(version=version).kind == "verify"
    assert api.post(OPTIMIZE.format(name="onnx-only"), {}, format="json").status_code == 202
    response = api.post(OPTIMIZE.format(name="mixed"), {}, format="json")
    assert response.status_code == 400 and response.json()["code"] == "unsupported_format"
    detail = response.json()["detail"]  # its conversion is queued: not "convert it first", nor "0 ONNX files"
    assert "has no ONNX file" in detail and "has not finished" in detail and "0 ONNX files" not in detail
    assert "convert it first" not in detail


def test_optimising_a_version_without_onnx_points_to_its_conversion(api, owner, mixed, tmp_path):
    """A new user's review: "has 0 ONNX files; name one in 'file'" for a version whose ONNX model is its
    conversion, 1-onnx."""
    from hub.registry import services
    from hub.registry.models import ProvenanceLink
    from hub.registry.services import ProvenanceRef
    from tests.conftest import staged, valid_metadata

    artifact, source = mixed
    services.create_version(artifact, owner, label="1-onnx", files=[staged(tmp_path, "model.onnx", b"onnx")],
                            metadata=valid_metadata("model"),
                            provenance=[ProvenanceRef(ProvenanceLink.Relation.CONVERTED_FROM, source)], system=True)
    response = api.post(OPTIMIZE.format(name="mixed"), {}, format="json")
    body = response.json()
    assert response.status_code == 400 and body["code"] == "unsupported_format" and body["conversion"] == "1-onnx"
    assert "has no ONNX file" in body["detail"] and "versions/1-onnx/optimize" in body["detail"]


@pytest.mark.parametrize(("state", "said"), [(None, "convert it first"), ("failed", "conversion to ONNX failed")])
def test_optimising_a_version_never_converted_says_so(api, mixed, state, said):
    _, source = mixed
    if state is None:
        Job.objects.filter(version=source).delete()
    else:
        Job.objects.filter(version=source).update(state=state, error_code="weights_only")
    detail = api.post(OPTIMIZE.format(name="mixed"), {}, format="json").json()["detail"]
    assert "has no ONNX file" in detail and said in detail


def test_who_may_ask(owner, other, mixed, anon):
    url = CONVERT.format(name="mixed")
    assert client_for(owner, scope="read").post(url, {}, format="json").json()["code"] == "insufficient_scope"
    assert client_for(other).post(url, {}, format="json").status_code == 403
    assert anon.post(url, {}, format="json").status_code == 401


def test_the_onnx_version_carries_the_source_model_card(owner, publish, tmp_path):
    """Issue 40, point 6: what the card says of the model holds for its conversion; only the card at the root
    is carried, and never over a file the conversion wrote itself."""
    import hashlib

    from hub.jobs.files import source_cards

    card = b"---\nlicense: MIT\n---\n# Nested\nWhat the model is for.\n"
    _, source = publish(owner, "carded", {"model.pt": b"weights", "README.md": card, "sub/README.md": b"# other\n",
                                          "notes.md": b"not a card"})
    [carried] = source_cards(source, tmp_path, set())
    assert carried.path == "README.md" and carried.sha256 == hashlib.sha256(card).hexdigest()
    assert carried.staged.read_bytes() == card and carried.size == len(card)
    assert source_cards(source, tmp_path, {"README.md"}) == []


def test_a_generation_build_is_not_sent_to_the_plain_onnx_checker(owner, publish, tmp_path):
    """Issue 55, point 4: the hub's -genai build (verified by its greedy check) gets no `verify` job, which
    would run the plain ONNX checker on com.microsoft operators and fail; an uploaded .onnx still does."""
    from hub.registry import services
    from hub.registry.models import ProvenanceLink
    from tests.conftest import staged, valid_metadata

    artifact, source = publish(owner, "lm", {"model.onnx": b"an uploaded ONNX file"})
    assert Job.objects.get(version=source).kind == "verify"
    metadata = {**valid_metadata("model", title="lm"), "framework": "onnx", "format": "onnx-genai",
                "task": "text-generation", "verified": True, "generation": {"precision": "fp32", "passed": True}}
    built = services.create_version(artifact, owner, files=[staged(tmp_path, "model.onnx", b"a genai graph"),
                                                            staged(tmp_path, "genai_config.json", b"{}")],
                                    label="1-genai", metadata=metadata, system=True, provenance=[
                                        services.ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, source)])
    assert not Job.objects.filter(version=built).exists()

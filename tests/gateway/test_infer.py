"""Inference through the whole hub: a real Celery worker serves the gateway lane on Redis and runs the
Celery jobs; answers are compared with bare ONNX Runtime in this process."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from hub.jobs.models import Job
from hub.registry.models import Artifact, Version
from tests.conftest import client_for, wait_for_job
from tests.gateway import models

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MLP = models.mlp()
TWO = models.two_inputs()


@pytest.fixture
def mlp_version(shared_storage, owner, publish):
    _, version = publish(owner, "mlp", {"mlp.onnx": MLP})
    return version


def infer_url(name: str = "mlp", version: str = "latest") -> str:
    return f"/api/v1/artifacts/alice/{name}/versions/{version}/infer"


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_json_inputs_answer_like_bare_onnx_runtime(mlp_version, api):
    x = np.random.default_rng(1).standard_normal((3, 784)).astype(np.float32)
    response = api.post(infer_url(), {"inputs": {"x": x.tolist()}}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    expected = models.reference(MLP, {"x": x})["logits"]
    np.testing.assert_allclose(np.array(body["outputs"]["logits"], np.float32), expected, rtol=1e-5, atol=1e-6)
    assert body["shapes"] == {"logits": [3, 10]} and body["dtypes"] == {"logits": "float32"}
    assert body["device"] == "cpu" and body["provider"] == "CPUExecutionProvider"
    assert body["model"]["pid"] == mlp_version.pid
    assert response["X-Hub-Device"] == "cpu" and response["X-Hub-Model"] == mlp_version.pid


def test_npy_in_npy_out_and_npz_in_npz_out(mlp_version, api):
    x = np.random.default_rng(2).standard_normal((5, 784)).astype(np.float32)
    expected = models.reference(MLP, {"x": x})["logits"]
    response = api.post(infer_url(), npy(x), content_type="application/x-npy")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-npy"
    np.testing.assert_allclose(np.load(io.BytesIO(response.content)), expected, rtol=1e-5, atol=1e-6)

    buffer = io.BytesIO()
    np.savez(buffer, x=x.astype(np.float64))  # float64 is cast safely to the model's float32
    response = api.post(infer_url() + "?output_format=npz", buffer.getvalue(), content_type="application/x-npz")
    assert response.status_code == 200 and response["Content-Type"] == "application/x-npz"
    with np.load(io.BytesIO(response.content)) as archive:
        np.testing.assert_allclose(archive["logits"], expected, rtol=1e-5, atol=1e-6)

    response = api.post(infer_url(), npy(x), content_type="application/x-npy", HTTP_ACCEPT="application/json")
    assert response.status_code == 200 and response.json()["shapes"] == {"logits": [5, 10]}


@pytest.mark.parametrize("body, fragment", [
    ({"inputs": {"image": [[0.0] * 784]}}, "expects inputs x"),
    ({"inputs": {"x": [[0.0] * 100]}}, "size 100 on axis 1; the model expects 784"),
    ({"inputs": {"x": [0.0] * 784}}, "1 dimension(s) [784]; the model expects 2: [batch, 784]"),
    ({"inputs": {"x": [[0.0] * 784, [0.0] * 783]}}, "not a rectangular array"),
    ({"inputs": {"x": [["a"] * 784]}}, "must hold numbers"),
    ({}, "no inputs"),
])
def test_signature_errors_say_what_was_expected(mlp_version, api, body, fragment):
    response = api.post(infer_url(), body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()
    assert error["code"] == "invalid_inputs" and fragment in error["detail"], error["detail"]
    if body:
        assert error["expected"] == [{"name": "x", "shape": ["batch", 784], "dtype": "float32"}]


def test_two_inputs_names_dtypes_and_shared_axes(shared_storage, owner, publish, api):
    publish(owner, "two", {"two.onnx": TWO})
    a = np.ones((2, 3), np.float32)
    ok = api.post(infer_url("two"), {"inputs": {"a": a.tolist(), "k": [[2], [3]]}}, format="json")
    assert ok.status_code == 200, ok.content
    assert ok.json()["outputs"]["y"] == [[2.0, 2.0, 2.0], [3.0, 3.0, 3.0]]

    buffer = io.BytesIO()
    np.savez(buffer, a=a, k=np.array([[2.5], [3.5]]))  # float -> int64 is not a safe cast
    wrong_dtype = api.post(infer_url("two"), buffer.getvalue(), content_type="application/x-npz")
    assert wrong_dtype.status_code == 400
    assert "has dtype float64; the model expects int64" in wrong_dtype.json()["detail"]

    axes = api.post(infer_url("two"), {"inputs": {"a": a.tolist(), "k": [[1], [2], [3]]}}, format="json")
    assert axes.status_code == 400 and "Axis 'n' is 2 in input 'a' but 3 in input 'k'" in axes.json()["detail"]

    one_array = api.post(infer_url("two"), npy(a), content_type="application/x-npy")
    assert one_array.status_code == 400 and "holds one array but the model has 2 inputs" in one_array.json()["detail"]


def test_requests_that_cannot_run(shared_storage, owner, publish, api, anon, mlp_version):
    assert anon.post(infer_url(), {"inputs": [[0.0] * 784]}, format="json").status_code == 401
    publish(owner, "table", {"rows.csv": b"a,b\n1,2\n"}, kind="dataset")
    response = api.post(infer_url("table"), {"inputs": [[1.0]]}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "not_runnable"
    publish(owner, "opaque", {"weights.bin": b"\x00" * 16})
    response = api.post(infer_url("opaque"), {"inputs": [[1.0]]}, format="json")
    assert response.status_code == 409 and "no ONNX file and no conversion" in response.json()["detail"]
    for options, field in [({"device": "tpu"}, "device"), ({"threads": 99}, "threads"), ({"mode": "later"}, "mode"),
                           ({"colour": "red"}, "colour")]:
        response = api.post(infer_url(), {"inputs": [[0.0] * 784], **options}, format="json")
        assert response.status_code == 400 and field in response.json()["errors"], response.content
    response = api.post(infer_url(), b"x,y", content_type="text/csv")
    assert response.status_code == 415
    response = api.post(infer_url(), b"not numpy", content_type="application/x-npy")
    assert response.status_code == 400 and response.json()["code"] == "invalid_inputs"


def test_private_models_run_only_for_those_who_may_read_them(shared_storage, owner, other, publish):
    publish(owner, "secret", {"mlp.onnx": MLP}, visibility="private")
    x = {"inputs": [[0.0] * 784]}
    assert client_for(other).post(infer_url("secret"), x, format="json").status_code == 404
    assert client_for(owner).post(infer_url("secret"), x, format="json").status_code == 200


def test_gpu_requests_are_refused_or_queued_never_run_on_cpu(mlp_version, api):
    x = {"inputs": [[0.0] * 784], "device": "gpu"}
    refused = api.post(infer_url(), x, format="json")
    assert refused.status_code == 503 and refused.json()["code"] == "no_worker" and refused.json()["device"] == "gpu"
    queued = api.post(infer_url(), {**x, "if_no_worker": "queue"}, format="json")
    assert queued.status_code == 202, queued.content
    job = Job.objects.get(pk=queued.json()["id"])
    assert job.queue == "gpu" and job.device == "gpu" and job.kind == "infer"
    assert Job.objects.get(pk=job.pk).state == "queued"  # no CPU worker took it
    job.delete()


def published_outputs(job: Job) -> tuple[Version, dict[str, np.ndarray]]:
    version = Version.objects.get(pid=job.result["pid"])
    from hub.storage import get_blob_store

    with get_blob_store().open(version.files.get(path="outputs.npz").blob_id) as stream:
        with np.load(io.BytesIO(stream.read())) as archive:
            return version, {name: archive[name] for name in archive.files}


def test_async_request_publishes_outputs_with_provenance(mlp_version, api):
    x = np.random.default_rng(3).standard_normal((4, 784)).astype(np.float32)
    response = api.post(infer_url(), {"inputs": {"x": x.tolist()}, "mode": "async"}, format="json")
    assert response.status_code == 202 and response["Location"].endswith(f"/api/v1/jobs/{response.json()['id']}/")
    job = wait_for_job(response.json()["id"])
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log)
    version, outputs = published_outputs(job)
    np.testing.assert_allclose(outputs["logits"], models.reference(MLP, {"x": x})["logits"], rtol=1e-5, atol=1e-6)
    assert version.artifact.full_name == "alice/mlp-outputs" and version.artifact.kind == "dataset"
    assert version.artifact.visibility == "private"
    assert [(p.relation, p.target_id) for p in version.provenance.all()] == [("derived_from", mlp_version.pk)]
    assert version.metadata["job"] == str(job.pk) and version.metadata["license"] == "MIT"
    assert job.result["outputs"] == {"logits": {"shape": [4, 10], "dtype": "float32"}}


def test_a_run_over_the_sync_limit_becomes_a_job(shared_storage, owner, publish, api, settings):
    big = models.slow(size=1024, repeats=8)
    publish(owner, "slow", {"slow.onnx": big})
    settings.HUB_INFER_SYNC_S = 0.05  # the worker aborts the synchronous run at this deadline
    x = np.random.default_rng(4).standard_normal((1024, 1024)).astype(np.float32) / 32
    response = api.post(infer_url("slow"), npy(x), content_type="application/x-npy")
    assert response.status_code == 202, response.content
    job = wait_for_job(response.json()["id"], timeout=120)
    assert job.state == "succeeded", (job.error_code, job.error_detail)
    assert job.params["reason"] == "longer than the synchronous limit"
    _, outputs = published_outputs(job)
    np.testing.assert_allclose(outputs["y"], models.reference(big, {"x": x})["y"], rtol=1e-4, atol=1e-5)

    strict = api.post(infer_url("slow") + "?mode=sync", npy(x), content_type="application/x-npy")
    assert strict.status_code == 504 and "longer than 0.05 s" in strict.json()["detail"]


def test_batch_run_over_a_dataset_artifact(mlp_version, owner, publish, api):
    rows = np.random.default_rng(5).standard_normal((100, 784)).astype(np.float32)
    _, dataset = publish(owner, "digits", {"inputs.npy": npy(rows), "README.txt": b"digits"}, kind="dataset")
    response = api.post(infer_url(), {"dataset": "alice/digits", "batch_size": 32}, format="json")
    assert response.status_code == 202, response.content
    job = wait_for_job(response.json()["id"])
    assert job.state == "succeeded", (job.error_code, job.error_detail)
    assert job.progress == 1.0 and any("ran 100 row(s) in batches of 32" in line["message"] for line in job.log)
    version, outputs = published_outputs(job)
    np.testing.assert_allclose(outputs["logits"], models.reference(MLP, {"x": rows})["logits"], rtol=1e-5, atol=1e-6)
    assert {p.target_id for p in version.provenance.all()} == {mlp_version.pk, dataset.pk}

    missing = api.post(infer_url(), {"dataset": "alice/digits", "dataset_file": "other.npy"}, format="json")
    assert missing.status_code == 404 and "inputs.npy" in missing.json()["detail"]
    assert not Artifact.objects.filter(name="mlp-outputs-2").exists()


def test_threads_and_output_selection(shared_storage, owner, publish, api):
    publish(owner, "two", {"two.onnx": TWO})
    body = {"inputs": {"a": [[1.0, 2.0, 3.0]], "k": [[2]]}, "threads": 2, "outputs": ["y"]}
    response = api.post(infer_url("two"), json.dumps(body), content_type="application/json")
    assert response.status_code == 200 and response.json()["outputs"] == {"y": [[2.0, 4.0, 6.0]]}
    response = api.post(infer_url("two"), {**body, "outputs": ["z"]}, format="json")
    assert response.status_code == 400 and "no output 'z'" in response.json()["detail"]


def test_benchmark_records_latency_per_hardware(mlp_version, api, other):
    import os

    url = "/api/v1/artifacts/alice/mlp/versions/1/benchmark"
    assert client_for(other).post(url, {"runs": 10}, format="json").status_code == 403
    assert api.post(url, {"batch_sizes": [0]}, format="json").status_code == 400
    refused = api.post(url, {"device": "gpu"}, format="json")
    assert refused.status_code == 503 and refused.json()["code"] == "no_worker"

    response = api.post(url, {"batch_sizes": [4, 1], "runs": 10}, format="json")
    assert response.status_code == 202, response.content
    job = wait_for_job(response.json()["id"])
    assert job.state == "succeeded", (job.error_code, job.error_detail)
    results = job.result["results"]
    assert [r["batch_size"] for r in results] == [1, 4]
    for row in results:
        assert row["runs"] == 10 and 0 < row["median_ms"] <= row["p95_ms"] < 1000
        assert row["hardware"]["kind"] == "cpu" and row["hardware"]["cores"] == os.cpu_count()
        assert row["provider"] == "CPUExecutionProvider"

    listed = api.get(url).json()["benchmarks"]
    assert [(b["batch_size"], b["median_ms"]) for b in listed] == [(r["batch_size"], r["median_ms"]) for r in results]
    # The measurements are part of the metadata record: RDF export and the search facet "hardware".
    turtle = api.get("/api/v1/artifacts/alice/mlp/versions/1/metadata/turtle").content.decode()
    assert "hpc:Benchmark" in turtle and "hpc:cpuCoreCount" in turtle and "medianExecutionTime" in turtle
    on_cpu = api.get("/api/v1/artifacts/?hardware=cpu").json()
    assert [a["name"] for a in on_cpu["results"]] == ["mlp"]
    assert api.get("/api/v1/artifacts/?hardware=gpu").json()["count"] == 0


def test_wire_format_keeps_shapes_dtypes_and_values():
    from hub.gateway import wire

    arrays = {"scalar": np.float32(2.5) * np.ones((), np.float32), "empty": np.zeros((0, 3), np.int64),
              "strided": np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2], "flags": np.array([True, False])}
    meta, back = wire.unpack(wire.pack({"k": 1}, arrays))
    assert meta == {"k": 1}
    for name, array in arrays.items():
        assert back[name].shape == array.shape and back[name].dtype == array.dtype
        np.testing.assert_array_equal(back[name], array)
    with pytest.raises(wire.WireError):
        wire.pack({}, {"objects": np.array([object()])})
    with pytest.raises(wire.WireError):
        wire.unpack(b"XXXX" + bytes(8))


def test_remembered_answers_never_outlive_a_change(mlp_version, owner, other):
    """Tokens and model resolutions are cached per web process; a revocation or a visibility change
    takes effect on the very next request."""
    from django.utils import timezone

    from hub.accounts.models import ApiToken

    token, raw = ApiToken.issue(owner, scope="write")
    client = client_for(None)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    body = {"inputs": [[0.0] * 784]}
    assert client.post(infer_url(), body, format="json").status_code == 200
    token.revoked = timezone.now()
    token.save()
    refused = client.post(infer_url(), body, format="json")
    assert refused.status_code == 401 and refused.json()["code"] == "invalid_token"

    reader = client_for(other)
    assert reader.post(infer_url(), body, format="json").status_code == 200
    artifact = mlp_version.artifact
    artifact.visibility = "private"
    artifact.save()
    assert reader.post(infer_url(), body, format="json").status_code == 404

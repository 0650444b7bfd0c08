"""Conversion through the whole hub: upload over the API, a real Celery worker converts in the sandbox,
the ONNX version is published with provenance and its verification report."""

from __future__ import annotations

import hashlib
import json

import pytest
from hpcfair.convert import sandbox

from hub.jobs.models import Job
from hub.registry.models import Version
from tests.conftest import multipart_file, wait_for_job
from tests.conversions import models

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


BASE_METADATA = {"description": "A randomly initialised model.", "creators": [{"name": "Alice Example"}],
                 "license": "MIT", "task": "classification"}


def publish_model(api, name: str, files: dict[str, bytes], metadata: dict | None = None) -> dict:
    assert api.post("/api/v1/artifacts/", {"kind": "model", "name": name, "title": name}, format="json").status_code \
        == 201
    response = api.post(f"/api/v1/artifacts/alice/{name}/versions/",
                        {"files": [multipart_file(p, d) for p, d in files.items()],
                         "metadata": json.dumps({**BASE_METADATA, "title": name, **(metadata or {})})},
                        format="multipart")
    assert response.status_code == 201, response.content
    return response.json()


def conversion_job(version_label: str, name: str) -> Job:
    version = Version.objects.get(artifact__name=name, label=version_label)
    return Job.objects.get(version=version, kind__in=["convert", "verify"])


@pytest.mark.parametrize("architecture", list(models.ARCHITECTURES))
def test_upload_converts_and_verifies(architecture, built_models, shared_storage, api):
    path, metadata = built_models[architecture]
    name = architecture.replace("_", "-")
    card = f"# {name}\n\nA randomly initialised {name}.\n".encode()
    publish_model(api, name, {path.name: path.read_bytes(), "README.md": card},
                  {"title": name, "license": "MIT", **metadata})
    job = wait_for_job(conversion_job("1", name).pk, timeout=240)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-5:])
    assert job.result["verified"] is True and job.result["version"] == "1-onnx"
    if sandbox.bwrap_path():  # the log and the report say which protections the conversion ran under
        assert any("sandbox: bubblewrap" in json.dumps(line) for line in job.log), job.log
    stages = [line["message"] for line in job.log if "%] " in line["message"]]  # where it was, as it went
    assert [s.split(": ", 1)[1][:5] for s in stages] == ["[5%] ", "[60%]", "[95%]"], job.log

    converted = api.get(f"/api/v1/artifacts/alice/{name}/versions/1-onnx/").json()
    onnx_name = path.with_suffix(".onnx").name
    # the model card comes along (issue 40, point 6)
    assert sorted(f["path"] for f in converted["files"]) == sorted([onnx_name, "README.md"])
    card_file = next(f for f in converted["files"] if f["path"] == "README.md")
    assert card_file["sha256"] == hashlib.sha256(card).hexdigest()
    assert converted["provenance"] == [{"relation": "converted_from", "target": f"alice/{name}@1",
                                        "target_pid": converted["provenance"][0]["target_pid"],
                                        "target_kind": "model", "restricted": False,
                                        "description": f"alice/{name}@1"}]
    meta = converted["metadata"]
    assert meta["format"] == "onnx" and meta["verified"] is True and meta["license"] == "MIT"
    assert meta["conversion"][path.with_suffix(".onnx").name]["sandbox"]["network"] in ("none", "the worker's")
    report = meta["verification"][onnx_name]
    assert report["checker"] == "passed" and report["compared"] is True and report["passed"] is True
    for run in report["runs"]:
        for output in run["outputs"]:
            assert output["passed"] and output["max_abs_diff"] <= report["atol"] + report["rtol"] * 10, output
    # A second batch size exercised the dynamic axes wherever the model has them.
    if any(s is None or isinstance(s, str) for spec in meta["inputs"] for s in spec["shape"]):
        batch_sizes = {next(iter(run["inputs"].values()))["shape"][0] for run in report["runs"]}
        assert len(batch_sizes) == 2
    conversion = meta["conversion"][onnx_name]
    assert conversion["sandbox"]["isolation"] in ("bubblewrap", "rlimits") and conversion["libraries"]["onnx"]
    # The source version shows what it was converted to.
    source = api.get(f"/api/v1/artifacts/alice/{name}/versions/1/").json()
    assert {"relation": "converted_from", "version": f"alice/{name}@1-onnx",
            "version_pid": converted["pid"]} in source["derivatives"]
    # The ONNX version is not converted again.
    assert not Job.objects.filter(version__label="1-onnx", version__artifact__name=name).exists()


def test_ensemble_converts_in_one_job(built_models, shared_storage, api):
    forest, _ = built_models["random_forest"]
    pipe, _ = built_models["scaler_logistic"]
    publish_model(api, "ensemble", {forest.name: forest.read_bytes(), pipe.name: pipe.read_bytes()})
    job = wait_for_job(conversion_job("1", "ensemble").pk, timeout=120)
    assert job.state == "succeeded", (job.error_code, job.error_detail)
    meta = Version.objects.get(artifact__name="ensemble", label="1-onnx").metadata
    assert set(meta["verification"]) == {"forest.onnx", "pipe.onnx"} and meta["verified"] is True
    assert set(meta["members"]) == {"forest.onnx", "pipe.onnx"}


def test_malicious_pickle_upload_fails_and_runs_nothing(tmp_path, shared_storage, api):
    marker = tmp_path / "payload-ran"
    name = models.malicious_pickle(tmp_path, marker)
    publish_model(api, "evil", {name: (tmp_path / name).read_bytes()})
    job = wait_for_job(conversion_job("1", "evil").pk, timeout=120)
    assert job.state == "failed" and job.error_code == "unsafe_pickle"
    assert "system" in job.error_detail and "Traceback" not in job.error_detail
    shown = api.get(f"/api/v1/jobs/{job.pk}/").json()
    assert shown["error_code"] == "unsafe_pickle"
    assert not marker.exists()
    assert not Version.objects.filter(artifact__name="evil", label__endswith="onnx").exists()


def test_pickle_that_maps_a_file_shows_nothing_of_it_anywhere(tmp_path, shared_storage, api):
    """The attack of issue 29: int(bytearray(numpy.memmap(PATH))) put the file into the job's messages."""
    import pickle

    import numpy as np

    from tests.conversions.test_pickles import Call

    secret = tmp_path / "shadow"
    secret.write_text(f"root:$6$SECRET-{tmp_path.name}:19000:0:99999:7:::")
    payload = Call(int, Call(bytearray, Call(np.memmap, str(secret), "uint8", "r")))
    publish_model(api, "mapper", {"model.pkl": pickle.dumps({"model": payload})})
    job = wait_for_job(conversion_job("1", "mapper").pk, timeout=120)
    assert job.state == "failed" and job.error_code == "unsafe_pickle", (job.error_code, job.error_detail)
    assert "numpy.memmap" in job.error_detail
    shown = api.get(f"/api/v1/jobs/{job.pk}/")
    for text in (job.error_detail, json.dumps(job.log), shown.content.decode()):
        assert "SECRET" not in text and "root:" not in text


def test_an_unpickling_error_goes_to_the_worker_log_not_to_the_user(tmp_path, shared_storage, api):
    """numpy.dtype is allowed and repeats its argument in its error: a crafted file controls that text."""
    import pickle

    import numpy as np

    from tests.conversions.test_pickles import Call

    planted = f"PLANTED-{tmp_path.name}"
    publish_model(api, "planted", {"model.pkl": pickle.dumps({"model": Call(np.dtype, planted)})})
    job = wait_for_job(conversion_job("1", "planted").pk, timeout=120)
    assert job.state == "failed" and job.error_code == "corrupt_file", (job.error_code, job.error_detail)
    assert "model.pkl" in job.error_detail
    shown = api.get(f"/api/v1/jobs/{job.pk}/")
    for text in (job.error_detail, json.dumps(job.log), shown.content.decode()):
        assert planted not in text
    assert planted in (shared_storage / "worker.log").read_text(errors="replace")  # the server log has it


def test_uploaded_onnx_is_verified_not_converted(built_models, shared_storage, api, tmp_path):
    from hpcfair.convert import convert_file

    path, metadata = built_models["torchscript_cnn"]
    convert_file(path, tmp_path / "cnn.onnx", inputs=metadata["inputs"])
    publish_model(api, "plain-onnx", {"cnn.onnx": (tmp_path / "cnn.onnx").read_bytes()})
    job = wait_for_job(conversion_job("1", "plain-onnx").pk, timeout=120)
    assert job.kind == "verify" and job.state == "succeeded", (job.error_code, job.error_detail)
    assert job.result["verified"] is True and job.result["files"]["cnn.onnx"]["converted"] is False
    assert Version.objects.filter(artifact__name="plain-onnx").count() == 1


def test_explicit_conversion_with_opset_and_optimisation(built_models, shared_storage, api, anon):
    path, _ = built_models["scaler_logistic"]
    publish_model(api, "explicit", {path.name: path.read_bytes()})
    wait_for_job(conversion_job("1", "explicit").pk, timeout=120)
    url = "/api/v1/artifacts/alice/explicit/versions/1/"
    assert anon.post(url + "convert", {"opset": 15}, format="json").status_code == 401
    bad = api.post(url + "convert", {"opset": 99}, format="json")
    assert bad.status_code == 400 and "opset" in bad.json()["errors"]
    response = api.post(url + "convert", {"opset": 15}, format="json")
    assert response.status_code == 202 and response["Location"] == response.json()["url"]
    job = wait_for_job(response.json()["id"], timeout=120)
    assert job.state == "succeeded", (job.error_code, job.error_detail)
    version = Version.objects.get(artifact__name="explicit", label=job.result["version"])
    assert version.metadata["opset"] == 15 and job.result["version"] == "1-onnx-2"

    not_onnx = api.post(url + "optimize", {}, format="json")
    assert not_onnx.status_code == 400 and not_onnx.json()["code"] == "unsupported_format"
    response = api.post("/api/v1/artifacts/alice/explicit/versions/1-onnx/optimize", {}, format="json")
    assert response.status_code == 202
    job = wait_for_job(response.json()["id"], timeout=120)
    assert job.state == "succeeded", (job.error_code, job.error_detail)
    optimized = Version.objects.get(artifact__name="explicit", label="1-onnx-opt")
    variants = optimized.metadata["optimization"]["variants"]
    assert {f.path for f in optimized.files.all()} == set(variants)
    for variant in variants.values():
        assert variant["size"] > 0 and variant["latency_ms"] > 0 and variant["max_abs_diff"] < 0.1
    assert optimized.provenance.get().relation == "derived_from"

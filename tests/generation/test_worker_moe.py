"""Issue 57, point 4 through the real parts: a Mixtral folder (a mixture of experts, random weights) published to
the hub is converted to a verified ONNX version and gets a generation model verified against transformers by the
real Celery worker (in the conversion sandbox); the engine's greedy text equals the published files' run here."""

from __future__ import annotations

import pytest
from hpcfair.generate import GenerateRequest, generate, open_model
from hpcfair.generate.run import text_of

from hub.jobs.models import Job
from tests.conftest import wait_for_job
from tests.generation.lm import folder_files, save_lm

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_mixtral_folder_converts_and_generates_on_the_hub(shared_storage, owner, publish, api, tmp_path):
    artifact, version = publish(owner, "tiny-mixtral", folder_files(save_lm(tmp_path / "mixtral", "mixtral")))
    for kind in ("convert", "generation"):
        job = Job.objects.get(version=version, kind=kind)
        assert wait_for_job(job.pk, timeout=600).state == "succeeded", (job.refresh_from_db(), job.error_detail)
    converted = artifact.versions.get(label=f"{version.label}-onnx")
    assert converted.metadata["verified"] is True
    assert "dense form" in converted.metadata["conversion"]["model.onnx"]["experts"]
    job = Job.objects.get(version=version, kind="generation")
    assert job.result["verified"] is True and job.result["generation"]["route"] == "onnx-kv"
    built = artifact.versions.get(label=job.result["version"])
    body = {"prompt": "the hub converts", "max_new_tokens": 12, "temperature": 0, "stream": False}
    answer = api.post(f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/generate", body,
                      format="json")
    assert answer.status_code == 200, answer.json()
    folder = tmp_path / "download"
    folder.mkdir()
    for file in built.files.all():
        (folder / file.path).write_bytes(api.get(f"/api/v1/artifacts/{artifact.full_name}/versions/{built.label}/"
                                                 f"files/{file.path}").getvalue())
    assert answer.json()["text"] == text_of(generate(open_model(folder), GenerateRequest.parse(body)))[0]

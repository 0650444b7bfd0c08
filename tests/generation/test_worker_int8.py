"""Issue 59, point 2, through the real parts: a published Llama folder's int8 generation build, asked for by the
client's ``optimize`` task (``precision: int8``), is made by a real Celery worker in the conversion sandbox,
checked by greedy tokens against transformers, published as ``<label>-genai-int8`` with its precision in its
metadata, and answers ``/v1/completions`` through the real ``openai`` client as its files do here."""

from __future__ import annotations

from pathlib import Path

import pytest
from hpcfair.generate import GenerateRequest, generate, open_model
from hpcfair.generate.run import text_of

from hub.jobs.models import Job
from hub.registry.models import Version
from tests.conftest import wait_for_job
from tests.generation.lm import folder_files, save_lm

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_an_int8_build_is_made_on_the_worker_and_completes_over_v1(shared_storage, owner, publish, tmp_path,
                                                                   live_server, settings):
    import openai
    from hpcfair import modelAPI

    from hub.accounts.models import ApiToken

    artifact, version = publish(owner, "tiny-llama", folder_files(save_lm(tmp_path / "src", "llama")))
    full = Job.objects.get(version=version, kind="generation")
    assert wait_for_job(full.pk, timeout=240).state == "succeeded"
    settings.HUB_PUBLIC_URL = live_server.url  # the download's file URLs
    _, raw = ApiToken.issue(owner, scope="write")
    [report] = modelAPI(live_server.url, raw).optimize({
        "general_args": {"task": "optimize"}, "model_args": {"model_file": artifact.full_name},
        "task_args": {"precision": "int8"}, "out_args": {"export_file": str(tmp_path / "out" / "lm.onnx")}})
    built = Version.objects.get(pid=report["pid"])
    assert built.label == f"{version.label}-genai-int8"
    generation = built.metadata["generation"]
    assert (generation["precision"], built.metadata["verified"]) == ("int8", True)
    assert generation["verification"]["method"].startswith("greedy tokens against transformers generate")
    assert generation["comparison"]["size_ratio"] < 1  # compared with the fp32 build: smaller
    assert report["report"]["precision"] == "int8"
    folder = Path(report["files"][0]).parent
    assert {"model.onnx", "genai_config.json", "tokenizer.json"} <= {Path(f).name for f in report["files"]}

    client = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=raw, max_retries=0)
    name = f"{artifact.full_name}@{built.label}"
    assert name in [m.id for m in client.models.list()]
    completion = client.completions.create(model=name, prompt="the hub converts", temperature=0, max_tokens=12)
    assert completion.usage.completion_tokens == 12
    body = {"prompt": "the hub converts", "max_new_tokens": 12, "temperature": 0}
    local, _ = text_of(generate(open_model(folder), GenerateRequest.parse(body)))
    assert completion.choices[0].text == local  # the engine ran the int8 files the hub published

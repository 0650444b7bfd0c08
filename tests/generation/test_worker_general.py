"""The general generation route through the real parts: a GPT-2 folder and a BART folder (families
onnxruntime-genai does not build) published to the hub get their generation models exported with their KV
cache and verified against transformers by a real Celery worker (in the conversion sandbox); the worker's
generation engine streams them over the same lane to ``POST …/generate`` (server-sent events and JSON), to the
real ``openai`` client and to ``hpcfair generate``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hpcfair.generate import GenerateRequest, generate, open_model
from hpcfair.generate.run import text_of

from hub.jobs.models import Job
from tests.conftest import wait_for_job
from tests.generation.lm import folder_files, save_lm, save_seq2seq
from tests.generation.test_worker import sse_events

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_gpt2_and_bart_build_and_generate_over_sse_json_openai_and_the_cli(shared_storage, owner, publish, api,
                                                                            tmp_path, live_server):
    import openai

    from hub.accounts.models import ApiToken

    published, texts = {}, {}
    for name, folder in (("tiny-gpt2", save_lm(tmp_path / "gpt2", "gpt2")),
                         ("tiny-bart", save_seq2seq(tmp_path / "bart", "bart"))):
        published[name] = publish(owner, name, folder_files(folder))
    _, raw = ApiToken.issue(owner, scope="write")
    client = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=raw, max_retries=0)
    for name, (artifact, version) in published.items():
        job = Job.objects.get(version=version, kind="generation")
        assert wait_for_job(job.pk, timeout=240).state == "succeeded", (job.refresh_from_db(), job.error_detail)
        job.refresh_from_db()
        report = job.result["generation"]
        assert job.result["verified"] is True and report["route"] == "onnx-kv", report
        assert report["verification"]["method"] == "greedy tokens against transformers generate"
        assert all(case["matched"] == case["tokens"] for case in report["verification"]["prompts"])
        built = artifact.versions.get(label=job.result["version"])
        assert built.label == f"{version.label}-kv" and built.metadata["format"] == "onnx-kv"
        assert built.metadata["task"] == ("text2text-generation" if name == "tiny-bart" else "text-generation")

        url = f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/generate"
        body = {"prompt": "the hub converts", "max_new_tokens": 12, "temperature": 0}
        response = api.post(url, body, format="json")
        assert response.status_code == 200, response.json()
        events = sse_events(response)
        assert events[-1][0] == "done" and events[-1][1]["completion_tokens"] == 12
        streamed = "".join(data["text"] for event, data in events if event == "message")
        texts[name] = streamed
        whole = api.post(url, {**body, "stream": False}, format="json").json()
        assert whole["text"] == streamed and whole["finish_reason"] == "length"
        folder = tmp_path / f"{name}-download"  # the published files, run here in process, say the same
        folder.mkdir()
        for file in built.files.all():
            (folder / file.path).write_bytes(api.get(f"/api/v1/artifacts/{artifact.full_name}/versions/"
                                                     f"{built.label}/files/{file.path}").getvalue())
        assert text_of(generate(open_model(folder), GenerateRequest.parse(body)))[0] == streamed
        sampled = [api.post(url, {**body, "temperature": 1.0, "seed": 7, "stream": False}, format="json").json()
                   for _ in range(2)]
        assert sampled[0]["text"] == sampled[1]["text"]  # a seed repeats a sample on the engine too

        model = f"{artifact.full_name}@{version.label}"
        completion = client.completions.create(model=model, prompt="the hub converts", temperature=0, max_tokens=12)
        assert completion.choices[0].text == streamed and completion.usage.completion_tokens == 12
        messages = [{"role": "user", "content": "hi"}]
        answer = client.chat.completions.create(model=model, messages=messages, temperature=0, max_tokens=8)
        pieces = list(client.chat.completions.create(model=model, messages=messages, temperature=0, max_tokens=8,
                                                     stream=True))
        assert "".join(p.choices[0].delta.content or "" for p in pieces) == answer.choices[0].message.content
        assert pieces[-1].choices[0].finish_reason == "length" == answer.choices[0].finish_reason

    artifact, _ = published["tiny-gpt2"]
    env = {**os.environ, "HPCFAIR_ENDPOINT": live_server.url, "HPCFAIR_TOKEN": raw}
    cli = subprocess.run([sys.executable, "-c", "from hpcfair.cli import entry; entry()", "generate",
                          artifact.full_name, "the hub converts", "--max-new-tokens", "12", "--temperature", "0"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == texts["tiny-gpt2"] and "[12 tokens, length]" in cli.stderr
    assert {m.id for m in client.models.list()} == {a.full_name for a, _ in published.values()}  # names typed

"""Text generation through the real parts: a Llama folder published to the hub gets its generation model built
by a real Celery worker (in the conversion sandbox), and the worker's generation engine streams text over
the lane to ``POST …/generate`` (server-sent events and JSON) and to the real ``openai`` client."""

from __future__ import annotations

import orjson
import pytest
from hpcfair.generate import GenerateRequest, generate, open_model
from hpcfair.generate.run import text_of

from hub.jobs.models import Job
from hub.registry.models import Version
from tests.conftest import wait_for_job
from tests.generation.lm import folder_files, save_lm

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def llama(shared_storage, owner, publish, tmp_path):
    """A published Llama folder and its built generation version."""
    source = save_lm(tmp_path / "tiny-llama", "llama")
    artifact, version = publish(owner, "tiny-llama", folder_files(source))
    job = Job.objects.get(version=version, kind="generation")
    assert wait_for_job(job.pk, timeout=240).state == "succeeded", (job.refresh_from_db(), job.error_detail)
    job.refresh_from_db()
    return artifact, version, job.result


def sse_events(response) -> list[tuple[str, dict]]:
    text = b"".join(response.streaming_content).decode()
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines.get("event", "message"), orjson.loads(lines["data"])))
    return events


def test_a_published_llama_generates_over_sse_json_and_openai(llama, api, tmp_path, live_server, owner, publish):
    """One test, one build (a worker builds for about a minute): the hub's endpoint, then OpenAI's."""
    artifact, version, result = llama
    assert result["verified"] is True
    assert result["generation"]["verification"]["method"] == "greedy tokens against transformers generate"
    url = f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/generate"
    body = {"prompt": "the hub converts", "max_new_tokens": 12, "temperature": 0}
    response = api.post(url, body, format="json")
    assert response.status_code == 200, response.json()
    assert response["Content-Type"].startswith("text/event-stream")
    events = sse_events(response)
    assert events[-1][0] == "done" and events[-1][1]["completion_tokens"] == 12
    assert events[-1][1]["finish_reason"] == "length"
    streamed = "".join(data["text"] for name, data in events if name == "message")
    whole = api.post(url, {**body, "stream": False}, format="json").json()
    assert whole["text"] == streamed and whole["completion_tokens"] == 12
    # the same text as the published files run here, in process
    built = artifact.versions.get(label=result["version"])
    folder = tmp_path / "download"
    folder.mkdir()
    for file in built.files.all():
        (folder / file.path).write_bytes(api.get(f"/api/v1/artifacts/{artifact.full_name}/versions/{built.label}"
                                                 f"/files/{file.path}").getvalue())
    local, _ = text_of(generate(open_model(folder), GenerateRequest.parse(body)))
    assert streamed == local
    long = api.post(url, {"prompt": "the hub converts models " * 200}, format="json")
    assert long.status_code == 400 and long.json()["code"] == "prompt_too_long"
    _openai_client_chats_and_completes(artifact, version, live_server, owner, api)
    _the_client_and_the_cli_stream(artifact, streamed, live_server, owner, tmp_path)
    _a_dataset_of_prompts_is_a_job(artifact, version, streamed, api, owner, publish)


def _a_dataset_of_prompts_is_a_job(artifact, version, expected: str, api, owner, publish) -> None:
    data, _ = publish(owner, "prompts", {"prompts.jsonl": b'{"prompt": "the hub converts"}\n'
                                                          b'{"prompt": "' + b"x " * 400 + b'"}\n'
                                                          b'{"messages": [{"role": "user", "content": "hi"}]}\n'},
                      kind="dataset")
    url = f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/generate"
    accepted = api.post(url, {"dataset": data.full_name, "max_new_tokens": 12, "temperature": 0}, format="json")
    assert accepted.status_code == 202, accepted.json()
    job = wait_for_job(accepted.json()["id"], timeout=180)
    assert job.state == "succeeded", job.error_detail
    published = Version.objects.get(pid=job.result["pid"])
    lines = [orjson.loads(line) for line in
             api.get(f"/api/v1/artifacts/{published.artifact.full_name}/versions/{published.label}/files/"
                     "generations.jsonl").getvalue().splitlines()]
    assert lines[0]["text"] == expected and lines[0]["completion_tokens"] == 12
    assert lines[1]["error"] == "prompt_too_long"  # one prompt too long loses none of the others
    assert lines[2]["completion_tokens"] == 12
    assert job.result["prompts"] == 3 and job.result["completion_tokens"] == 24
    assert {link.target_id for link in published.provenance.all()} == {job.params["model"], data.latest_version().pk}


def _the_client_and_the_cli_stream(artifact, expected: str, live_server, owner, tmp_path) -> None:
    import os
    import subprocess
    import sys

    from hpcfair import modelAPI

    from hub.accounts.models import ApiToken

    _, raw = ApiToken.issue(owner, scope="write")
    seen: list[str] = []
    api = modelAPI(live_server.url, raw)
    result = api.generate({"general_args": {"task": "generate"},
                           "task_args": {"model_file": artifact.full_name, "prompt": "the hub converts",
                                         "max_new_tokens": 12, "temperature": 0}}, seen.append)
    assert result["text"] == expected == "".join(seen) and result["completion_tokens"] == 12
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "the hub converts"}\n{"messages": [{"role": "user", "content": "hi"}], '
                       '"max_new_tokens": 3}\n')
    batch = api.run({"general_args": {"task": "generate"},
                     "task_args": {"model_file": artifact.full_name, "input": str(prompts), "max_new_tokens": 12,
                                   "temperature": 0}, "out_args": {"export_file": str(tmp_path / "out.jsonl")}})
    assert [r["completion_tokens"] for r in batch["results"]] == [12, 3]
    assert orjson.loads((tmp_path / "out.jsonl").read_text().splitlines()[0])["text"] == expected
    env = {**os.environ, "HPCFAIR_ENDPOINT": live_server.url, "HPCFAIR_TOKEN": raw}
    cli = subprocess.run([sys.executable, "-c", "from hpcfair.cli import entry; entry()", "generate",
                          artifact.full_name, "the hub converts", "--max-new-tokens", "12", "--temperature", "0"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == expected and "[12 tokens, length]" in cli.stderr
    refused = subprocess.run([sys.executable, "-c", "from hpcfair.cli import entry; entry()", "generate",
                              artifact.full_name, "x", "--max-new-tokens", "0"], capture_output=True, text=True,
                             env=env, timeout=120)
    assert refused.returncode != 0 and "max_new_tokens" in refused.stderr


def _openai_client_chats_and_completes(artifact, version, live_server, owner, api):
    import openai

    from hub.accounts.models import ApiToken

    _, raw = ApiToken.issue(owner, scope="write")
    client = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=raw, max_retries=0)
    model = f"{artifact.full_name}@{version.label}"
    messages = [{"role": "user", "content": "hi"}]
    answer = client.chat.completions.create(model=model, messages=messages, temperature=0, max_tokens=8)
    assert answer.choices[0].finish_reason == "length" and answer.usage.completion_tokens == 8
    pieces = list(client.chat.completions.create(model=model, messages=messages, temperature=0, max_tokens=8,
                                                 stream=True))
    assert "".join(p.choices[0].delta.content or "" for p in pieces) == answer.choices[0].message.content
    assert pieces[-1].choices[0].finish_reason == "length"
    hub = api.post(f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/generate",
                   {"messages": messages, "max_new_tokens": 8, "temperature": 0, "stream": False},
                   format="json").json()
    assert hub["text"] == answer.choices[0].message.content
    completion = client.completions.create(model=artifact.full_name, prompt="the hub", temperature=0, max_tokens=5)
    assert completion.usage.completion_tokens == 5 and completion.choices[0].text is not None
    listed = [m.id for m in client.models.list()]
    assert listed == [artifact.full_name]  # the name people type (issue 55), not the build's label
    assert client.completions.create(model=listed[0], prompt="the hub", temperature=0,
                                     max_tokens=5).choices[0].text == completion.choices[0].text
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=model, messages=messages, max_tokens=100_000)
    assert "max_new_tokens" in caught.value.message
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nobody/nothing", messages=messages)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{live_server.url}/v1", api_key="wrong", max_retries=0).models.list()

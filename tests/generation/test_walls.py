"""The generation engine's walls through the real parts (issue 51): a GPT-2 folder whose chat template and
tokenizer turn hostile on some input, built and verified by a real worker (their ordinary input is fine), then
asked through the hub for the inputs that bite. Each request is answered with a coded 4xx/5xx at once or a
second past its deadline, and an ordinary generation right after works: the engine was stopped or replaced,
not left spinning, out of memory or dead."""

from __future__ import annotations

import time

import pytest

from hub.jobs.models import Job
from tests.conftest import start_worker, stop_process, wait_for_job, worker_env
from tests.generation.lm import CHAT_TEMPLATE, folder_files, save_lm

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MEMORY_MB = 256
SECONDS = 8.0
HOSTILE = ("{% if messages[0]['content'] == 'bomb' %}{% set x = 'ab' * 1100000000 %}{{ x|length }}"
           "{% elif messages[0]['content'] == 'spin' %}{% for i in range(100000) %}{% for j in range(100000) %}"
           "{% endfor %}{% endfor %}{% else %}" + CHAT_TEMPLATE + "{% endif %}")
PANIC = "a" * 40 + "!"  # a run of a's the pre-tokenizer's (a|a)+$ backtracks on until Onig gives up: a panic


@pytest.fixture(scope="module")
def walled_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """A worker whose generation requests may add at most MEMORY_MB to its engine."""
    from workers.celery import app

    root = tmp_path_factory.mktemp("walled")
    app.control.purge()
    proc = start_worker(root, worker_env(root, HUB_GENERATE_MEMORY_MB=str(MEMORY_MB)))
    yield root
    stop_process(proc)


def hostile_gpt2(folder):
    """The test's GPT-2 folder with a chat template that bombs or spins on a word, and a pre-tokenizer regex
    that backtracks without end on a long run of one letter."""
    import json

    save_lm(folder, "gpt2")
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(a|a)+$"}, "behavior": "Isolated", "invert": False},
        tokenizer["pre_tokenizer"]]}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = HOSTILE
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return folder


def test_hostile_templates_and_tokenizers_are_answered_and_the_engine_goes_on(walled_worker, settings, owner,
                                                                              publish, api, tmp_path):
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(walled_worker / "blobs")}
    settings.HUB_UPLOAD_DIR = walled_worker / "uploads"
    settings.HUB_GENERATE_S = SECONDS
    artifact, version = publish(owner, "hostile-gpt2", folder_files(hostile_gpt2(tmp_path / "gpt2")))
    job = Job.objects.get(version=version, kind="generation")
    assert wait_for_job(job.pk, timeout=300).state == "succeeded", (job.refresh_from_db(), job.error_detail)
    url = f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/generate"

    def ask(body: dict, seconds: float) -> tuple[int, dict, float]:
        began = time.monotonic()
        answer = api.post(url, {**body, "stream": False, "max_new_tokens": 4, "temperature": 0}, format="json")
        took = time.monotonic() - began
        assert took < seconds, (body, took, answer.content)
        return answer.status_code, answer.json(), took

    def ordinary() -> None:
        status, body, _ = ask({"messages": [{"role": "user", "content": "the hub converts"}]}, 60)
        assert status == 200 and body["completion_tokens"] == 4, body

    ordinary()
    status, body, _ = ask({"messages": [{"role": "user", "content": "bomb"}]}, 60)  # 2.2 GB of string
    assert status == 422 and body["code"] == "memory_limit", body
    assert "HUB_GENERATE_MEMORY_MB" in body["detail"] and "/" not in body["detail"].split("MiB")[0]
    ordinary()
    status, body, took = ask({"messages": [{"role": "user", "content": "spin"}]}, SECONDS + 6)  # 10^10 loops
    assert status == 504 and body["code"] == "worker_timeout" and "time limit" in body["detail"], body
    assert took >= SECONDS - 1  # stopped at its deadline, not before
    ordinary()  # a new engine, at once
    status, body, took = ask({"prompt": PANIC}, SECONDS)  # a PanicException, a BaseException
    assert status == 422 and body["code"] == "run_failed" and "PanicException" in body["detail"], body
    assert took < SECONDS - 2  # answered at once, not at the caller's timeout
    ordinary()

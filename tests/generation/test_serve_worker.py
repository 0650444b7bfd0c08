"""A ``serve`` job on the Celery executor: a real worker builds a tiny Llama's generation model, then runs the
node's runner (``hpcfair.serve``) as its child; the hub routes the real ``openai`` client and its own ``…/generate``
there until the server stops after its idle time; a cancelled serve job's server stops at once."""

from __future__ import annotations

import json
import os
import socket
import time
from urllib.parse import urlsplit

import pytest

from hub.accounts.models import ApiToken
from hub.jobs.models import Job
from tests.conftest import start_worker, stop_process, wait_for_job, worker_env
from tests.generation.lm import folder_files, save_lm
from tests.generation.test_serve_slurm import MESSAGES, in_process, serve, state
from tests.jobs.test_slurm import point_at, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SERVE = {"HUB_SERVE_HOST": "127.0.0.1", "HUB_SERVE_PORTS": os.environ.get("HUB_TEST_SERVE_PORTS", ""),
         "HUB_GENERATE_THREADS": "1"}


@pytest.fixture(scope="module")
def serve_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    from workers.celery import app

    root = tmp_path_factory.mktemp("serve-worker")
    app.control.purge()
    proc = start_worker(root, worker_env(root, **SERVE), name="serve-worker")
    yield root
    stop_process(proc)


def answers(url: str) -> bool:
    where = urlsplit(url)
    try:
        socket.create_connection((where.hostname, where.port), timeout=1).close()
    except OSError:
        return False
    return True


def test_a_serve_job_on_a_celery_worker_answers_until_idle_and_stops_when_cancelled(
        serve_worker, settings, owner, publish, api, live_server, tmp_path):
    import openai

    point_at(settings, serve_worker)
    artifact, version = publish(owner, "tiny-llama", folder_files(save_lm(tmp_path / "tiny-llama", "llama")))
    build = wait_for_job(Job.objects.get(version=version, kind="generation").pk, timeout=300)
    assert build.state == "succeeded", (build.error_code, build.error_detail)
    built = artifact.versions.get(label=build.result["version"])
    _, raw = ApiToken.issue(owner, scope="write")
    client = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=raw, max_retries=0)

    job_id = serve(api, artifact, version, idle_s=3)
    wait_for(lambda: state(client, artifact.full_name) == "live", 120, "never live")
    job = Job.objects.get(pk=job_id)
    assert job.execution is None and job.worker  # Celery's: no batch job
    answer = client.chat.completions.create(model=artifact.full_name, messages=MESSAGES, temperature=0, max_tokens=5)
    expected = in_process(built, tmp_path, 5)
    assert answer.choices[0].message.content == expected
    # The hub's own …/generate goes to the served model's server too (its count of requests says so), whole and
    # streamed as the hub's events.
    generate = f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/generate"
    asked = {"messages": MESSAGES, "max_new_tokens": 5, "temperature": 0}
    whole = api.post(generate, {**asked, "stream": False}, format="json")
    assert whole.status_code == 200, whole.content
    assert whole.json()["text"] == expected and whole.json()["completion_tokens"] == 5
    events = b"".join(api.post(generate, asked, format="json").streaming_content).decode()
    texts = [json.loads(line[6:]).get("text", "") for line in events.splitlines() if line.startswith("data: ")]
    assert "event: done" in events and "".join(texts) == expected, events
    done = wait_for_job(job_id, timeout=60)
    assert done.state == "succeeded" and done.result["ended"] == "idle" and done.result["requests"] == 3, done.log
    assert state(client, artifact.full_name) == "offline" and not answers(job.endpoint.url)

    job_id = serve(api, artifact, version, idle_s=600)
    wait_for(lambda: state(client, artifact.full_name) == "live", 120, "never live")
    url = Job.objects.get(pk=job_id).endpoint.url
    assert answers(url)
    assert api.post(f"/api/v1/jobs/{job_id}/cancel").status_code in (200, 202)
    assert wait_for_job(job_id, timeout=30).state == "cancelled"
    deadline = time.monotonic() + 15
    while answers(url) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not answers(url) and state(client, artifact.full_name) == "offline"

"""A ``serve`` job on the private Slurm cluster (scripts/slurm.sh): a real Celery worker builds a tiny Llama's
generation model and submits the serve job with sbatch; the node's runner serves it with the hub's ONNX engine
(``hpcfair.serve``) and announces itself; the hub routes the real ``openai`` client's requests there (streaming
too), reports the model ``live`` in ``/v1/models``, then ``offline`` once the server stopped after its idle time;
a cancelled serve job's Slurm job is cancelled with its route; a GPU serve job on a node without a GPU fails in
words."""

from __future__ import annotations

import os
import time

import pytest
from hpcfair.generate import GenerateRequest, generate, open_model
from hpcfair.generate.run import text_of

from hub.accounts.models import ApiToken
from hub.jobs.models import Job
from hub.storage import get_blob_store
from tests.conftest import wait_for_job
from tests.generation.lm import folder_files, save_lm
from tests.jobs.test_slurm import cluster_worker, point_at, slurm_state, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PORTS = os.environ.get("HUB_TEST_SERVE_PORTS", "")
SERVE = {"HUB_EXECUTORS": "serve=slurm", "HUB_SERVE_HOST": "127.0.0.1", "HUB_SERVE_PORTS": PORTS,
         "HUB_GENERATE_THREADS": "1", "HUB_SLURM_MEM": "1G"}
MESSAGES = [{"role": "user", "content": "the hub converts"}]


@pytest.fixture(scope="module")
def serve_root(django_db_setup, django_db_blocker, tmp_path_factory):
    yield from cluster_worker(tmp_path_factory, "serve", **SERVE)


@pytest.fixture
def hub(settings, serve_root):
    """This process submits and routes as the worker does: the same blobs, job folders and settings."""
    point_at(settings, serve_root, HUB_EXECUTORS=["serve=slurm"], HUB_SERVE_HOST="127.0.0.1",
             HUB_SERVE_PORTS=[int(p) for p in PORTS.split("-") if p])
    yield serve_root
    deadline = time.monotonic() + 60
    while Job.objects.filter(state__in=(Job.State.QUEUED, Job.State.RUNNING)).exists() and time.monotonic() < deadline:
        time.sleep(0.25)


@pytest.fixture
def llama(hub, owner, publish, tmp_path):
    """A published Llama folder and its generation build (by the worker)."""
    artifact, version = publish(owner, "tiny-llama", folder_files(save_lm(tmp_path / "tiny-llama", "llama")))
    build = wait_for_job(Job.objects.get(version=version, kind="generation").pk, timeout=300)
    assert build.state == "succeeded", (build.error_code, build.error_detail)
    return artifact, version, artifact.versions.get(label=build.result["version"])


def state(client, model: str) -> str | None:
    return next((m.model_extra.get("state") for m in client.models.list() if m.id == model), None)


def serve(api, artifact, version, **body) -> str:
    response = api.post(f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/serve", body, format="json")
    assert response.status_code == 202, response.content
    return response.json()["id"]


def in_process(built, tmp_path, tokens: int) -> str:
    folder = tmp_path / "built"
    folder.mkdir()
    for file in built.files.all():
        with get_blob_store().open(file.blob_id) as body:
            (folder / file.path).write_bytes(body.read())
    text, _ = text_of(generate(open_model(folder), GenerateRequest.parse(
        {"messages": MESSAGES, "max_new_tokens": tokens, "temperature": 0})))
    return text


def test_a_serve_job_on_slurm_answers_openai_is_live_then_offline_after_its_idle_time(
        llama, api, owner, live_server, tmp_path):
    import openai

    artifact, version, built = llama
    _, raw = ApiToken.issue(owner, scope="write")
    client = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=raw, max_retries=0)
    model = artifact.full_name  # the name /v1/models lists for the build
    assert state(client, model) is None  # not served on a node: no state
    job_id = serve(api, artifact, version, idle_s=4)
    assert serve(api, artifact, version, idle_s=4) == job_id  # asked again while it lives: the same job
    seen = []
    wait_for(lambda: seen.append(state(client, model)) or seen[-1] == "live", 120, f"never live: {seen}")
    assert set(seen) <= {"queued", "starting", "live"}, seen
    job = Job.objects.get(pk=job_id)
    assert job.state == "running" and job.execution["executor"] == "slurm" and job.version == built
    assert slurm_state(job.execution["id"]) == "RUNNING"
    assert any(f"serving {artifact.full_name}@{built.label} at http://127.0.0.1:" in line["message"]
               for line in job.log), job.log

    answer = client.chat.completions.create(model=model, messages=MESSAGES, temperature=0, max_tokens=6)
    assert answer.choices[0].message.content == in_process(built, tmp_path, 6)
    assert answer.usage.completion_tokens == 6 and answer.model == f"{artifact.full_name}@{built.label}"
    pieces = list(client.chat.completions.create(model=model, messages=MESSAGES, temperature=0, max_tokens=6,
                                                 stream=True))
    assert "".join(p.choices[0].delta.content or "" for p in pieces) == answer.choices[0].message.content
    with pytest.raises(openai.BadRequestError):  # checked by the hub before it goes anywhere
        client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=100_000)

    done = wait_for_job(job_id, timeout=90)  # 4 s without a request: the server stops, its Slurm job completes
    assert done.state == "succeeded", (done.error_code, done.error_detail, done.log)
    assert done.result["ended"] == "idle" and done.result["requests"] == 2 and done.result["engine"] == "onnx"
    assert done.result["execution"]["executor"] == "slurm"
    assert state(client, model) == "offline"
    _cancelling_a_serve_job_cancels_its_slurm_job_and_its_route(artifact, version, built, api, owner, client)


def _cancelling_a_serve_job_cancels_its_slurm_job_and_its_route(artifact, version, built, api, owner, client):
    job_id = serve(api, artifact, version, idle_s=600)
    wait_for(lambda: Job.objects.get(pk=job_id).state == "running" and Job.objects.get(pk=job_id).endpoint.url,
             120, "never announced")
    from hub.generation import serving

    assert serving.live_endpoint(version, owner) is not None
    response = api.post(f"/api/v1/jobs/{job_id}/cancel")
    assert response.status_code in (200, 202), response.content
    job = Job.objects.get(pk=job_id)
    assert job.state == "cancelled" and serving.live_endpoint(version, owner) is None
    wait_for(lambda: slurm_state(job.execution["id"]) == "CANCELLED", 30, "Slurm still runs the server")
    assert state(client, artifact.full_name) == "offline"


def test_a_gpu_serve_job_on_a_node_without_a_gpu_fails_in_words(hub, owner, publish, api, tmp_path, settings):
    """vLLM's path: a Hugging Face folder on the gpu partition, whose GPU is Slurm's count only."""
    settings.HUB_GENERATION_AUTO = False  # vLLM serves the folder itself: no build needed
    artifact, version = publish(owner, "gpu-llama", folder_files(save_lm(tmp_path / "gpu-llama", "llama")))
    job = wait_for_job(serve(api, artifact, version, device="gpu", idle_s=5), timeout=120)
    assert job.params["engine"] == "vllm" and job.execution["partition"] == "gpu"
    assert job.state == "failed" and job.error_code == "not_runnable", (job.error_code, job.error_detail)
    assert "shows none" in job.error_detail or "vLLM is not installed" in job.error_detail

"""A served model's own server (``hpcfair.serve``), as a node runs it: the node's runner on a real generation build
(a tiny Llama built by the hub's builder), answering the real ``openai`` client with the job's secret only, equal
to the build run in process, and stopping after its idle time; the front's pass-through to an OpenAI server of
its own (vLLM's path) against another such server; vLLM's command line and the node's checks, without vLLM."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hpcfair.compute import CodedError
from hpcfair.generate import GenerateRequest, generate, open_model
from hpcfair.generate.run import text_of
from hpcfair.serve import Upstream, bind, engine_check, gpus, vllm_command

from tests.conftest import ROOT
from tests.ports import free_ports as first_free

pytestmark = pytest.mark.slow

MESSAGES = [{"role": "user", "content": "the hub converts"}]


def free_ports() -> list[int]:
    """A range of ports for the servers: ``HUB_TEST_SERVE_PORTS`` (first-last), else five free ones."""
    if os.environ.get("HUB_TEST_SERVE_PORTS"):
        return [int(p) for p in os.environ["HUB_TEST_SERVE_PORTS"].split("-")]
    first = first_free(5)
    return [first, first + 4]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    from hpcfair.generate.build import build

    from tests.generation.lm import save_lm

    root = tmp_path_factory.mktemp("serve-build")
    build(save_lm(root / "source", "llama"), root / "built")
    return root / "built"


def job_folder(tmp_path: Path, built: Path, **spec) -> Path:
    """A job folder as the hub stages one: the model, the secret, job.json."""
    folder = tmp_path / "job"
    shutil.copytree(built, folder / "model")
    (folder / "secret").write_text("s3cret-of-the-job")
    (folder / "out").mkdir()
    (folder / "job.json").write_text(json.dumps({
        "compute": "serve", "engine": "onnx", "model": "model", "name": "alice/tiny@1", "idle_s": 3,
        "host": "127.0.0.1", "ports": free_ports(), "threads": 1, "max_tokens": 64, "seconds": 60, **spec}))
    return folder


def runner(folder: Path) -> tuple[subprocess.Popen, str]:
    """The node's runner on ``folder``, and its URL once it announced it."""
    process = subprocess.Popen([sys.executable, "-m", "hpcfair.slurm_runner", str(folder)],
                               env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "client")},
                               stdout=open(folder / "task-0.log", "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    deadline = time.monotonic() + 120
    while not (folder / "out" / "address.json").exists():
        assert process.poll() is None and time.monotonic() < deadline, (folder / "task-0.log").read_text()
        time.sleep(0.1)
    return process, json.loads((folder / "out" / "address.json").read_text())["url"]


def expected(built: Path, tokens: int) -> str:
    text, _ = text_of(generate(open_model(built), GenerateRequest.parse(
        {"messages": MESSAGES, "max_new_tokens": tokens, "temperature": 0})))
    return text


def test_the_node_server_answers_openai_with_the_secret_only_and_stops_when_idle(built, tmp_path):
    import openai

    folder = job_folder(tmp_path, built)
    process, url = runner(folder)
    try:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="s3cret-of-the-job", max_retries=0)
        answer = client.chat.completions.create(model="alice/tiny@1", messages=MESSAGES, temperature=0, max_tokens=6)
        assert answer.choices[0].message.content == expected(built, 6)
        assert answer.usage.completion_tokens == 6 and answer.model == "alice/tiny@1"
        pieces = list(client.chat.completions.create(model="x", messages=MESSAGES, temperature=0, max_tokens=6,
                                                     stream=True))
        assert "".join(p.choices[0].delta.content or "" for p in pieces) == answer.choices[0].message.content
        assert pieces[-1].choices[0].finish_reason == "length"
        assert [m.id for m in client.models.list()] == ["alice/tiny@1"]
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="x", messages=MESSAGES, max_tokens=100_000)
        assert "max_new_tokens" in caught.value.message
        with pytest.raises(openai.BadRequestError) as caught:  # the engine's own refusal, in words
            client.chat.completions.create(model="x", messages=[{"role": "user", "content": "the hub " * 400}],
                                           max_tokens=5)
        assert caught.value.code == "prompt_too_long" and "context" in caught.value.message
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0).models.list()
        assert process.wait(timeout=60) == 0  # idle for 3 s: it stopped by itself
    finally:
        process.kill()
    result = json.loads((folder / "out" / "result-0.json").read_text())
    assert result["ended"] == "idle" and result["requests"] == 5 and result["engine"] == "onnx"


def test_the_front_passes_requests_and_streams_through_to_a_server_behind_it(built, tmp_path):
    """vLLM's path: the front before an OpenAI server on 127.0.0.1 (here another node server, for vLLM)."""
    import openai

    folder = job_folder(tmp_path, built, idle_s=60)
    process, url = runner(folder)
    upstream = Upstream(process, int(url.rsplit(":", 1)[1]), "s3cret-of-the-job", 60)
    front = bind("127.0.0.1", free_ports(), upstream, name="alice/tiny@1", secret="front-secret")
    threading.Thread(target=front.serve_forever, daemon=True).start()
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{front.server_address[1]}/v1", api_key="front-secret",
                               max_retries=0)
        answer = client.chat.completions.create(model="x", messages=MESSAGES, temperature=0, max_tokens=5)
        assert answer.choices[0].message.content == expected(built, 5) and answer.model == "alice/tiny@1"
        pieces = list(client.chat.completions.create(model="x", messages=MESSAGES, temperature=0, max_tokens=5,
                                                     stream=True))
        assert "".join(p.choices[0].delta.content or "" for p in pieces) == answer.choices[0].message.content
        assert front.requests == 2
        upstream.close()  # stops the server behind it, as it stops vLLM
        assert process.poll() is not None
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(model="x", messages=MESSAGES, max_tokens=5)
        assert caught.value.status_code == 502 and "does not answer" in caught.value.message
    finally:
        front.shutdown()
        front.server_close()
        upstream.close()


def test_vllm_is_chosen_by_the_gpus_the_node_gives_and_its_command_line():
    assert gpus({"CUDA_VISIBLE_DEVICES": "0,1"}) == ["0", "1"]
    assert gpus({"CUDA_VISIBLE_DEVICES": ""}) == [] and gpus({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}) == []
    assert vllm_command(Path("/jobs/1/model/llm"), "alice/llm@1", 41234, ["0", "1"], python="/opt/py") == [
        "/opt/py", "-m", "vllm.entrypoints.openai.api_server", "--model", "/jobs/1/model/llm",
        "--served-model-name", "alice/llm@1", "--host", "127.0.0.1", "--port", "41234",
        "--tensor-parallel-size", "2"]
    engine_check("vllm", "gpu", ["0"], has_vllm=True)
    engine_check("onnx", "cpu", [], has_vllm=False)
    for engine, device, devices, has, words in [("vllm", "gpu", [], True, "shows none"),
                                                ("vllm", "cpu", [], True, "GPU nodes only"),
                                                ("vllm", "gpu", ["0"], False, "vLLM is not installed"),
                                                ("onnx", "gpu", [], False, "shows none")]:
        with pytest.raises(CodedError) as caught:
            engine_check(engine, device, devices, has_vllm=has)
        assert caught.value.code == "not_runnable" and words in caught.value.detail


def test_a_node_without_a_gpu_refuses_vllm_in_words(built, tmp_path):
    folder = job_folder(tmp_path, built, engine="vllm", device="gpu")
    done = subprocess.run([sys.executable, "-m", "hpcfair.slurm_runner", str(folder)], capture_output=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "client"), "CUDA_VISIBLE_DEVICES": ""},
                          timeout=120, check=False)
    assert done.returncode == 1
    error = json.loads((folder / "out" / "error-0.json").read_text())
    assert error["code"] == "not_runnable" and "GPU" in error["detail"]
    assert not (folder / "out" / "address.json").exists()

"""Issue 59: ``hpcfair.generate.llama``, llama.cpp's ``llama-server`` as a child (no Django): a tiny random Llama
written by ``gguf``'s ``GGUFWriter`` answers through it token for token as llama-server run directly answers the real
``openai`` client (greedy, the same seed), the chat template rendered by the hub's sandboxed renderer; its walls:
a unix socket in a private folder, the kernel's data cap, replaced when it dies, gone when its parent is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hpcfair.compute.errors import CodedError
from hpcfair.generate.llama import BASE_BYTES, LlamaServer
from hpcfair.generate.run import GenerateRequest, text_of

from tests.generation.llama import binary, direct
from tests.metadata import gguf_files

pytestmark = [pytest.mark.slow, pytest.mark.cpu]
MESSAGES = [{"role": "system", "content": "t1 t2"}, {"role": "user", "content": "t3 t4 t5"}]
MEMORY = 512 << 20


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    binary()
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    gguf_files.tiny_llama(path, tokens=gguf_files.BYTE_TOKENS)
    return path


def test_the_hubs_llama_server_answers_as_llama_server_itself(model):
    import openai

    server = LlamaServer(model, threads=1, memory=MEMORY, binary=str(binary()))
    try:
        chat = GenerateRequest.parse({"messages": MESSAGES, "max_new_tokens": 24, "temperature": 0, "seed": 7})
        text, last = text_of(server.generate(chat))
        prompt = GenerateRequest.parse({"prompt": "t7 t8", "max_new_tokens": 16, "temperature": 0, "seed": 7})
        completed, done = text_of(server.generate(prompt))
        with direct(model) as url:
            client = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
            answer = client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=0, seed=7,
                                                    max_tokens=24)
            plain = client.completions.create(model="tiny", prompt="t7 t8", temperature=0, seed=7, max_tokens=16)
        assert text and text == answer.choices[0].message.content
        assert (last.prompt_tokens, last.completion_tokens) == (answer.usage.prompt_tokens,
                                                                answer.usage.completion_tokens)
        assert last.finish_reason == answer.choices[0].finish_reason
        assert completed == plain.choices[0].text and done.completion_tokens == plain.usage.completion_tokens
        # its walls: a unix socket in a folder only this user enters, the data the file and a request may take
        assert oct(server.folder.stat().st_mode & 0o777) == "0o700" and Path(server.socket_path).is_socket()
        limits = Path(f"/proc/{server.process.pid}/limits").read_text().splitlines()
        cap = model.stat().st_size + MEMORY + BASE_BYTES
        assert [line.split()[3:5] for line in limits if line.startswith("Max data size")] == [[str(cap), str(cap)]]
        # killed (the kernel's OOM killer, a crash): the next request starts another, with the same answer
        first = server.process.pid
        os.kill(first, signal.SIGKILL)
        server.process.wait()
        again, _ = text_of(server.generate(chat))
        assert again == text and server.process.pid != first
        with pytest.raises(CodedError) as refused:
            list(server.generate(GenerateRequest.parse({"prompt": "t1 " * 5000, "max_new_tokens": 4})))
        assert refused.value.code == "prompt_too_long"
    finally:
        folder = server.folder
        server.close()
    assert not folder.exists()


def test_a_server_that_cannot_start_is_refused_in_words(tmp_path):
    """No binary needed: a llama-server that is not there is a coded refusal naming no host path."""
    gguf_files.tiny_llama(tmp_path / "tiny.gguf")
    server = LlamaServer(tmp_path / "tiny.gguf", binary=str(tmp_path / "missing" / "llama-server"))
    with pytest.raises(CodedError) as refused:
        list(server.generate(GenerateRequest.parse({"prompt": "t1"})))
    assert refused.value.code == "not_runnable" and "HUB_LLAMA_SERVER" in refused.value.detail
    assert str(tmp_path) not in refused.value.detail and server.folder is None


def test_a_template_that_fails_is_refused_in_words(tmp_path):
    gguf_files.tiny_llama(tmp_path / "raises.gguf", tokens=gguf_files.BYTE_TOKENS,
                          template="{{ raise_exception('no system messages') }}")
    server = LlamaServer(tmp_path / "raises.gguf", threads=1, binary=str(binary()))
    try:
        with pytest.raises(CodedError) as refused:
            list(server.generate(GenerateRequest.parse({"messages": MESSAGES})))
        # llama.cpp runs the template itself when it loads the file, and refuses to load it: a coded refusal
        assert refused.value.code == "not_runnable" and "llama.cpp could not load the model" in refused.value.detail
        assert str(tmp_path) not in refused.value.detail
    finally:
        server.close()


def test_llama_server_dies_with_the_process_that_started_it(model):
    script = ("import sys, time; from pathlib import Path; from hpcfair.generate.llama import LlamaServer\n"
              "s = LlamaServer(Path(sys.argv[1]), binary=sys.argv[2]); s.start(); print(s.process.pid, flush=True)\n"
              "time.sleep(600)")
    parent = subprocess.Popen([sys.executable, "-c", script, str(model), str(binary())], stdout=subprocess.PIPE,
                              text=True)
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)  # as the keeper kills an engine past its deadline
    parent.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and Path(f"/proc/{child}/stat").read_text().split()[2] != "Z":
        assert time.monotonic() < deadline, "llama-server outlived the process that started it"
        time.sleep(0.1)

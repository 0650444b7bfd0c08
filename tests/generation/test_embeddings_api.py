"""``/v1/embeddings``' refusals before any worker is asked, which versions are text encoders, and
``hpcfair.embed``'s pooling against sentence-transformers' own ``Pooling`` module (logic tier)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import client_for

pytestmark = pytest.mark.django_db

ENCODER = {"format": "onnx", "inputs": [{"name": "input_ids"}, {"name": "attention_mask"}],
           "outputs": [{"name": "last_hidden_state", "shape": ["batch", "sequence", 8]},
                       {"name": "sentence_embedding", "shape": ["batch", 8]}]}


@pytest.fixture
def encoder(owner, publish):
    """An ONNX version that looks like a text encoder (nothing runs it here)."""
    artifact, version = publish(owner, "enc", {"model.onnx": b"graph", "tokenizer.json": b"{}"})
    version.metadata = {**version.metadata, **ENCODER}
    version.save(update_fields=["metadata"])
    return artifact, version


@pytest.mark.parametrize("body, code, words", [
    ({"input": "x"}, "invalid", "Name the model"),
    ({"model": "alice/enc", "input": []}, "invalid", "'input' is a string"),
    ({"model": "alice/enc", "input": ["a", ""]}, "invalid", "Each input is a non-empty string"),
    ({"model": "alice/enc", "input": [[1, 2], [3, "x"]]}, "invalid", "Each input is a non-empty string"),
    ({"model": "alice/enc", "input": [True]}, "invalid", "Each input"),
    ({"model": "alice/enc", "input": {"text": "a"}}, "invalid", "'input' is a string"),
    ({"model": "alice/enc", "input": "a", "encoding_format": "int8"}, "invalid", "'encoding_format' is float"),
    ({"model": "alice/enc", "input": "a", "dimensions": 0}, "invalid", "'dimensions' is a positive integer"),
    ({"model": "alice/enc", "input": "a", "dimensions": 4}, "invalid", "embeddings have 8 dimensions"),
    ({"model": "alice/enc", "input": "a", "pooling": "max"}, "invalid", "Unknown field 'pooling'"),
    ({"model": "alice/enc", "input": ["a"] * 5}, "request_too_large", "at most 4 (HUB_EMBED_MAX_INPUTS)"),
    ({"model": "alice/nothing", "input": "a"}, "not_found", ""),
])
def test_bad_embedding_requests_are_refused_in_openai_shape(owner, encoder, settings, body, code, words):
    settings.HUB_EMBED_MAX_INPUTS = 4
    refused = client_for(owner).post("/v1/embeddings", body, format="json")
    error = refused.json()["error"]
    assert refused.status_code in (400, 404, 413) and error["code"] == code and refused["X-Error-Code"] == code
    assert words in error["message"]
    assert "Traceback" not in refused.content.decode() and "/work/" not in refused.content.decode()


def test_a_model_that_is_no_text_encoder_is_not_runnable(owner, publish):
    _, version = publish(owner, "classifier", {"model.onnx": b"graph", "tokenizer.json": b"{}"})
    version.metadata = {**version.metadata, "format": "onnx", "inputs": [{"name": "float_input"}],
                        "outputs": [{"name": "label"}]}
    version.save(update_fields=["metadata"])
    refused = client_for(owner).post("/v1/embeddings", {"model": "alice/classifier", "input": "a"}, format="json")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "not_runnable"
    assert "is not a text encoder" in refused.json()["error"]["message"]
    assert client_for(None).post("/v1/embeddings", {"model": "alice/classifier", "input": "a"},
                                 format="json").status_code == 401


def test_models_lists_text_encoders_the_token_may_see(owner, encoder, publish):
    _, plain = publish(owner, "weights", {"model.onnx": b"graph"})  # an encoder's signature, no tokenizer
    plain.metadata = {**plain.metadata, **ENCODER}
    plain.save(update_fields=["metadata"])
    listed = [m["id"] for m in client_for(owner).get("/v1/models").json()["data"]]
    assert listed == [f"alice/enc@{encoder[1].label}"]


@pytest.mark.slow
@pytest.mark.cpu  # sentence-transformers' import alone takes seconds
@pytest.mark.parametrize("mode", ["cls", "max", "mean", "mean_sqrt_len", "lasttoken"])
def test_pooling_equals_sentence_transformers(mode):
    import torch
    from hpcfair.embed import pool
    from sentence_transformers.sentence_transformer.modules import Pooling

    hidden = np.random.default_rng(0).normal(size=(3, 5, 8)).astype(np.float32)
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    names = {"mean_sqrt_len": "mean_sqrt_len_tokens", "lasttoken": "lasttoken"}
    theirs = Pooling(8, pooling_mode=names.get(mode, mode))({"token_embeddings": torch.from_numpy(hidden),
                                                             "attention_mask": torch.from_numpy(mask)})
    np.testing.assert_allclose(pool(hidden, mask, mode), theirs["sentence_embedding"].numpy(), rtol=1e-6, atol=1e-6)


def test_pooling_settings_are_read_and_odd_ones_refused(tmp_path):
    import json

    from hpcfair.compute import CodedError
    from hpcfair.embed import pooling_of

    assert pooling_of(tmp_path) == ("mean", False)  # a plain encoder, as sentence-transformers loads one
    (tmp_path / "modules.json").write_text(json.dumps([
        {"path": "", "type": "sentence_transformers.models.Transformer"},
        {"path": "pool", "type": "sentence_transformers.models.Pooling"},
        {"path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (tmp_path / "pool").mkdir()
    (tmp_path / "pool" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    assert pooling_of(tmp_path) == ("cls", True)
    (tmp_path / "pool" / "config.json").write_text(json.dumps({"pooling_mode_weightedmean_tokens": True}))
    with pytest.raises(CodedError, match="does not offer"):
        pooling_of(tmp_path)

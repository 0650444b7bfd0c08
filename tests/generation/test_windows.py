"""Issue 57, point 3: models with sliding-window attention (Gemma-2's local layers, Mistral's window on every
layer) build on onnxruntime-genai and generate transformers' greedy tokens past their window, with the KV cache
sized to the window however short the request (a window larger than prompt + new tokens once failed the build;
a one-token request answered 500)."""

from __future__ import annotations

import pytest
from hpcfair.generate import GenerateRequest, generate, open_model
from hpcfair.generate.build import build
from hpcfair.generate.run import text_of

from tests.generation.lm import save_lm

pytestmark = [pytest.mark.slow, pytest.mark.cpu]


@pytest.mark.parametrize(("family", "window"), [("gemma2", 8), ("gemma2", 64), ("mistral", 8), ("gemma2", 4096)])
def test_a_local_window_builds_verifies_and_answers_one_token(tmp_path, family, window):
    """Gemma-2 names its layers' attention (local and global); Mistral's window applies to every layer, which
    the builder is told through the config's ``layer_types`` (it built full attention before); a window no
    shorter than the context (256 here) is full attention, built without window-sized caches."""
    source = save_lm(tmp_path / "src", family, sliding_window=window)
    report = build(source, tmp_path / "genai")
    assert report["verification"]["passed"] is True, report["verification"]
    assert all(case["matched"] == case["tokens"] for case in report["verification"]["prompts"])
    loaded = open_model(tmp_path / "genai")
    decoder = loaded.config["model"]["decoder"]
    if window < 256:
        assert decoder["sliding_window"]["window_size"] == window and decoder["sliding_window"]["layers"]
    else:
        assert "sliding_window" not in decoder
    assert not (tmp_path / ".genai-source").exists()  # the builder's staged copy of the folder is gone
    for wanted in (1, 3):
        request = GenerateRequest.parse({"prompt": "The node", "max_new_tokens": wanted, "temperature": 0},
                                        max_tokens=64)
        _, last = text_of(generate(loaded, request))
        assert last.completion_tokens == wanted and last.finish_reason == "length"

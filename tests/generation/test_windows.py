"""Issue 57, point 3: a model with sliding-window layers (Gemma-2's local layers) builds on onnxruntime-genai
and generates transformers' greedy tokens past its window, with the KV cache sized to the window however short
the request (a window larger than prompt + new tokens once failed the build; a one-token request answered 500)."""

from __future__ import annotations

import pytest
from hpcfair.generate import GenerateRequest, generate, open_model
from hpcfair.generate.build import build
from hpcfair.generate.run import text_of

from tests.generation.lm import save_lm

pytestmark = [pytest.mark.slow, pytest.mark.cpu]


@pytest.mark.parametrize("window", [8, 64])
def test_a_local_window_builds_verifies_and_answers_one_token(tmp_path, window):
    source = save_lm(tmp_path / "src", "gemma2", sliding_window=window)
    report = build(source, tmp_path / "genai")
    assert report["verification"]["passed"] is True, report["verification"]
    assert all(case["matched"] == case["tokens"] for case in report["verification"]["prompts"])
    loaded = open_model(tmp_path / "genai")
    assert loaded.config["model"]["decoder"]["sliding_window"]["window_size"] == window
    for wanted in (1, 3):
        request = GenerateRequest.parse({"prompt": "The node", "max_new_tokens": wanted, "temperature": 0},
                                        max_tokens=64)
        _, last = text_of(generate(loaded, request))
        assert last.completion_tokens == wanted and last.finish_reason == "length"

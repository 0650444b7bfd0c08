"""Issue 57, point 4: mixture-of-experts Hugging Face folders (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, random weights
from transformers' configs) convert to ONNX. Their experts run in a dense form (``hpcfair.convert.experts``) that
gives the sums of every one of transformers' implementations; the conversion is verified against the model's own
implementation, and the ONNX model equals it on batch and sequence sizes the export never saw."""

from __future__ import annotations

import numpy as np
import pytest
from hpcfair.convert import convert_file, experts

from tests.generation.lm import MOE, save_lm


@pytest.mark.slow
@pytest.mark.cpu  # runs each family under every expert implementation: 4 s and more
@pytest.mark.parametrize("family", list(MOE))
def test_the_dense_form_gives_every_implementations_sums(tmp_path, family):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(save_lm(tmp_path / family, family)).eval()
    loaded = model.config._experts_implementation
    ids = torch.randint(3, 250, (3, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        wanted = {name: (model.set_experts_implementation(name), model(ids).logits)[1]
                  for name in ("eager", "batched_mm", loaded)}
        model.set_experts_implementation(loaded)
        assert experts.densify(model) and model.config._experts_implementation == experts.DENSE
        dense = model(ids).logits
        with experts.original(model):
            assert model.config._experts_implementation == loaded
            torch.testing.assert_close(model(ids).logits, wanted[loaded], rtol=0, atol=0)
    assert model.config._experts_implementation == experts.DENSE
    for name, logits in wanted.items():  # transformers' own implementations differ by float rounding (~5e-6)
        torch.testing.assert_close(dense, logits, rtol=1e-5, atol=1e-5, msg=f"dense against {name}")


@pytest.mark.slow
@pytest.mark.cpu  # converts in the sandbox: over 1 s on a quiet machine
def test_a_model_without_experts_is_left_as_it_is(tmp_path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(save_lm(tmp_path / "llama", "llama"))
    assert experts.densify(model) is False and experts.has_experts(model) is False


@pytest.mark.slow
@pytest.mark.cpu  # converts in the sandbox, no server
@pytest.mark.parametrize("family", list(MOE))
def test_mixture_of_experts_folders_convert_and_verify(tmp_path, family):
    import onnxruntime as ort
    import torch
    from transformers import AutoModelForCausalLM

    source = save_lm(tmp_path / family, family)
    report = convert_file(source, tmp_path / "out" / "model.onnx")
    assert report["verification"]["passed"] is True and report["verification"]["compared"] is True
    assert report["hf_class"] == MOE[family][1] and report["task"] == "text-generation"
    assert "dense form" in report["experts"] and [o["name"] for o in report["outputs"]] == ["logits"]
    assert report["verification"]["max_abs_diff"] < 1e-4
    session = ort.InferenceSession(str(tmp_path / "out" / "model.onnx"))
    model = AutoModelForCausalLM.from_pretrained(source).eval()  # its own (sparse) experts
    rng = np.random.default_rng(3)
    for batch, length in ((2, 13), (1, 4)):
        ids = rng.integers(3, 250, (batch, length))
        (got,) = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
        with torch.no_grad():
            want = model(torch.from_numpy(ids)).logits.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.cpu  # converts in the sandbox, no server
def test_a_torch_export_program_of_mixtral_converts(tmp_path):
    """The advice the hub gave for a traced Mixtral (torch.export) now works: the program holds transformers'
    custom operator (``transformers::grouped_mm_fallback``) and ``aten::histc``, both decomposed; before, the file
    was called damaged (``corrupt_file``)."""
    import onnxruntime as ort
    import torch

    from tests.conversions import models

    name, _ = models.moe_program(tmp_path)
    program = torch.export.load(str(tmp_path / name))
    assert any("grouped_mm_fallback" in str(node.target) for node in program.graph.nodes)
    report = convert_file(tmp_path / "mixtral.pt2", tmp_path / "mixtral.onnx")
    assert report["verification"]["passed"] is True and "grouped_mm_fallback" in report["experts"]
    session = ort.InferenceSession(str(tmp_path / "mixtral.onnx"))
    fresh = np.random.default_rng(4).integers(3, 250, (2, 21))
    (got,) = session.run(None, {session.get_inputs()[0].name: fresh})
    with torch.no_grad():
        np.testing.assert_allclose(got, program.module()(torch.from_numpy(fresh)).numpy(), rtol=1e-4, atol=1e-4)

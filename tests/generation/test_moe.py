"""Issue 57, point 4: mixture-of-experts language models (Mixtral, Qwen2-MoE with its shared expert, Qwen3-MoE,
OLMoE; random weights from transformers' own configs) get generation models by the general route, their experts
exported in dense form; greedy tokens equal transformers' ``generate`` with the model's own (sparse) experts, and
a model whose experts are swapped fails the verification the router would otherwise hide."""

import json

import pytest
from hpcfair.generate import open_model
from hpcfair.generate.build import build, greedy_ids, verify_tokens

from tests.generation.lm import MOE, save_lm

pytestmark = [pytest.mark.slow, pytest.mark.cpu]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """family -> (source folder, built folder, report)."""
    out = {}
    for family in MOE:
        root = tmp_path_factory.mktemp(family)
        source = save_lm(root / "src", family)
        out[family] = (source, root / "kv", build(source, root / "kv"))
    return out


@pytest.mark.parametrize("family", list(MOE))
def test_mixtures_of_experts_generate_transformers_greedy_tokens(built, family):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source, folder, report = built[family]
    assert report["route"] == "onnx-kv" and report["verification"]["passed"], report["verification"]
    assert json.loads((folder / "kv_config.json").read_text())["architecture"] == MOE[family][1]
    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source).eval()  # transformers' own experts implementation
    assert model.config._experts_implementation != "hpcfair-dense"
    ids = tokenizer("models on hpc nodes share data", return_tensors="pt").input_ids
    with torch.no_grad():
        expected = model.generate(ids, max_new_tokens=24, min_new_tokens=24, do_sample=False)[0, ids.shape[1]:]
        routed = model(ids, output_router_logits=True).router_logits
    assert greedy_ids(open_model(folder), ids[0].tolist(), 24) == expected.tolist()
    picks = {tuple(sorted(row)) for logits in routed for row in logits.topk(2, dim=-1).indices.tolist()}
    assert len(picks) > 2  # the tokens go to different experts: the routing is exercised, not one fixed pair


def test_swapped_experts_fail_the_verification(built, tmp_path):
    """The same weights with two experts of the first layer swapped (the router unchanged): other tokens."""
    import shutil

    from safetensors.torch import load_file, save_file

    source, folder, _ = built["mixtral"]
    swapped = tmp_path / "swapped"
    shutil.copytree(source, swapped)
    weights = load_file(str(source / "model.safetensors"))
    first = {name: name.replace(".experts.0.", ".experts.1.") for name in weights
             if name.startswith("model.layers.0.") and ".experts.0." in name}  # Mixtral's checkpoint: one per expert
    assert first
    for zero, one in first.items():
        weights[zero], weights[one] = weights[one], weights[zero]
    save_file(weights, str(swapped / "model.safetensors"), metadata={"format": "pt"})
    report = verify_tokens(swapped, folder)
    assert report["passed"] is False
    assert any(case["matched"] < case["tokens"] for case in report["prompts"])

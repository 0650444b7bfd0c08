"""Which Hugging Face language models get a generation model, and by which route:
- ``genai``: the text-only ``architectures`` onnxruntime-genai 0.18's model builder exports (with a KV cache);
- ``decoder``: any other causal LM (``…ForCausalLM``, ``…LMHeadModel``: GPT-2, GPT-Neo, OPT, Bloom…), exported by
  ``hpcfair.generate.torch_export`` with its KV cache and run by ``hpcfair.generate.onnx_loop``;
- ``encoder-decoder``: a text encoder-decoder (T5, BART, Marian, mBART, Pegasus…), by the same general route
  (an encoder graph and a decoder graph with past key/values).
The web process decides from config.json alone; the build (in the sandbox) loads the folder with transformers
and refuses, with a code, what this guess let through."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GENAI_ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "PhiForCausalLM": "phi",
    "Phi3ForCausalLM": "phi3",
    "GemmaForCausalLM": "gemma",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3",
    "GraniteForCausalLM": "granite",
    "OlmoForCausalLM": "olmo",
    "NemotronForCausalLM": "nemotron",
    "SmolLM3ForCausalLM": "smollm3",
    "InternLM2ForCausalLM": "internlm2",
    "Ernie4_5ForCausalLM": "ernie",
}
# The tokenizer files onnxruntime-genai reads (tokenizer.json is required).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "generation_config.json")


def architecture_of(config: dict[str, Any]) -> str:
    """The first of a config.json's ``architectures`` ("" when it names none)."""
    names = config.get("architectures") or []
    return str(names[0]) if names else ""


GENAI, DECODER, ENCODER_DECODER = "genai", "decoder", "encoder-decoder"
CAUSAL_SUFFIXES = ("ForCausalLM", "LMHeadModel")
SEQ2SEQ_SUFFIXES = ("ForConditionalGeneration", "MTModel")
# config.json keys of encoder-decoders whose encoder reads sound or images, not text (Whisper, Donut…)
NOT_TEXT_KEYS = ("num_mel_bins", "feature_size", "vision_config", "image_size", "audio_config", "encoder")


def route_of(config: dict[str, Any]) -> str:
    """How a folder with this config.json gets its generation model (``GENAI``, ``DECODER``, ``ENCODER_DECODER``),
    or "" when it is not a text language model."""
    architecture = architecture_of(config)
    if architecture in GENAI_ARCHITECTURES:
        return GENAI
    if config.get("is_encoder_decoder"):
        text = not any(key in config for key in NOT_TEXT_KEYS)
        return ENCODER_DECODER if text and architecture.endswith(SEQ2SEQ_SUFFIXES) else ""
    return DECODER if architecture.endswith(CAUSAL_SUFFIXES) else ""


def supports(config: dict[str, Any]) -> bool:
    """Whether the hub builds a generation model from a folder with this config.json."""
    return route_of(config) != ""


def read_config(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return {}


# The precisions of a generation build: fp32 (every route) and, for onnxruntime-genai's families, weight-only
# 8-bit and 4-bit copies (MatMulNBits, activations quantized to int8 at run time on the CPU)
PRECISIONS = ("fp32", "int8", "int4")
# Asked for, and refused with the reason: what onnxruntime-genai builds for GPUs only
GPU_PRECISIONS = {
    "fp16": "onnxruntime-genai builds fp16 for GPUs (CUDA, DirectML), not for the CPU, whose ONNX Runtime kernels "
            "are fp32 (an fp16 build casts between them and fails at run time)",
    "bf16": "onnxruntime-genai builds bf16 for CUDA GPUs only"}


def precision_problem(precision: str, route: str) -> tuple[str, str] | None:
    """Why a generation build at ``precision`` cannot be made for a folder on ``route``, as (code, detail);
    None when it can. The web process asks before queueing a job, the build again in its sandbox."""
    if precision in GPU_PRECISIONS:
        return "unsupported_precision", (f"{precision} is not built here: {GPU_PRECISIONS[precision]}; the hub's "
                                         "generation builds run on CPUs. Ask for int8 (8-bit weights, about a "
                                         "quarter of fp32's size, its greedy tokens checked against transformers), "
                                         "int4 (smaller still) or fp32.")
    if precision not in PRECISIONS:
        return "invalid", f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}."
    if route != GENAI and precision != "fp32":
        return "invalid", (f"this language model is built by the general route, in fp32 only: {precision} copies "
                           "are made for the families onnxruntime-genai builds (Llama, Mistral, Qwen2/3, Phi, "
                           "Gemma…).")
    return None

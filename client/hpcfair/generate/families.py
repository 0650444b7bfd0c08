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

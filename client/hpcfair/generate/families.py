"""Which Hugging Face causal language models onnxruntime-genai's model builder exports (with a KV cache):
the text-only ``architectures`` of its 0.18 release. Others (GPT-2, encoder-decoders) convert to plain ONNX
for one forward pass, as every model does, but offer no generation."""

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


def supports(config: dict[str, Any]) -> bool:
    """Whether onnxruntime-genai builds a generation model from a folder with this config.json."""
    return architecture_of(config) in GENAI_ARCHITECTURES


def read_config(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return {}

"""The general generation route, for the language models onnxruntime-genai does not build (GPT-2 and any other
causal LM, and text encoder-decoders such as T5, BART or Marian): the transformers model exported with its KV
cache by ``torch.onnx.export`` (the TorchScript exporter, as every Hugging Face folder is converted here), run by
``hpcfair.generate.onnx_loop`` on plain ONNX Runtime.

- A causal LM becomes ``decoder.onnx``: ``input_ids``, ``attention_mask`` (and ``position_ids`` where the model
  takes them) and ``past.<layer>.key/value`` in; the last position's ``logits`` and ``present.<layer>.key/value``
  out. The first step takes the whole prompt with an empty past, every later step one token.
- An encoder-decoder becomes ``encoder.onnx``, run once per prompt: the encoder's states and every decoder
  layer's cross-attention keys and values (``cross.<layer>.key/value``, projected once), and ``decoder.onnx``,
  run once per token: the new token, the cross keys and values and the self-attention past in; the logits and
  the present out.

``kv_config.json`` says which graphs, their past tensors' shapes and the model's special tokens. The cache's
layout is read from the model itself (one forward pass), so any head count, grouped-query attention or head
size exports. Runs in the conversion sandbox (a ``pytorch_model.bin`` is a pickle)."""

from __future__ import annotations

import inspect
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hpcfair.compute.errors import CodedError
from hpcfair.generate.families import DECODER, ENCODER_DECODER

CONFIG = "kv_config.json"
ROUTE = "torch.onnx.export with past key/values, run by hpcfair.generate.onnx_loop on ONNX Runtime"
OPSET = 17
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "generation_config.json", "config.json")
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length", "seq_length")


def load(source: Path, kind: str):
    """The folder's transformers model in float32 (eager attention, experts in dense form), never running the
    folder's own code."""
    import torch
    import transformers

    loader = transformers.AutoModelForSeq2SeqLM if kind == ENCODER_DECODER else transformers.AutoModelForCausalLM
    from hpcfair.convert import experts

    try:
        model = loader.from_pretrained(str(source), local_files_only=True, trust_remote_code=False,
                                       dtype=torch.float32, attn_implementation="eager").eval()
    except Exception as exc:  # noqa: BLE001 - transformers' own words are only logged
        raise CodedError("unsupported_model", f"transformers {transformers.__version__} could not load the folder "
                                              f"as {loader.__name__} ({type(exc).__name__}): check that config.json "
                                              "and the weights belong together (custom code is not run).") from exc
    experts.densify(model)  # mixture-of-experts layers in a form the exporter takes (verify_tokens: the original)
    return model


def export(source: Path, output: Path, kind: str) -> dict[str, Any]:
    """Export the folder ``source`` (``kind`` ``decoder`` or ``encoder-decoder``) into ``output``: the graphs,
    ``kv_config.json`` and the tokenizer files. Returns the config written."""
    import torch

    model = load(source, kind)
    layers, cross = _cache_layout(model, kind)
    crosses = [f"cross.{i}.{part}" for i in range(len(cross)) for part in ("key", "value")]
    output.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kv-export-", dir=output.parent))
    try:
        with torch.no_grad():
            encoder, causal, seq2seq = _modules()
            if kind == ENCODER_DECODER:
                _export_graph(encoder(model).eval(), _encoder_args(), "encoder.onnx", work, output,
                              ["input_ids", "attention_mask"], ["last_hidden_state", *crosses],
                              {"input_ids": {0: "batch", 1: "source"}, "attention_mask": {0: "batch", 1: "source"},
                               "last_hidden_state": {0: "batch", 1: "source"},
                               **{name: {0: "batch", 2: "source"} for name in crosses}})
                step, (names, args) = seq2seq(model, len(layers)).eval(), _seq2seq_args(model, layers, cross)
            else:
                step, (names, args) = causal(model).eval(), _causal_args(model, layers)
            pasts = [f"past.{i}.{part}" for i in range(len(layers)) for part in ("key", "value")]
            presents = [name.replace("past.", "present.") for name in pasts]
            dynamic = {name: {0: "batch", 1: "sequence" if "input_ids" in name or name == "position_ids" else
                              ("source" if name.startswith("encoder") else "total")} for name in names}
            dynamic.update({name: {0: "batch", 2: "past"} for name in pasts})
            dynamic.update({name: {0: "batch", 2: "source"} for name in crosses})
            dynamic.update({name: {0: "batch", 2: "total"} for name in presents})
            dynamic["logits"] = {0: "batch"}
            _export_graph(step, args, "decoder.onnx", work, output, names + pasts + crosses, ["logits", *presents],
                          dynamic)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, output / name)
    config = describe(model, kind, layers, cross, names, source)
    (output / CONFIG).write_text(json.dumps(config, indent=1))
    return config


def _export_graph(module, args: tuple, name: str, work: Path, output: Path, names: list[str],
                  outputs: list[str], dynamic: dict[str, dict[int, str]]) -> None:
    """One graph, exported into a folder of its own under ``work`` (where an exporter puts one file per tensor
    past 2 GiB), its weights moved into one data file past the hub's threshold, then moved into ``output``."""
    import torch

    from hpcfair import external_data
    from hpcfair.convert.exported import torch_error

    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    try:
        torch.onnx.export(module, args, str(folder / name), dynamo=False, opset_version=OPSET, input_names=names,
                          output_names=outputs, dynamic_axes=dynamic)
    except Exception as exc:  # noqa: BLE001
        raise torch_error(exc, OPSET) from exc
    for written in [name, *external_data.externalise(folder / name)]:
        shutil.move(folder / written, output / written)


Layout = list[dict[str, list[int]]]


def _cache_layout(model, kind: str) -> tuple[Layout, Layout]:
    """Per layer, the [heads, head size] of its cached keys and values (self-attention, and an encoder-decoder's
    cross-attention), from one forward pass with the cache."""
    import torch

    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        if kind == ENCODER_DECODER:
            out = model(input_ids=ids, decoder_input_ids=ids[:, :1], use_cache=True)
        else:
            out = model(input_ids=ids, use_cache=True)
    cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)

    def layout(part) -> Layout:
        layers = getattr(part, "layers", None)
        if not layers or not all(getattr(layer, "keys", None) is not None and layer.keys.dim() == 4
                                 for layer in layers):
            raise CodedError("unsupported_model", f"{type(model).__name__}'s cache is not keys and values per layer "
                                                  "([batch, heads, length, size]), which the general generation "
                                                  "route exports.")
        return [{"key": [int(layer.keys.shape[1]), int(layer.keys.shape[3])],
                 "value": [int(layer.values.shape[1]), int(layer.values.shape[3])]} for layer in layers]

    if kind == ENCODER_DECODER:
        return layout(getattr(cache, "self_attention_cache", None)), \
            layout(getattr(cache, "cross_attention_cache", None))
    return layout(cache), []


def _past(layers: Layout, batch: int, length: int) -> list:
    import torch

    return [torch.randn(batch, *layer[part][:1], length, *layer[part][1:]) * 0.1
            for layer in layers for part in ("key", "value")]


def _takes(model, name: str) -> bool:
    return name in inspect.signature(model.forward).parameters


def _causal_args(model, layers) -> tuple[list[str], tuple]:
    import torch

    batch, past, new = 2, 3, 2
    names = ["input_ids", "attention_mask"] + (["position_ids"] if _takes(model, "position_ids") else [])
    args = [torch.randint(3, 20, (batch, new)), torch.ones(batch, past + new, dtype=torch.long)]
    if "position_ids" in names:
        args.append(torch.arange(past, past + new).repeat(batch, 1))
    return names, (*args, *_past(layers, batch, past))


def _seq2seq_args(model, layers: Layout, cross: Layout) -> tuple[list[str], tuple]:
    import torch

    batch, past, source = 2, 3, 5
    width = int(model.get_encoder()(input_ids=torch.tensor([[1]])).last_hidden_state.shape[-1])
    names = ["decoder_input_ids", "encoder_hidden_states", "encoder_attention_mask"]
    args = (torch.randint(3, 20, (batch, 1)), torch.randn(batch, source, width),
            torch.ones(batch, source, dtype=torch.long))
    return names, (*args, *_past(layers, batch, past), *_past(cross, batch, source))


def _encoder_args() -> tuple:
    import torch

    return torch.randint(3, 20, (2, 5)), torch.ones(2, 5, dtype=torch.long)


def _modules():
    import torch
    from transformers import DynamicCache, EncoderDecoderCache

    class Encoder(torch.nn.Module):
        """The encoder's last hidden state and the decoder's cross-attention keys and values: the decoder runs
        one (dummy) step to fill its cross-attention cache; the exporter keeps only what those outputs need (the
        keys' and values' projections), so no decoder weight is stored twice."""

        def __init__(self, model) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            states = self.model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
            self.model(encoder_outputs=(states,), attention_mask=attention_mask, cache=cache, use_cache=True,
                       decoder_input_ids=torch.zeros_like(input_ids[:, :1]))
            return (states, *flat(cache.cross_attention_cache))

    def flat(cache) -> tuple:
        return tuple(t for layer in cache.layers for t in (layer.keys, layer.values))

    def filled(past: tuple):
        return DynamicCache([(past[i], past[i + 1]) for i in range(0, len(past), 2)])

    class CausalStep(torch.nn.Module):
        """One step of a causal LM: the new tokens and the past in; the last logits and the present out."""

        def __init__(self, model) -> None:
            super().__init__()
            self.model = model
            self.positions = _takes(model, "position_ids")
            self.keep = {"logits_to_keep": 1} if _takes(model, "logits_to_keep") else {}

        def forward(self, input_ids, attention_mask, *rest):
            positions = {"position_ids": rest[0]} if self.positions else {}
            past = rest[1:] if self.positions else rest
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, cache=filled(past), use_cache=True,
                             **positions, **self.keep)
            return (out.logits[:, -1:], *flat(out.cache))

    class Seq2SeqStep(torch.nn.Module):
        """One decoder step: the new token, the encoder's states (which the graph may drop: the cross-attention
        keys and values come ready), the self-attention past and the cross keys and values in."""

        def __init__(self, model, layers: int) -> None:
            super().__init__()
            self.model, self.layers = model, layers

        def forward(self, decoder_input_ids, encoder_hidden_states, encoder_attention_mask, *past):
            own, cross = past[:2 * self.layers], past[2 * self.layers:]
            cache = EncoderDecoderCache(filled(own), filled(cross))  # filled cross layers are not projected again
            out = self.model(encoder_outputs=(encoder_hidden_states,), attention_mask=encoder_attention_mask,
                             decoder_input_ids=decoder_input_ids, cache=cache, use_cache=True)
            return (out.logits[:, -1:], *flat(out.cache.self_attention_cache))

    return Encoder, CausalStep, Seq2SeqStep


def describe(model, kind: str, layers: Layout, cross: Layout, names: list[str], source: Path) -> dict[str, Any]:
    """``kv_config.json``: the graphs, their inputs, the cache layout and the special tokens."""
    config = model.config
    generation = getattr(model, "generation_config", None)
    ends = getattr(generation, "eos_token_id", None)
    ends = getattr(config, "eos_token_id", None) if ends is None else ends
    ends = [int(e) for e in (ends if isinstance(ends, list) else [ends]) if e is not None]
    bad = getattr(generation, "bad_words_ids", None) or []
    forced = getattr(generation, "forced_bos_token_id", None) if kind == ENCODER_DECODER else None
    start = getattr(generation, "decoder_start_token_id", None)
    start = getattr(config, "decoder_start_token_id", None) if start is None else start
    return {"route": "onnx-kv", "kind": kind, "architecture": (config.architectures or [""])[0],
            "model_type": config.model_type, "context_length": context_length(config, source),
            "eos_token_ids": ends, "pad_token_id": getattr(config, "pad_token_id", None),
            "decoder_start_token_id": start if kind == ENCODER_DECODER else None,
            "forced_bos_token_id": forced,
            "suppress_token_ids": sorted({int(w[0]) for w in bad if len(w) == 1}),
            "decoder": {"file": "decoder.onnx", "inputs": names, "layers": layers, "dtype": "float32"},
            **({"encoder": {"file": "encoder.onnx", "cross_layers": cross}} if kind == ENCODER_DECODER else {})}


def context_length(config, source: Path) -> int:
    """Tokens the model's positions reach (its config), else the tokenizer's ``model_max_length``, else 1024."""
    for key in CONTEXT_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    try:
        limit = json.loads((source / "tokenizer_config.json").read_text()).get("model_max_length")
    except (OSError, ValueError):
        limit = None
    return int(limit) if isinstance(limit, int | float) and 0 < limit < 1_000_000 else 1024


__all__ = ["CONFIG", "DECODER", "ENCODER_DECODER", "ROUTE", "context_length", "export"]

"""Hugging Face model folders (``config.json`` + ``model.safetensors`` or ``pytorch_model.bin`` + tokenizer
files), as a folder or an archive, exported to ONNX with dynamic batch and sequence axes.

Why torch.onnx and not Hugging Face's own exporter: ``optimum``/``optimum-onnx`` do not install beside the
pinned transformers 5 (their releases require transformers < 5), so the model is loaded with transformers'
``AutoModel*`` classes (never ``trust_remote_code``: a folder's own Python is not run; ``.bin`` weights
are read with torch's weights-only unpickler) and exported with ``torch.onnx.export``, the same exporter
optimum drives. The task comes from the request or the config's architecture; a sentence-transformers
folder (``modules.json``) also gets its pooling (and normalisation) in the graph, so the ONNX model's
``sentence_embedding`` is what ``SentenceTransformer.encode`` returns. The tokenizer and config files are
kept beside the ONNX file. Runs inside the sandbox only.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.convert.errors import ConversionError
from hpcfair.convert.formats import HF_WEIGHTS as WEIGHTS
from hpcfair.convert.signature import TensorSpec, generate_inputs

# Files a runtime needs beside the ONNX model to take text (and to name labels): kept with it.
KEPT = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
        "vocab.json", "merges.txt", "added_tokens.json", "tokenizer.model", "spiece.model",
        "sentencepiece.bpe.model", "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json",
        "1_Pooling/config.json", "preprocessor_config.json", "generation_config.json")
TASKS = {
    "feature-extraction": "AutoModel",
    "sentence-similarity": "AutoModel",
    "text-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
    "fill-mask": "AutoModelForMaskedLM",
    "text-generation": "AutoModelForCausalLM",
    "question-answering": "AutoModelForQuestionAnswering",
    "text2text-generation": "AutoModelForSeq2SeqLM",
    "image-classification": "AutoModelForImageClassification",
    "image-feature-extraction": "AutoModel",
}
ARCHITECTURE_TASKS = (("ForSequenceClassification", "text-classification"),
                      ("ForTokenClassification", "token-classification"), ("ForMaskedLM", "fill-mask"),
                      ("ForCausalLM", "text-generation"), ("LMHeadModel", "text-generation"),
                      ("ForQuestionAnswering", "question-answering"),
                      ("ForConditionalGeneration", "text2text-generation"),
                      ("ForImageClassification", "image-classification"))


def is_folder(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file() and any((path / w).is_file() for w in WEIGHTS)


def find_folder(root: Path) -> Path | None:
    """The shallowest folder under ``root`` holding config.json and weights."""
    candidates = sorted((p.parent for p in root.rglob("config.json")), key=lambda p: len(p.parts))
    return next((p for p in candidates if is_folder(p)), None)


def task_of(folder: Path, config: dict[str, Any], given: str | None) -> str:
    """The task asked for, or the one the config's architecture names (a sentence-transformers folder:
    sentence-similarity; a bare encoder: feature-extraction)."""
    if given in TASKS:
        return given
    if (folder / "modules.json").is_file():
        return "sentence-similarity"
    architecture = next(iter(config.get("architectures") or []), "")
    return next((task for suffix, task in ARCHITECTURE_TASKS if architecture.endswith(suffix)), "feature-extraction")


def _pooling(folder: Path) -> tuple[str, bool] | None:
    """(mean|cls|max, normalise) of a sentence-transformers folder, None for another."""
    try:
        modules = json.loads((folder / "modules.json").read_text())
    except (OSError, ValueError):
        return None
    types = [str(m.get("type", "")) for m in modules if isinstance(m, dict)]
    pooling = next((m for m in modules if isinstance(m, dict) and str(m.get("type", "")).endswith("Pooling")), None)
    if pooling is None:
        return None
    try:
        settings = json.loads((folder / pooling.get("path", "1_Pooling") / "config.json").read_text())
    except (OSError, ValueError):
        settings = {"pooling_mode_mean_tokens": True}
    mode = "cls" if settings.get("pooling_mode_cls_token") else "max" if settings.get("pooling_mode_max_tokens") \
        else "mean"
    return mode, any(t.endswith("Normalize") for t in types)


TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# A text and image model's outputs (CLIP-style): which batch each axis follows, texts' ("batch") or images'.
MULTIMODAL_AXES = {"logits_per_image": {0: "images", 1: "batch"}, "logits_per_text": {0: "batch", 1: "images"},
                   "image_embeds": {0: "images"}, "text_embeds": {0: "batch"}}


def _input_names(folder: Path, model) -> list[str]:
    """What the tokenizer gives the model (input_ids, attention_mask, and token_type_ids for BERT), among
    what the model's ``forward`` names: DistilBERT, RoBERTa-style and decoder models take no token types,
    whatever a tokenizer (or transformers' default one, for a folder without tokenizer files) offers."""
    import inspect

    accepted = [n for n in TEXT_INPUTS if n in inspect.signature(model.forward).parameters]
    try:
        from transformers import AutoTokenizer

        names = list(AutoTokenizer.from_pretrained(str(folder), local_files_only=True).model_input_names)
    except Exception:  # noqa: BLE001 - no tokenizer: the usual pair
        names = []
    return [n for n in names if n in accepted] or [n for n in ("input_ids", "attention_mask") if n in accepted]


def _input_specs(model, names: list[str]) -> list[TensorSpec]:
    """The export's inputs: token ids (and a decoder's, for an encoder-decoder such as T5 or BART) with dynamic
    batch and sequence axes, or an image model's ``pixel_values`` at the size its config names. Speech
    models are refused with a clear error: their feature extraction is not part of the model."""
    import inspect

    config = model.config
    accepted = inspect.signature(model.forward).parameters
    if "input_ids" not in accepted and "pixel_values" in accepted:
        return [_image_spec(config, "batch")]
    if "input_ids" not in accepted:
        found = next((n for n in ("input_features", "input_values") if n in accepted), "")
        raise ConversionError("unsupported_format", f"The folder's {type(model).__name__} takes {found or 'inputs'} "
                                                    "other than token ids or images (a speech model); the hub converts "
                                                    "Hugging Face text and image models. Export it with torch.export "
                                                    "(.pt2) instead.")
    text = getattr(config, "text_config", None)  # a text and image model keeps its vocabulary there
    vocab = int(getattr(config, "vocab_size", None) or getattr(text, "vocab_size", None) or 1000)
    bounds = {"input_ids": (0, vocab), "attention_mask": (1, 2), "token_type_ids": (0, 1)}
    specs = [TensorSpec(n, ["batch", "sequence"], "int64", *bounds[n]) for n in names]
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in accepted:
        specs.append(TensorSpec("decoder_input_ids", ["batch", "decoder_sequence"], "int64", 0, vocab))
    if "pixel_values" in accepted:  # a text and image model (CLIP-style): both are fed, each with its batch
        specs.append(_image_spec(config, "images"))
    return specs


def _image_spec(config, batch: str) -> TensorSpec:
    """``pixel_values`` at the size the (vision) config names, with the batch axis ``batch``."""
    vision = getattr(config, "vision_config", None) or config
    size = getattr(vision, "image_size", None) or 224
    height, width = (size, size) if isinstance(size, int) else tuple(size)[:2]
    channels = int(getattr(vision, "num_channels", 3) or 3)
    return TensorSpec("pixel_values", [batch, channels, int(height), int(width)], "float32", -1.0, 1.0)


def _batch_of_two(spec: TensorSpec) -> TensorSpec:
    return replace(spec, shape=[2, *spec.shape[1:]]) if spec.shape and not isinstance(spec.shape[0], int) else spec


def _feeding_zeros(reference, names: list[str], like: str):
    """``reference`` given zeros for ``names`` (inputs the ONNX graph dropped as unused), shaped like ``like``."""

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return reference({**{name: np.zeros_like(feeds[like]) for name in names}, **feeds})

    return run


def _output_names(model, names: list[str], args: tuple) -> list[str]:
    """The outputs worth exporting, from one run on the example: ``logits``, else ``last_hidden_state``,
    else every ``*logits``/``logits_*`` and ``*_embeds`` (a question-answering head's start and end; a text and
    image model's similarities and embeddings), else the first tensor."""
    import torch

    with torch.no_grad():
        out = model(**dict(zip(names, args, strict=True)))
    tensors = [key for key, value in out.items() if isinstance(value, torch.Tensor)]
    for wanted in ("logits", "last_hidden_state"):
        if wanted in tensors:
            return [wanted]
    return [key for key in tensors if key.endswith("logits") or key.startswith("logits_") or key.endswith("_embeds")
            ] or tensors[:1]


def _wrapper(model, names: list[str], outputs: list[str], pooling: tuple[str, bool] | None):
    import torch

    class Export(torch.nn.Module):
        """The model on positional tensors, returning its main outputs (and the sentence embedding)."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args):
            feeds = dict(zip(names, args, strict=True))
            out = self.model(**feeds)
            if pooling is None:
                return out[outputs[0]] if len(outputs) == 1 else tuple(out[name] for name in outputs)
            main = out[outputs[0]]
            mode, normalise = pooling
            mask = feeds["attention_mask"].unsqueeze(-1).to(main.dtype)
            if mode == "cls":
                pooled = main[:, 0]
            elif mode == "max":
                pooled = main.masked_fill(mask == 0, -1e9).max(dim=1).values
            else:
                pooled = (main * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            if normalise:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            return main, pooled

    return Export().eval()


def export_folder(path: Path, opset: int, specs: list[TensorSpec], sample: dict | None, task: str | None = None):
    """Load the folder (or the archive's folder) with transformers and export it with torch.onnx."""
    import torch
    import transformers

    from hpcfair.convert import torch_ops
    from hpcfair.convert.exported import Exported, export_folder_path, torch_reference, versions, written

    folder = path if path.is_dir() else None
    if folder is None:
        from hpcfair.convert.formats import extract_archive

        folder = extract_archive(path, path.parent / "unpacked", marker="config.json")
    folder = folder if is_folder(folder) else find_folder(folder)
    if folder is None:
        raise ConversionError("unsupported_format", f"{path.name} has no folder with config.json and model weights "
                                                    f"({', '.join(WEIGHTS[::2])}).")
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ConversionError("corrupt_file", f"{path.name}: config.json is not readable JSON.", cause=exc)
    task = task_of(folder, config, task)
    loader = getattr(transformers, TASKS[task])
    dtype = checkpoint_dtype(config)
    try:
        model = loader.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False,
                                       dtype=getattr(torch, dtype), attn_implementation="eager").eval()
    except Exception as exc:  # noqa: BLE001
        raise ConversionError("corrupt_file", f"{path.name}: transformers {transformers.__version__} could not load "
                                              f"the folder as {TASKS[task]} (model_type "
                                              f"{str(config.get('model_type'))[:40]!r}). Check that config.json and "
                                              "the weights belong together and that the architecture is one "
                                              "transformers ships (custom code is not run).", cause=exc)
    if hasattr(model.config, "use_cache"):
        model.config.use_cache = False
    names = _input_names(folder, model)
    specs = _input_specs(model, names)
    if dtype == "float16":  # an image model in float16 takes its pixels in float16
        specs = [replace(spec, dtype="float16") if spec.dtype == "float32" else spec for spec in specs]
    names = [spec.name for spec in specs]
    pooling = _pooling(folder) if task == "sentence-similarity" else None
    example = sample or generate_inputs([_batch_of_two(spec) for spec in specs])  # batch 1 could be baked in
    args = tuple(torch.from_numpy(np.asarray(example[s.name], dtype=s.dtype)) for s in specs)
    outputs = _output_names(model, names, args)
    wrapper = _wrapper(model, names, outputs, pooling)
    dynamic = {spec.name: {axis: spec.shape[axis] for axis in spec.dynamic_axes} for spec in specs}
    follows = "decoder_input_ids" if "decoder_input_ids" in names else names[0]  # the outputs' sequence axis
    for name in outputs:
        sequence = task not in ("text-classification", "image-classification") and 1 in dynamic[follows]
        dynamic[name] = {0: "batch", **({1: dynamic[follows][1]} if sequence else {})}
    if "pixel_values" in names and "input_ids" in names:  # text and images: each output follows its own batch
        dynamic.update({name: MULTIMODAL_AXES.get(name, {0: "batch"}) for name in outputs})
    if pooling:
        outputs.append("sentence_embedding")
        dynamic["sentence_embedding"] = {0: "batch"}
    torch_ops.register()
    target = export_folder_path()
    try:
        with torch.no_grad():
            torch.onnx.export(wrapper, args, str(target), dynamo=False, opset_version=opset, input_names=names,
                              output_names=outputs, dynamic_axes=dynamic)
    except Exception as exc:  # noqa: BLE001
        from hpcfair.convert.exported import torch_error

        raise torch_error(exc, opset)
    exported, on_disk = written(target)
    reference = torch_reference(wrapper, names)
    graph_inputs = {value.name for value in exported.graph.input}
    unused = [name for name in names if name not in graph_inputs]
    if unused:  # the exporter drops an input the model ignores (DeBERTa's token types with no type vocabulary)
        reference = _feeding_zeros(reference, unused, next(n for n in names if n in graph_inputs))
        specs = [spec for spec in specs if spec.name in graph_inputs]
    width = getattr(model.config, "hidden_size", None)
    for value in exported.graph.output:  # the pooled width is the hidden size, whatever the tracer named it
        if value.name == "sentence_embedding" and isinstance(width, int):
            value.type.tensor_type.shape.dim[1].Clear()
            value.type.tensor_type.shape.dim[1].dim_value = width
    extra = Path("keep")  # in the work folder (the child's working directory), moved beside the ONNX file
    for name in KEPT:
        if (folder / name).is_file():
            (extra / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / name, extra / name)
    notes = {"task": task, "dtype": dtype, "hf_model_type": str(config.get("model_type", ""))[:64], "exporter_choice": (
        "torch.onnx.export (TorchScript exporter) on transformers' AutoModel classes: optimum/optimum-onnx do not "
        "install with the pinned transformers 5"), "kept_files": sorted(str(p.relative_to(extra))
                                                                      for p in extra.rglob("*") if p.is_file())}
    if pooling:
        notes["pooling"] = {"mode": pooling[0], "normalize": pooling[1]}
    if unused:
        notes["unused_inputs"] = unused
    return Exported(exported, reference, specs,
                    "torch.onnx.export (Hugging Face folder, transformers AutoModel)",
                    versions("torch", "transformers", "tokenizers", "onnx"), notes, path=on_disk)


def checkpoint_dtype(config: dict[str, Any]) -> str:
    """The torch dtype the folder is exported in: its checkpoint's, with bfloat16 as float16 (ONNX Runtime's
    CPU kernels take float16, not bfloat16; both are 2 bytes a weight), float32 for anything else."""
    named = str(config.get("dtype") or config.get("torch_dtype") or "float32").removeprefix("torch.")
    return "float16" if named in ("float16", "bfloat16", "half") else "float32"

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
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.convert.errors import ConversionError
from hpcfair.convert.formats import HF_WEIGHTS as WEIGHTS
from hpcfair.convert.signature import TensorSpec

# Files a runtime needs beside the ONNX model to take text (and to name labels): kept with it.
KEPT = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
        "vocab.json", "merges.txt", "added_tokens.json", "tokenizer.model", "spiece.model",
        "sentencepiece.bpe.model", "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json",
        "1_Pooling/config.json")
TASKS = {
    "feature-extraction": "AutoModel",
    "sentence-similarity": "AutoModel",
    "text-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
    "fill-mask": "AutoModelForMaskedLM",
    "text-generation": "AutoModelForCausalLM",
    "question-answering": "AutoModelForQuestionAnswering",
}
ARCHITECTURE_TASKS = (("ForSequenceClassification", "text-classification"),
                      ("ForTokenClassification", "token-classification"), ("ForMaskedLM", "fill-mask"),
                      ("ForCausalLM", "text-generation"), ("LMHeadModel", "text-generation"),
                      ("ForQuestionAnswering", "question-answering"))


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


def _input_names(folder: Path) -> list[str]:
    """What the tokenizer gives the model (input_ids, attention_mask, and token_type_ids for BERT)."""
    try:
        from transformers import AutoTokenizer

        names = list(AutoTokenizer.from_pretrained(str(folder), local_files_only=True).model_input_names)
    except Exception:  # noqa: BLE001 - no tokenizer: the usual pair
        names = []
    return [n for n in names if n in ("input_ids", "attention_mask", "token_type_ids")] or ["input_ids",
                                                                                          "attention_mask"]


def _wrapper(model, names: list[str], task: str, pooling: tuple[str, bool] | None):
    import torch

    class Export(torch.nn.Module):
        """The model on positional tensors, returning its main output (and the sentence embedding)."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args):
            feeds = dict(zip(names, args, strict=True))
            out = self.model(**feeds)
            main = out.logits if hasattr(out, "logits") else out.last_hidden_state
            if pooling is None:
                return main
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
    import io

    import torch
    import transformers

    from hpcfair.convert import torch_ops
    from hpcfair.convert.exported import Exported, torch_reference, versions

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
    try:
        model = loader.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False,
                                       dtype=torch.float32, attn_implementation="eager").eval()
    except Exception as exc:  # noqa: BLE001
        raise ConversionError("corrupt_file", f"{path.name}: transformers {transformers.__version__} could not load "
                                              f"the folder as {TASKS[task]} (model_type "
                                              f"{str(config.get('model_type'))[:40]!r}). Check that config.json and "
                                              "the weights belong together and that the architecture is one "
                                              "transformers ships (custom code is not run).", cause=exc)
    if hasattr(model.config, "use_cache"):
        model.config.use_cache = False
    names = _input_names(folder)
    pooling = _pooling(folder) if task == "sentence-similarity" else None
    wrapper = _wrapper(model, names, task, pooling)
    vocab = int(getattr(model.config, "vocab_size", 1000) or 1000)
    bounds = {"input_ids": (0, vocab), "attention_mask": (1, 2), "token_type_ids": (0, 1)}
    specs = [TensorSpec(n, ["batch", "sequence"], "int64", *bounds[n]) for n in names]
    example = sample or {s.name: np.random.default_rng(0).integers(s.low, s.high, size=(2, 8)) for s in specs}
    args = tuple(torch.from_numpy(np.asarray(example[n], dtype=np.int64)) for n in names)
    outputs = ["last_hidden_state" if task in ("feature-extraction", "sentence-similarity") else "logits"]
    if pooling:
        outputs.append("sentence_embedding")
    dynamic = {n: {0: "batch", 1: "sequence"} for n in names}
    dynamic.update({outputs[0]: {0: "batch", 1: "sequence"}, **({"sentence_embedding": {0: "batch"}} if pooling
                                                                 else {})})
    if task == "text-classification":
        dynamic[outputs[0]] = {0: "batch"}
    torch_ops.register()
    buffer = io.BytesIO()
    try:
        with torch.no_grad():
            torch.onnx.export(wrapper, args, buffer, dynamo=False, opset_version=opset, input_names=names,
                              output_names=outputs, dynamic_axes=dynamic)
    except Exception as exc:  # noqa: BLE001
        from hpcfair.convert.exported import torch_error

        raise torch_error(exc, opset)
    import onnx

    exported = onnx.load_from_string(buffer.getvalue())
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
    notes = {"task": task, "hf_model_type": str(config.get("model_type", ""))[:64], "exporter_choice": (
        "torch.onnx.export (TorchScript exporter) on transformers' AutoModel classes: optimum/optimum-onnx do not "
        "install with the pinned transformers 5"), "kept_files": sorted(str(p.relative_to(extra))
                                                                      for p in extra.rglob("*") if p.is_file())}
    if pooling:
        notes["pooling"] = {"mode": pooling[0], "normalize": pooling[1]}
    return Exported(exported, torch_reference(wrapper, names), specs,
                    "torch.onnx.export (Hugging Face folder, transformers AutoModel)",
                    versions("torch", "transformers", "tokenizers", "onnx"), notes)

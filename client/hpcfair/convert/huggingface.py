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
# The hub's own names for the tasks transformers' pipelines name otherwise (kept from earlier reports).
TASK_NAMES = {"text2text-generation": "text2text-generation", "feature-extraction": "feature-extraction"}
BASE_TASKS = ("feature-extraction", "sentence-similarity", "image-feature-extraction")


# Auto classes transformers' pipelines do not name (v5 has no question-answering or text2text pipeline): the
# hub's names for them; any other ``AutoModelFor<Head>`` is the task ``<head>`` in kebab case.
AUTO_TASKS = {"AutoModelForQuestionAnswering": "question-answering", "AutoModelForSeq2SeqLM": "text2text-generation",
              "AutoModelForPreTraining": "pretraining"}


def task_classes() -> dict[str, tuple[str, ...]]:
    """Every task transformers knows, with its auto-model classes (``AutoModelFor…``): its pipelines' tasks,
    then one for each other auto class it ships. The task table is derived from transformers itself, so every
    head it ships is in it, not a list of examples."""
    import re

    import transformers
    from transformers.pipelines import SUPPORTED_TASKS

    table: dict[str, tuple[str, ...]] = {}
    for task, entry in SUPPORTED_TASKS.items():
        classes = tuple(getattr(c, "__name__", str(c)) for c in (entry.get("pt") or ()) if c is not None)
        if classes:
            table[task] = classes
    named = {c for classes in table.values() for c in classes}
    for name in sorted(n for n in dir(transformers) if n.startswith("AutoModelFor") and n not in named):
        head = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name.removeprefix("AutoModelFor")).lower()
        table.setdefault(AUTO_TASKS.get(name, head), (name,))
    table["pretraining"] = table.pop("pretraining", ("AutoModelForPreTraining",))  # a model's other heads first
    table["feature-extraction"] = ("AutoModel",)
    table["sentence-similarity"] = ("AutoModel",)
    table["image-feature-extraction"] = ("AutoModel",)
    return table


def _mapped(auto_class: str, model_type: str) -> str | None:
    """The class ``auto_class`` (``AutoModelFor…``) loads for ``model_type``, None where it has none."""
    import transformers

    mapping = getattr(getattr(transformers, auto_class, None), "_model_mapping", None)
    names = getattr(mapping, "_model_mapping", {}) or {}
    found = names.get(model_type)
    return (found[0] if isinstance(found, (list, tuple)) else found) if found else None


def tasks_of_architecture(architecture: str, model_type: str) -> list[str]:
    """The tasks whose auto classes load ``architecture`` for ``model_type`` (e.g. SegformerForSemantic-
    Segmentation: image-segmentation), in transformers' order."""
    return [task for task, classes in task_classes().items() if task not in BASE_TASKS
            and any(_mapped(c, model_type) == architecture for c in classes)]


def plan(folder: Path, config: dict[str, Any], given: str | None) -> tuple[str, str]:
    """(task, the transformers class to load): the folder's own architecture with its own head, or for a
    ``given`` task the class transformers' auto classes load for it. A head the table does not know, an
    architecture transformers does not ship and a task the model type has no head for are refused by name,
    never exported as the base model."""
    import transformers

    table = task_classes()
    model_type = str(config.get("model_type") or "")
    architecture = str(next(iter(config.get("architectures") or []), "") or "")
    base = _mapped("AutoModel", model_type)
    given = given if given in table else None  # a version's free-form task ("unspecified"): the folder decides
    if given:
        if given in BASE_TASKS:
            if not base:
                raise ConversionError("unsupported_format", f"model_type {model_type[:40]!r} has no base model in "
                                                            f"transformers {transformers.__version__}.")
            return given, base
        loaded = next((_mapped(c, model_type) for c in table[given] if _mapped(c, model_type)), None)
        if not loaded:
            known = tasks_of_architecture(architecture, model_type) if architecture else []
            raise ConversionError("unsupported_format", f"model_type {model_type[:40]!r} has no {given} head in "
                                                        f"transformers {transformers.__version__}"
                                                        + (f"; the folder's {architecture} is {', '.join(known)}"
                                                           if known else "") + ". Convert it without a task (its "
                                                        "own head is kept) or with the task of its head.")
        return given, loaded
    if (folder / "modules.json").is_file():
        return "sentence-similarity", base or "AutoModel"
    if not architecture or architecture == base:
        return "feature-extraction", base or "AutoModel"
    if not hasattr(transformers, architecture):
        raise ConversionError("unsupported_format", f"config.json names the architecture {architecture[:60]!r}, "
                                                    f"which transformers {transformers.__version__} does not ship "
                                                    "(a folder's own Python is not run). Save the model with a "
                                                    "transformers class, or export it with torch.export (.pt2).")
    tasks = tasks_of_architecture(architecture, model_type)
    if not tasks:
        raise ConversionError("unsupported_format", f"config.json names {architecture[:60]} for model_type "
                                                    f"{model_type[:40]!r}, and no transformers auto class loads that "
                                                    "head for it, so the converter cannot say which task, inputs and "
                                                    "outputs it has; it is not exported as its base model. Check the "
                                                    "config's architectures and model_type, or export the model with "
                                                    "torch.export (.pt2).")
    preferred = next((t for t in TASK_NAMES if t in tasks), tasks[0])
    return preferred, architecture


def is_folder(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file() and any((path / w).is_file() for w in WEIGHTS)


def find_folder(root: Path) -> Path | None:
    """The shallowest folder under ``root`` holding config.json and weights."""
    candidates = sorted((p.parent for p in root.rglob("config.json")), key=lambda p: len(p.parts))
    return next((p for p in candidates if is_folder(p)), None)


def task_of(folder: Path, config: dict[str, Any], given: str | None) -> str:
    """The task asked for, or the one the config's architecture names (a sentence-transformers folder:
    sentence-similarity; a bare encoder: feature-extraction)."""
    return plan(folder, config, given)[0]


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


def _input_specs(model, names: list[str], preprocessor: dict[str, Any]) -> list[TensorSpec]:
    """The export's inputs: token ids (and a decoder's, for an encoder-decoder such as T5 or BART) with dynamic
    batch and sequence axes, an image model's ``pixel_values`` at the size its preprocessor (else its config)
    names, or a raw-waveform speech model's ``input_values`` (one second at the preprocessor's sampling rate).
    Speech models on spectrogram features are refused with a clear error: their feature extraction is not part
    of the model."""
    import inspect

    config = model.config
    accepted = inspect.signature(model.forward).parameters
    if "input_ids" not in accepted and "pixel_values" in accepted:
        return [_image_spec(config, "batch", preprocessor)]
    if "input_ids" not in accepted and "input_values" in accepted and getattr(config, "conv_kernel", None):
        rate = int(preprocessor.get("sampling_rate") or 16000)
        return [TensorSpec("input_values", ["batch", rate], "float32", -1.0, 1.0)]
    if "input_ids" not in accepted:
        found = next((n for n in ("input_features", "input_values") if n in accepted), "")
        raise ConversionError("unsupported_format", f"The folder's {type(model).__name__} takes {found or 'inputs'} "
                                                    "other than token ids, images or a raw waveform (a speech model "
                                                    "on spectrogram features); the hub converts Hugging Face text, "
                                                    "image and waveform models. Export it with torch.export (.pt2) "
                                                    "instead.")
    text = getattr(config, "text_config", None)  # a text and image model keeps its vocabulary there
    vocab = int(getattr(config, "vocab_size", None) or getattr(text, "vocab_size", None) or 1000)
    bounds = {"input_ids": (0, vocab), "attention_mask": (1, 2), "token_type_ids": (0, 1)}
    specs = [TensorSpec(n, ["batch", "sequence"], "int64", *bounds[n]) for n in names]
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in accepted:
        specs.append(TensorSpec("decoder_input_ids", ["batch", "decoder_sequence"], "int64", 0, vocab))
    if "pixel_values" in accepted:  # a text and image model (CLIP-style): both are fed, each with its batch
        specs.append(_image_spec(config, "images", preprocessor))
    return specs


def preprocessor_size(preprocessor: dict[str, Any]) -> tuple[int, int] | None:
    """(height, width) the folder's image processor gives the model: its crop when it crops, else its resize
    (``{height, width}``, ``shortest_edge`` as a square, or one int), None when it names no size."""
    def pair(value: Any) -> tuple[int, int] | None:
        if isinstance(value, int) and value > 0:
            return value, value
        if isinstance(value, dict):
            if isinstance(value.get("height"), int) and isinstance(value.get("width"), int):
                return int(value["height"]), int(value["width"])
            if isinstance(value.get("shortest_edge"), int):
                return int(value["shortest_edge"]), int(value["shortest_edge"])
        return None

    crop = pair(preprocessor.get("crop_size")) if preprocessor.get("do_center_crop") else None
    return crop or pair(preprocessor.get("size"))


def _image_spec(config, batch: str, preprocessor: dict[str, Any]) -> TensorSpec:
    """``pixel_values`` at the size the preprocessor (else the vision config) names, with the batch axis
    ``batch``."""
    vision = getattr(config, "vision_config", None) or config
    size = getattr(vision, "image_size", None) or 224
    height, width = preprocessor_size(preprocessor) or ((size, size) if isinstance(size, int) else tuple(size)[:2])
    channels = int(getattr(vision, "num_channels", 3) or 3)
    return TensorSpec("pixel_values", [batch, channels, int(height), int(width)], "float32", -1.0, 1.0)


def _preprocessor(folder: Path) -> dict[str, Any]:
    for name in ("preprocessor_config.json", "feature_extractor_config.json"):
        try:
            found = json.loads((folder / name).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(found, dict):
            return found
    return {}


def _batch_of_two(spec: TensorSpec) -> TensorSpec:
    return replace(spec, shape=[2, *spec.shape[1:]]) if spec.shape and not isinstance(spec.shape[0], int) else spec


def _feeding_zeros(reference, names: list[str], like: str):
    """``reference`` given zeros for ``names`` (inputs the ONNX graph dropped as unused), shaped like ``like``."""

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return reference({**{name: np.zeros_like(feeds[like]) for name in names}, **feeds})

    return run


HIDDEN = ("hidden_state", "hidden_states", "pooler_output", "attentions", "past_key_values")


def _output_names(model, names: list[str], args: tuple, task: str) -> list[str]:
    """The outputs worth exporting, from one run on the example. A base model (feature extraction): ``logits``,
    else ``last_hidden_state``, else every ``*logits``/``logits_*`` and ``*_embeds`` (a text and image model's
    similarities and embeddings), else the first tensor. A head: every tensor the head returns (a detector's
    ``logits`` and ``pred_boxes``, a segmenter's ``logits``, a depth model's ``predicted_depth``, a
    question-answering head's start and end), without the hidden states it also hands back."""
    import torch

    with torch.no_grad():
        out = model(**dict(zip(names, args, strict=True)))
    tensors = [key for key, value in out.items() if isinstance(value, torch.Tensor) and key != "loss"]
    if task not in BASE_TASKS:
        head = [key for key in tensors if not any(part in key for part in HIDDEN)]
        return head or tensors[:1]
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


def export_folder(path: Path, opset: int, specs: list[TensorSpec], sample: dict | None, task: str | None = None,
                  **_: object):
    """Load the folder (or the archive's folder) with transformers and export it with torch.onnx."""
    import torch
    import transformers

    from hpcfair.convert import experts, torch_ops
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
    task, class_name = plan(folder, config, task)
    loader = getattr(transformers, class_name)
    dtype = checkpoint_dtype(config)
    try:
        model, loading = loader.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False,
                                                dtype=getattr(torch, dtype), attn_implementation="eager",
                                                output_loading_info=True)
    except Exception as exc:  # noqa: BLE001
        raise ConversionError("corrupt_file", f"{path.name}: transformers {transformers.__version__} could not load "
                                              f"the folder as {class_name} (model_type "
                                              f"{str(config.get('model_type'))[:40]!r}). Check that config.json and "
                                              "the weights belong together and that the architecture is one "
                                              "transformers ships (custom code is not run).", cause=exc)
    model = model.eval()
    _check_weights(path.name, class_name, task, loading)
    dense = experts.densify(model)
    if hasattr(model.config, "use_cache"):
        model.config.use_cache = False
    names = _input_names(folder, model)
    specs = _input_specs(model, names, _preprocessor(folder))
    if dtype == "float16":  # an image model in float16 takes its pixels in float16
        specs = [replace(spec, dtype="float16") if spec.dtype == "float32" else spec for spec in specs]
    names = [spec.name for spec in specs]
    pooling = _pooling(folder) if task == "sentence-similarity" else None
    example = sample or generate_inputs([_batch_of_two(spec) for spec in specs])  # batch 1 could be baked in
    args = tuple(torch.from_numpy(np.asarray(example[s.name], dtype=s.dtype)) for s in specs)
    outputs = _output_names(model, names, args, task)
    wrapper = _wrapper(model, names, outputs, pooling)
    dynamic = {spec.name: {axis: spec.shape[axis] for axis in spec.dynamic_axes} for spec in specs}
    follows = "decoder_input_ids" if "decoder_input_ids" in names else names[0]  # the outputs' sequence axis
    for name in outputs:
        pooled = task.endswith("classification") and task != "token-classification"  # one row a sample
        sequence = not pooled and 1 in dynamic[follows]
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
    reference = experts.reference(model, torch_reference(wrapper, names))
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
    notes = {"task": task, "hf_class": class_name, "head_outputs": list(outputs), "dtype": dtype,
             "hf_model_type": str(config.get("model_type", ""))[:64], "exporter_choice": (
        "torch.onnx.export (TorchScript exporter) on transformers' AutoModel classes: optimum/optimum-onnx do not "
        "install with the pinned transformers 5"), "kept_files": sorted(str(p.relative_to(extra))
                                                                      for p in extra.rglob("*") if p.is_file())}
    if pooling:
        notes["pooling"] = {"mode": pooling[0], "normalize": pooling[1]}
    if unused:
        notes["unused_inputs"] = unused
    if dense:
        notes["experts"] = experts.DENSE_NOTE
    return Exported(exported, reference, specs,
                    "torch.onnx.export (Hugging Face folder, transformers AutoModel)",
                    versions("torch", "transformers", "tokenizers", "onnx"), notes, path=on_disk)


def _check_weights(name: str, class_name: str, task: str, loading: dict[str, Any]) -> None:
    """Refuse an export that is not the uploaded model: weights the loaded class leaves out (a head that would
    be dropped) or weights it needs that the folder lacks (a head that would be random). A sentence-transformers
    folder keeps its encoder only, as sentence-transformers itself does; a missing pooler is not exported."""
    unexpected = [] if task == "sentence-similarity" else list(loading.get("unexpected_keys") or [])
    missing = [key for key in loading.get("missing_keys") or [] if "pooler" not in key.split(".")[:2]]
    for keys, said, then in ((unexpected, "would drop {n} of its weights", "the export would not be the uploaded "
                               "model. Convert it without a task, so that its own architecture (config.json) and "
                               "head are kept."),
                              (missing, "finds {n} of the weights it needs missing", "that part would be random. "
                               "Convert it without a task, or with the task its weights were trained for.")):
        if keys:
            raise ConversionError("unsupported_format", f"{name}: loading the folder as {class_name} ({task}) "
                                                        f"{said.format(n=len(keys))} ({', '.join(sorted(keys)[:4])}"
                                                        f"…): {then}")


def checkpoint_dtype(config: dict[str, Any]) -> str:
    """The torch dtype the folder is exported in: its checkpoint's, with bfloat16 as float16 (ONNX Runtime's
    CPU kernels take float16, not bfloat16; both are 2 bytes a weight), float32 for anything else."""
    named = str(config.get("dtype") or config.get("torch_dtype") or "float32").removeprefix("torch.")
    return "float16" if named in ("float16", "bfloat16", "half") else "float32"

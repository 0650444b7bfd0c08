"""The model families the hub recognises: one record each in ``FAMILIES``, in one spelling.

A family's ``name`` is what every surface says: the version metadata's ``format`` (and so the search facet), the
conversion report's ``source_format``, the fine-tune's checks. The converter (``formats.detect``,
``converters.export``) and the hub's metadata derivation (``hub.metadata.derive``) both read this table; adding a
family is one row here and the module its ``export`` names (docs/developing/extending/model-family.md). Nothing here
imports a framework: the web process reads this table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any

HEAD = 64  # bytes of a file that ``Family.head`` reads
HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
HF_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
              "pytorch_model.bin.index.json")


@dataclass(frozen=True)
class Family:
    """One model family. ``export`` ("module:function", run in the sandbox's child) returns an ``Exported`` whose
    reference (the framework's own outputs) verification compares the ONNX model with; None: not converted
    (ONNX is checked as it is; the others are only described)."""

    name: str  # the one spelling (metadata ``format``, reports, facets)
    label: str  # what people read in messages
    framework: str  # the library that wrote it (metadata ``framework``; ontology's FRAMEWORKS, else "other")
    suffixes: tuple[str, ...] = ()  # file name endings that say it; the first is the one a sniffed file gets
    members: tuple[frozenset[str], ...] = ()  # a folder or archive holding all of one set is this family
    head: Callable[[bytes], bool] | None = None  # a file's first HEAD bytes say it (names that tell nothing)
    zip_names: Callable[[list[str]], bool] | None = None  # a zip's member names say it (names that tell nothing)
    check: str | None = None  # a ``formats`` function that refuses a file its suffix named but its content does not
    export: str | None = None  # "module:function" that exports it to ONNX in the sandbox

    def exporter(self) -> Callable[..., Any]:
        """The export function, imported now (in the sandbox's child: it imports the framework)."""
        module, _, function = (self.export or "").partition(":")
        return getattr(import_module(module), function)


UBJSON_LENGTHS = (b"i", b"U", b"I", b"l", b"L")  # the integer type of a UBJSON key's length


def booster_of(head: bytes) -> str | None:
    """xgboost or lightgbm from a file's first ``HEAD`` bytes: XGBoost's JSON or UBJSON object
    opening with its "learner", LightGBM's text model with ``tree`` then ``version=``. Only bytes are read:
    nothing is parsed as a model."""
    compact = head.replace(b" ", b"").replace(b"\n", b"").replace(b"\r", b"").replace(b"\t", b"")
    if compact.startswith(b'{"learner":{'):  # JSON: the learner is an object
        return "xgboost"
    if head[:1] == b"{" and head[1:2] in UBJSON_LENGTHS and b"learner{" in head[:24]:  # UBJSON
        return "xgboost"
    if re.match(rb"tree\r?\nversion=v\d", head):
        return "lightgbm"
    return None


def torch_zip_format(names: list[str]) -> str | None:
    """What a PyTorch zip holds, from its member names only: ``torch-export`` (a torch.export program),
    ``torchscript`` (torch.jit.save: ``code/`` and ``constants.pkl``), ``pytorch`` (a plain torch.save
    checkpoint: a ``data.pkl`` without code) or None (not PyTorch's). Only the entries right under the archive's
    top folder count: a TorchScript module's own code may sit under ``code/__torch__/…/models/…``."""
    top = {parts[1] if len(parts) > 1 else parts[0] for parts in (n.split("/") for n in names)}
    if {"archive_format", "models"} & top and "data" in top:
        return "torch-export"
    if {"code", "constants.pkl"} & top:
        return "torchscript"
    if "data.pkl" in top:
        return "pytorch"
    return None


def says(read: Callable[[Any], str | None], name: str) -> Callable[[Any], bool]:
    """A ``head`` or ``zip_names`` test: whether ``read`` of the bytes or names gives ``name``."""
    return lambda value: read(value) == name


CONVERTERS = "hpcfair.convert.converters"
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("onnx", "ONNX", "onnx", (".onnx",), head=lambda head: head[:1] == b"\x08"),  # ModelProto field 1
    Family("torchscript", "PyTorch TorchScript", "pytorch", (".pt", ".pth"), check="check_torchscript",
           zip_names=says(torch_zip_format, "torchscript"), export=f"{CONVERTERS}:export_torchscript"),
    Family("torch-export", "PyTorch torch.export program", "pytorch", (".pt2",), check="check_zip",
           zip_names=says(torch_zip_format, "torch-export"), export=f"{CONVERTERS}:export_torch_program"),
    Family("keras", "Keras (.keras)", "keras", (".keras",), zip_names=lambda n: {"config.json", "metadata.json"}
           <= set(n), check="check_zip", export=f"{CONVERTERS}:export_keras"),
    Family("keras-h5", "Keras HDF5 (.h5)", "keras", (".h5", ".hdf5"), head=lambda head: head[:8] == HDF5_MAGIC,
           check="check_hdf5", export=f"{CONVERTERS}:export_keras"),
    Family("savedmodel", "TensorFlow SavedModel", "tensorflow", members=(frozenset({"saved_model.pb"}),),
           export=f"{CONVERTERS}:export_savedmodel"),
    Family("pickle", "scikit-learn (pickle)", "scikit-learn", (".pkl", ".pickle", ".sav"),
           export=f"{CONVERTERS}:export_sklearn"),
    Family("joblib", "scikit-learn (joblib)", "scikit-learn", (".joblib",), export=f"{CONVERTERS}:export_sklearn"),
    Family("skops", "scikit-learn (skops)", "scikit-learn", (".skops",), export=f"{CONVERTERS}:export_sklearn"),
    Family("xgboost", "XGBoost (save_model .json/.ubj)", "xgboost", (".ubj", ".json"),
           head=says(booster_of, "xgboost"), check="check_booster", export="hpcfair.convert.boosters:export_booster"),
    Family("lightgbm", "LightGBM (text model, save_model)", "lightgbm", (".txt",),
           head=says(booster_of, "lightgbm"), check="check_booster", export="hpcfair.convert.boosters:export_booster"),
    Family("huggingface", "Hugging Face folder (config.json + model.safetensors/pytorch_model.bin + tokenizer)",
           "pytorch", members=tuple(frozenset({"config.json", w}) for w in HF_WEIGHTS),
           export="hpcfair.convert.huggingface:export_folder"),
    # described, not converted: the hub cannot run weights without the code that defines the model
    Family("pytorch", "PyTorch torch.save file", "pytorch"),
    Family("safetensors", "safetensors weights", "pytorch", (".safetensors",), check="check_weights"),
)}
# Spellings older versions wrote (the converter's, in conversion reports), read once here as today's.
OLD_NAMES = {"keras_h5": "keras-h5", "torch_export": "torch-export", "tf_savedmodel": "savedmodel",
             "sklearn": "pickle", "torch_save": "pytorch"}


def family(name: str) -> Family | None:
    """The family of a stored or sent name, in today's spelling or an older one; None for others."""
    return FAMILIES.get(OLD_NAMES.get(name, name))


def converted() -> list[Family]:
    """The families the converter takes (ONNX first: it is taken as it is)."""
    return [f for f in FAMILIES.values() if f.export or f.name == "onnx"]


def known() -> str:
    """The families the converter takes, for messages."""
    return ", ".join(f.label for f in converted())


def named(name: str, default: str) -> str:
    """The suffix a file of family ``name`` is given where its own name says nothing (``model.ckpt``)."""
    return next(iter(FAMILIES[name].suffixes), default)


def by_suffix(suffix: str) -> list[Family]:
    """The families a file name ending in ``suffix`` (lower case, with its dot) may be, in table order."""
    return [f for f in FAMILIES.values() if suffix in f.suffixes]


def by_members(names: Any) -> Family | None:
    """The family a folder or archive holding files of these (base) names is; None when none."""
    found = set(names)
    return next((f for f in FAMILIES.values() if any(m <= found for m in f.members)), None)


def by_head(head: bytes) -> Family | None:
    """The family a file's first ``HEAD`` bytes say; None when none."""
    return next((f for f in FAMILIES.values() if f.head and f.head(head)), None)


def by_zip(names: list[str]) -> Family | None:
    """The family a zip's member names say; None when none."""
    return next((f for f in FAMILIES.values() if f.zip_names and f.zip_names(names)), None)


def suffixes() -> set[str]:
    """Every name ending that says a model family (except the boosters' .json/.txt, which data files share)."""
    return {s for f in FAMILIES.values() if f.export or f.name == "onnx" for s in f.suffixes} - {".json", ".txt"}

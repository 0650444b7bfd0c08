"""What every exporter hands back (``Exported``), and the helpers exporters of several families share: library
versions, the PyTorch reference run and the PyTorch exporter's errors. A module of its own so that the
family exporters (``converters``, ``boosters``, ``huggingface``) import it, not each other."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.convert.errors import ConversionError, token
from hpcfair.convert.signature import TensorSpec

Reference = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


@dataclass
class Exported:
    model: Any  # onnx.ModelProto
    reference: Reference | None
    inputs: list[TensorSpec]
    converter: str
    libraries: dict[str, str]
    notes: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None  # the ONNX file on disk when its weights live in data files beside it


def export_folder_path() -> Path:
    """Where an exporter writes its ONNX file (in the child's work folder, an empty folder of its own): to a
    file, not to memory, so that a model past protobuf's 2 GiB can be written with its weights beside it."""
    folder = Path(tempfile.mkdtemp(prefix="export-", dir="."))
    return folder.resolve() / "model.onnx"


def written(path: Path):
    """The exported file at ``path`` as (graph, path): with its weights moved into one data file beside it
    when they pass ``hpcfair.external_data.threshold()`` (the graph then comes without them, and ``path`` is
    where they are), else loaded whole (and the path None: the model is self-contained)."""
    import onnx

    from hpcfair import external_data

    if external_data.externalise(path):
        return external_data.load_graph(path), path
    return onnx.load(str(path)), None


def versions(*names: str) -> dict[str, str]:
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def flatten(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [item for key in sorted(value) for item in flatten(value[key])]
    if isinstance(value, list | tuple):
        return [item for entry in value for item in flatten(entry)]
    if hasattr(value, "last_hidden_state"):  # transformers ModelOutput
        return flatten(value.to_tuple())
    return [value]



# --- PyTorch ---------------------------------------------------------------------------------------


def torch_reference(module, input_names: list[str]) -> Reference:
    import torch

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        with torch.no_grad():
            outputs = module(*[torch.from_numpy(np.ascontiguousarray(feeds[name])) for name in input_names])
        return [t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t) for t in flatten(outputs)]

    return run


SPECTRAL = ("its complex-valued spectral layers (torch.fft with complex weights, as in Fourier Neural Operators) "
            "did not export even rewritten in real arithmetic (each transform as products with cos/sin tables, each "
            "complex tensor as a real and an imaginary part; ONNX Runtime runs no complex tensors). A way out: write "
            "the spectral convolution with real tensors yourself (the truncated DFT as matrix products, each complex "
            "weight as two real ones), which every exporter takes")


def torch_error(exc: Exception, opset: int, complex_weights: bool = False, program: bool = False) -> ConversionError:
    """The coded error of a failed torch export (``complex_weights``: the model holds complex tensors;
    ``program``: the file is already a torch.export program, so the advice does not send the user there)."""
    text = str(exc)
    op = (token(text, r"operator '([^']+)'") or token(text, r"export of operator ([\w:]+)")
          or token(text, r"(aten::\w+|prim::\w+|torch\.ops\.[\w.]+)"))
    if complex_weights or (op and "fft" in op):
        return ConversionError("unsupported_operator", f"The model cannot be exported to ONNX at opset {opset}: "
                                                       f"{SPECTRAL}.", cause=exc)
    way_out = ("Replace that operation in the model with ones ONNX has (torch.onnx's dynamo exporter lists "
               "them) and export the program again." if program else
               "Export the model with torch.export (.pt2) instead of TorchScript, or replace that operation.")
    if op or "UnsupportedOperator" in type(exc).__name__:
        return ConversionError(
            "unsupported_operator",
            f"The ONNX exporter cannot translate {op or 'an operator'} at opset {opset}. {way_out}", cause=exc,
        )
    return ConversionError("conversion_failed", f"torch.onnx.export could not export the model at opset {opset}: "
                                                f"{exporter_cause(exc)} Check that the model runs on the inputs it "
                                                "was given (its declared inputs or sample).", cause=exc)


# Known causes of an export's failure, in words a scientist can act on (the library's own words are only logged)
CAUSES = (
    (r"larger than the 2\s?GiB|2GB|exceeds maximum protobuf size|Message too large|ByteSize",
     "the ONNX graph passed protobuf's 2 GiB limit (its weights must go into a data file beside it: convert "
     "again with this hub's version; HUB_ONNX_EXTERNAL_DATA_MB sets where that starts)."),
    (r"(?i)out of memory|can't allocate|cannot allocate|bad_alloc",
     "the exporter ran out of memory (give the conversion more: memory_mb, HUB_CONVERT_MEMORY_MB)."),
    (r"(?i)\b(bfloat16|BFloat16|Half|float16)\b.*not (implemented|supported)|not implemented for '(Half|BFloat16)'",
     "an operation has no half-precision (float16/bfloat16) kernel on this machine's CPU (save the checkpoint "
     "in float32 and convert that)."),
)


def exporter_cause(exc: BaseException) -> str:
    """Why an export failed, for the user: a known cause in our words, else the exception's type and where it
    came from (its text, which may quote what the model's files hold, goes to the log only)."""
    import re

    text = str(exc)
    for pattern, words in CAUSES:
        if re.search(pattern, text):
            return words
    where = type(exc).__module__.split(".")[0]
    where = "the model's or the exporter's code" if where == "builtins" else where
    return f"{type(exc).__name__} in {where} (the conversion's log has its traceback)."


def holds_complex(tensors) -> bool:
    """Whether any of ``tensors`` (a module's parameters and buffers, a program's state) is complex."""
    return any(getattr(getattr(tensor, "dtype", None), "is_complex", False) for tensor in tensors)

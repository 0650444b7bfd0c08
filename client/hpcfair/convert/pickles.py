"""Pickle safety: list the globals a pickle would import, and load only through an allowlist.

A pickle runs code by naming a global (``os.system``, ``builtins.eval``...) and calling it. Before
anything is loaded, ``scan`` walks the opcodes without executing any and lists every global; a pickle
naming one outside the allowlist is refused. ``restricted_load`` then loads through an unpickler
whose ``find_class`` enforces the same allowlist, which also covers joblib files whose in-band
arrays stop the opcode walk early.
"""

from __future__ import annotations

import pickletools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from hpcfair.convert.errors import ConversionError

# Modules whose *classes* may be instantiated: data containers of the scientific stack.
SAFE_CLASS_ROOTS = ("sklearn", "numpy", "scipy", "joblib", "collections", "datetime", "decimal", "fractions")
# Functions that pickles of these libraries use to rebuild objects; nothing else callable is allowed.
SAFE_FUNCTIONS = {
    ("copyreg", "_reconstructor"),
    ("_codecs", "encode"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("numpy.random._pickle", "__randomstate_ctor"), ("numpy.random._pickle", "__bit_generator_ctor"),
    ("numpy.random._pickle", "__generator_ctor"),
    ("builtins", "slice"), ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "complex"),
    ("builtins", "bytearray"), ("builtins", "object"), ("builtins", "float"), ("builtins", "int"),
    ("builtins", "list"), ("builtins", "dict"), ("builtins", "tuple"), ("builtins", "bool"), ("builtins", "str"),
}
_DANGEROUS_ROOTS = {"os", "posix", "nt", "subprocess", "sys", "importlib", "runpy", "socket", "shutil", "pickle",
                    "marshal", "types", "ctypes", "pty", "code", "webbrowser", "multiprocessing", "signal"}


@dataclass
class ScanReport:
    """What a pickle would import: ``unsafe`` lists the refused globals."""

    globals: list[str] = field(default_factory=list)
    unsafe: list[str] = field(default_factory=list)
    complete: bool = True  # False when the opcode walk stopped early (joblib in-band arrays)

    def to_dict(self) -> dict[str, Any]:
        return {"globals": self.globals, "unsafe": self.unsafe, "complete": self.complete, "safe": not self.unsafe}


def is_allowed(module: str, name: str) -> bool:
    if (module, name) in SAFE_FUNCTIONS:
        return True
    root = module.split(".")[0]
    if root not in SAFE_CLASS_ROOTS or "." in name:
        return False
    # Only classes from those modules: resolve without importing anything new (the module must be loaded
    # by an allowed, imported library already, or importable as part of it).
    import importlib

    try:
        target = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return False
    return isinstance(target, type) and not issubclass(target, BaseException)


def describe(module: str, name: str) -> str:
    root = module.split(".")[0]
    hint = " (runs commands or code)" if root in _DANGEROUS_ROOTS or name in {"eval", "exec", "compile",
                                                                               "__import__", "getattr", "open"} else ""
    return f"{module}.{name}{hint}"


@contextmanager
def _pickle_stream(path: Path) -> Iterator[BinaryIO]:
    """The pickle bytes, decompressed when joblib compressed the file (zlib, gzip, bz2, lzma, xz)."""
    from joblib import numpy_pickle

    with open(path, "rb") as handle:
        with numpy_pickle._validate_fileobject_and_memmap(handle, str(path), None) as (stream, _mmap):
            if isinstance(stream, str):  # joblib < 0.10 files: not supported
                raise ConversionError("unsupported_format", f"{path.name} was written by a joblib older than 0.10.")
            yield stream


def scan(path: Path) -> ScanReport:
    """Walk the opcodes (nothing is executed) and list the globals the pickle names."""
    report = ScanReport()
    with _pickle_stream(path) as stream:
        _walk(stream, report)
    return report


_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8", "STRING", "BINSTRING", "SHORT_BINSTRING"}
_QUIET_OPS = {"MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT", "FRAME", "PROTO", "STOP"}


def _walk(stream: BinaryIO, report: ScanReport) -> None:
    """Follow string pushes and the memo far enough to name what each STACK_GLOBAL imports."""
    pushed: list[Any] = []  # the last values pushed (None for non-strings)
    memo: dict[int, Any] = {}
    try:
        for opcode, arg, _pos in pickletools.genops(stream):
            name = opcode.name
            if name in _STRING_OPS:
                pushed.append(arg)
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                pushed.append(memo.get(int(arg)))
            elif name == "MEMOIZE":
                memo[len(memo)] = pushed[-1] if pushed else None
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[int(arg)] = pushed[-1] if pushed else None
            elif name in ("GLOBAL", "INST"):
                module, attr = arg.split(" ", 1)
                _record(report, module, attr)
                pushed.append(None)
            elif name == "STACK_GLOBAL":
                module, attr = (pushed[-2:] + [None, None])[:2] if len(pushed) >= 2 else (None, None)
                if isinstance(module, str) and isinstance(attr, str):
                    _record(report, module, attr)
                else:
                    report.unsafe.append("a global built at run time (cannot be checked)")
                pushed.append(None)
            elif name not in _QUIET_OPS:
                pushed.append(None)
            pushed = pushed[-4:]
    except Exception:  # noqa: BLE001 - garbage after the pickle (joblib arrays) ends the walk
        report.complete = False


def _record(report: ScanReport, module: str, name: str) -> None:
    label = f"{module}.{name}"
    if label not in report.globals:
        report.globals.append(label)
        if not is_allowed(module, name):
            report.unsafe.append(describe(module, name))


def refuse_if_unsafe(report: ScanReport, filename: str) -> None:
    if report.unsafe:
        raise ConversionError(
            "unsafe_pickle",
            f"{filename} is a pickle that would import {', '.join(report.unsafe)} when loaded. Pickles can run "
            "arbitrary code, so the hub refuses it and loaded nothing. Save the model with skops "
            "(skops.io.dump) or export it to ONNX yourself.",
        )


def restricted_load(path: Path) -> Any:
    """Load a pickle or joblib file; any global outside the allowlist stops the load."""
    from joblib import numpy_pickle

    class Restricted(numpy_pickle.NumpyUnpickler):
        def find_class(self, module: str, name: str) -> Any:
            if not is_allowed(module, name):
                raise ConversionError(
                    "unsafe_pickle",
                    f"{path.name} asks for {describe(module, name)} while loading; the hub stopped the load. "
                    "Save the model with skops (skops.io.dump) or export it to ONNX yourself.",
                )
            return super().find_class(module, name)

    with _pickle_stream(path) as stream:
        return Restricted(str(path), stream, ensure_native_byte_order=True, mmap_mode=None).load()

"""Generate client/hpcfair/convert/pickle_allowlist.py: the (module, name) pairs a pickle may import.

Every scikit-learn estimator that skl2onnx converts is fitted in each variant of
``hpcfair.convert.sklearn_zoo`` and saved with pickle (protocols 0-5) and joblib (plain and compressed);
each file is loaded by an unpickler that records the globals it asks for. Classes are admitted after a
check against what must never load (file access, code execution); a function is admitted only when it is
listed in REVIEWED_FUNCTIONS below, read by a person and found to build data without touching files or
importing by name. Run after upgrading scikit-learn, numpy, scipy or skl2onnx:

    .venv/bin/python scripts/pickle_allowlist.py        # rewrites the data module
    .venv/bin/python scripts/pickle_allowlist.py --check  # exits 1 when the committed one is stale
"""

from __future__ import annotations

import argparse
import importlib
import io
import pickle
import sys
import warnings
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "client"))

from hpcfair.convert import sklearn_zoo  # noqa: E402

TARGET = ROOT / "client" / "hpcfair" / "convert" / "pickle_allowlist.py"

# Functions (not classes) that rebuild data; each was read and does no I/O and no import by name.
REVIEWED_FUNCTIONS = {
    # pickle's own helpers for protocols 0-2: object.__new__ / __init__ of an (allowed) class, bytes
    ("copyreg", "_reconstructor"), ("_codecs", "encode"),
    # numpy arrays and scalars
    ("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"),
    # numpy random generators: look the bit generator up in numpy's own table (or an allowed class)
    ("numpy.random._pickle", "__randomstate_ctor"), ("numpy.random._pickle", "__bit_generator_ctor"),
    ("numpy.random._pickle", "__generator_ctor"),
    # Cython's generated __reduce__ helpers: check a checksum, then set the fields of that one class
    ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
    ("sklearn._loss._loss", "__pyx_unpickle_CyHalfMultinomialLoss"),
    # masked arrays (GridSearchCV.cv_results_): an ndarray of an allowed class viewed as another
    ("numpy.ma.core", "_mareconstruct"),
    # sklearn's Cython trees and metrics: ``obj.__new__(obj)`` of the (allowed) class passed in
    ("sklearn.metrics._dist_metrics", "newObj"), ("sklearn.neighbors._ball_tree", "newObj"),
    ("sklearn.neighbors._kd_tree", "newObj"),
    # functions stored as estimator parameters; they compute on arrays and touch nothing else
    ("sklearn.feature_selection._univariate_selection", "f_classif"),
    ("sklearn.metrics._classification", "balanced_accuracy_score"),
    ("sklearn.utils.validation", "check_array"),  # HistGradientBoosting's categorical preprocessing
}
# Added by hand although no fitted estimator names them: plain containers that scientists pickle around
# an estimator ({"model": ..., "columns": [...]}). Each pair is also admitted under its other spellings.
EXTRA = {
    ("numpy", "dtype"), ("numpy", "ndarray"), ("collections", "OrderedDict"), ("builtins", "set"),
    ("builtins", "frozenset"), ("builtins", "slice"), ("builtins", "complex"), ("builtins", "bytearray"),
}
# Never admitted, whatever a fitted estimator names: these open, map or write files, run code or import.
FORBIDDEN_MODULES = ("os", "posix", "nt", "subprocess", "sys", "io", "_io", "pathlib", "shutil", "tempfile",
                     "socket", "importlib", "runpy", "pickle", "_pickle", "marshal", "ctypes", "code", "codeop",
                     "pty", "multiprocessing", "signal", "types", "operator", "inspect",
                     "numpy.lib", "numpy.ctypeslib", "numpy.f2py", "numpy.testing", "numpy.distutils",
                     "joblib.numpy_pickle_compat", "joblib.memory", "joblib.parallel", "scipy.io", "sklearn.datasets",
                     "sklearn.utils._testing")
FORBIDDEN_NAMES = {"eval", "exec", "compile", "open", "getattr", "setattr", "delattr", "__import__", "globals",
                   "locals", "vars", "input", "breakpoint", "memmap", "load", "loads", "save", "savez", "fromfile",
                   "tofile", "loadtxt", "genfromtxt", "fromregex", "_ufunc_reconstruct", "apply", "system"}


class _Recorder(pickle.Unpickler):
    seen: set[tuple[str, str]]

    def find_class(self, module: str, name: str):
        self.seen.add((module, name))
        return super().find_class(module, name)


def recorded(blob: bytes) -> set[tuple[str, str]]:
    unpickler = _Recorder(io.BytesIO(blob))
    unpickler.seen = set()
    unpickler.load()
    return unpickler.seen


def recorded_joblib(path: Path) -> set[tuple[str, str]]:
    from joblib import numpy_pickle

    seen: set[tuple[str, str]] = set()

    class Recorder(numpy_pickle.NumpyUnpickler):
        def find_class(self, module: str, name: str):
            seen.add((module, name))
            return super().find_class(module, name)

    with open(path, "rb") as handle, numpy_pickle._validate_fileobject_and_memmap(handle, str(path), None) as (
            stream, _):
        Recorder(str(path), stream, ensure_native_byte_order=True, mmap_mode=None).load()
    return seen


def names_of(estimator, scratch: Path) -> set[tuple[str, str]]:
    """Every global that pickling ``estimator`` in each format names."""
    import joblib

    found: set[tuple[str, str]] = set()
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        found |= recorded(pickle.dumps(estimator, protocol=protocol))
    for compress in (0, 3):
        path = scratch / f"model-{compress}.joblib"
        joblib.dump(estimator, path, compress=compress)
        found |= recorded_joblib(path)
    return found


def spellings(module: str, name: str) -> set[tuple[str, str]]:
    """The names the same global has in other pickles: Python 2 names (``__builtin__``, ``copy_reg``, which
    pickle protocols 0-2 write) and numpy 1's ``numpy.core`` for numpy 2's ``numpy._core``."""
    import _compat_pickle

    found = {(module, name)}
    for one, two in (("numpy._core", "numpy.core"), ("numpy.core", "numpy._core")):
        if module == one or module.startswith(one + "."):
            found.add((two + module[len(one):], name))
    py3 = python3_name(module, name)
    py2 = _compat_pickle.REVERSE_NAME_MAPPING.get(py3) or (_compat_pickle.REVERSE_IMPORT_MAPPING.get(py3[0], py3[0]),
                                                           name)
    return found | {py3, py2}


def python3_name(module: str, name: str) -> tuple[str, str]:
    import _compat_pickle

    return _compat_pickle.NAME_MAPPING.get((module, name)) or (_compat_pickle.IMPORT_MAPPING.get(module, module), name)


def forbidden(module: str, name: str) -> str | None:
    """Why (module, name) must never be admitted, or None."""
    module, name = python3_name(module, name)
    if any(module == m or module.startswith(m + ".") for m in FORBIDDEN_MODULES):
        return f"module {module} touches files or runs code"
    if name in FORBIDDEN_NAMES or "." in name:
        return f"{name} reads files, runs code or reaches attributes"
    try:
        with warnings.catch_warnings():  # numpy.core.* spellings warn on import
            warnings.simplefilter("ignore")
            target = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return f"{module}.{name} does not exist here"
    if isinstance(target, type):
        import numpy as np

        if issubclass(target, (BaseException, io.IOBase, np.memmap)):
            return f"{module}.{name} is an exception, a file or a memory map"
        return None
    if not spellings(module, name) & REVIEWED_FUNCTIONS:
        return f"{module}.{name} is a function nobody has reviewed: read it, then add it to REVIEWED_FUNCTIONS"
    return None


def generate() -> tuple[str, dict[str, int]]:
    import tempfile

    found: set[tuple[str, str]] = set()
    estimators: set[str] = set()
    fits = 0
    with tempfile.TemporaryDirectory() as scratch:
        for example in sklearn_zoo.examples():
            found |= names_of(example.estimator, Path(scratch))
            estimators.add(example.name)
            fits += 1
    pairs = {spelling for pair in found | EXTRA for spelling in spellings(*pair)}
    refused = {pair: why for pair in sorted(pairs) if (why := forbidden(*pair))}
    if refused:
        raise SystemExit("refusing to admit:\n" + "\n".join(f"  {m}.{n}: {why}" for (m, n), why in refused.items()))
    libraries = {name: metadata.version(name) for name in ("scikit-learn", "skl2onnx", "numpy", "scipy", "joblib")}
    figures = {"estimators": len(estimators), "fits": fits, "pairs": len(pairs)}
    lines = [
        '"""The globals a model pickle may import. GENERATED by scripts/pickle_allowlist.py; do not edit.',
        "",
        f"From {figures['fits']} fits of the {figures['estimators']} scikit-learn estimators skl2onnx converts, each",
        "saved with pickle protocols 0-5 and joblib, plus the reviewed extras in the script. Libraries:",
        ", ".join(f"{k} {v}" for k, v in libraries.items()) + ".",
        '"""',
        "",
        f"ESTIMATORS = {figures['estimators']}",
        f"FITS = {figures['fits']}",
        f"LIBRARIES = {libraries!r}",
        "ALLOWED: frozenset[tuple[str, str]] = frozenset({",
        *[f"    ({module!r}, {name!r})," for module, name in sorted(pairs)],
        "})",
        "",
    ]
    return "\n".join(lines), figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed module, write nothing")
    args = parser.parse_args()
    text, figures = generate()
    if args.check:
        current = TARGET.read_text() if TARGET.exists() else ""
        print("up to date" if current == text else f"{TARGET.relative_to(ROOT)} is stale: run {sys.argv[0]}")
        return 0 if current == text else 1
    TARGET.write_text(text)
    print(f"{TARGET.relative_to(ROOT)}: {figures['pairs']} pairs from {figures['fits']} fits of "
          f"{figures['estimators']} estimators")
    return 0


if __name__ == "__main__":
    sys.exit(main())

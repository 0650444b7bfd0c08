"""The pickle allow-list: every estimator skl2onnx converts passes and loads equal; hostile pickles that
read files, run commands or reach attributes are refused, and no message carries what they would read.

The estimators are fitted in every variant of ``hpcfair.convert.sklearn_zoo`` (the generator's own
source). Hostile files go through the scan, the restricted unpickler and the real sandboxed conversion."""

from __future__ import annotations

import copy
import copyreg
import functools
import os
import pickle
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest
from hpcfair.convert import ConversionError, convert_file, pickle_allowlist, pickles, sklearn_zoo

from tests.conftest import ROOT

# Tests that start the sandbox or build every estimator are slow; the scanner's own tests are the fast tier's.


# --- every estimator skl2onnx converts ---------------------------------------------------------------


def same(a, b, where: str = "estimator") -> None:
    """Assert ``a`` and ``b`` hold the same state, recursively (arrays compared by value and dtype)."""
    import scipy.sparse

    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        if a.dtype.kind == "O":
            for i, (x, y) in enumerate(zip(a.ravel(), b.ravel(), strict=True)):
                same(x, y, f"{where}[{i}]")
        else:
            assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), where
    elif type(a).__module__.startswith("pandas"):  # a transform's output for pandas input
        same(a.to_numpy(), b.to_numpy(), where)
        same(list(getattr(a, "columns", [])), list(getattr(b, "columns", [])), f"{where}.columns")
    elif scipy.sparse.issparse(a):
        assert a.shape == b.shape and (a != b).nnz == 0, where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, float | np.floating):
        assert a == b or (np.isnan(a) and np.isnan(b)), where
    elif isinstance(a, functools.partial):
        assert a.func is b.func, where
        same(list(a.args), list(b.args), f"{where}.args")
        same(a.keywords, b.keywords, f"{where}.keywords")
    elif isinstance(a, np.random.RandomState):
        same(a.get_state(legacy=False), b.get_state(legacy=False), f"{where}.state")
    elif isinstance(a, np.random.Generator):
        same(a.bit_generator.state, b.bit_generator.state, f"{where}.state")
    elif hasattr(a, "__getstate__") and not isinstance(a, type) and type(a).__module__.startswith(("sklearn", "numpy")):
        state_a, state_b = a.__getstate__(), b.__getstate__()
        if state_a is None and hasattr(a, "__reduce__"):  # Cython objects: state in __reduce__
            state_a, state_b = a.__reduce__()[1:], b.__reduce__()[1:]
        same(state_a, state_b, f"{where}.__state__")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def predictions(estimator, X) -> list:
    import warnings

    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in ("predict", "predict_proba", "transform", "decision_function", "score_samples"):
            if hasattr(estimator, method):
                try:
                    found.append(getattr(estimator, method)(X))
                except (ValueError, TypeError, AttributeError, NotImplementedError):
                    continue  # e.g. transform on an estimator fitted without it
    return found


@pytest.mark.slow
@pytest.mark.cpu  # its own processes (the sandbox) only: beside others in the parallel run
def test_every_convertible_estimator_passes_the_scan_and_loads_equal(tmp_path):
    import joblib
    import skops.io

    tested, files = set(), 0
    for example in sklearn_zoo.examples():
        label = f"{example.name} ({example.variant})"
        paths = []
        for protocol in (2, pickle.DEFAULT_PROTOCOL, 5):
            path = tmp_path / f"model-{protocol}.pkl"
            path.write_bytes(pickle.dumps(example.estimator, protocol=protocol))
            paths.append(path)
        for compress in (0, 3):
            path = tmp_path / f"model-{compress}.joblib"
            joblib.dump(example.estimator, path, compress=compress)
            paths.append(path)
        expected = predictions(copy.deepcopy(example.estimator), example.X)  # predict counts in KD-trees
        for path in paths:
            report = pickles.scan(path)
            assert report.unsafe == [], (label, path.name, report.unsafe)
            loaded = pickles.restricted_load(path)
            same(example.estimator, loaded, label)
            got = predictions(loaded, example.X)
            assert len(got) == len(expected), label
            for mine, theirs in zip(got, expected, strict=True):
                same(mine, theirs, f"{label} prediction")
            files += 1
        # skops files: the types skops does not trust by itself must be in the allow-list too
        blob = skops.io.dumps(example.estimator)
        untrusted = skops.io.get_untrusted_types(data=blob)
        assert all(pickles.is_allowed(*name.rsplit(".", 1)) for name in untrusted), (label, untrusted)
        same(example.estimator, skops.io.loads(blob, trusted=untrusted), f"{label} (skops)")
        files += 1
        tested.add(example.name)
    assert tested == {name for name, _ in sklearn_zoo.convertible()}
    assert len(tested) == pickle_allowlist.ESTIMATORS and len(tested) > 100, len(tested)  # 139 with sklearn 1.9
    print(f"{len(tested)} estimators, {files} pickle/joblib/skops files, "
          f"allow-list of {len(pickle_allowlist.ALLOWED)} pairs")


@pytest.mark.slow
@pytest.mark.cpu  # its own processes (the sandbox) only: beside others in the parallel run
def test_committed_allowlist_is_what_the_generator_writes():
    out = subprocess.run([sys.executable, "-W", "ignore", str(ROOT / "scripts" / "pickle_allowlist.py"), "--check"],
                         capture_output=True, text=True, timeout=900, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'client'}"})
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]


def test_allowlist_is_pairs_that_touch_no_file_and_run_no_code():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import pickle_allowlist as generator
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert all(isinstance(m, str) and isinstance(n, str) and "." not in n for m, n in pickle_allowlist.ALLOWED)
    refused = {pair: why for pair in pickle_allowlist.ALLOWED if (why := generator.forbidden(*pair))}
    assert refused == {}
    for pair in [("numpy", "memmap"), ("numpy", "load"), ("numpy", "fromfile"), ("builtins", "open"),
                 ("builtins", "eval"), ("builtins", "exec"), ("builtins", "getattr"), ("os", "system"),
                 ("posix", "system"), ("subprocess", "Popen"), ("numpy.lib.npyio", "NpzFile"), ("builtins", "int")]:
        assert not pickles.is_allowed(*pair), pair
        assert generator.forbidden(*pair) or pair == ("builtins", "int"), pair


# --- hostile pickles ----------------------------------------------------------------------------------


class Call:
    """Pickles as ``func(*args)``: the way an attacker writes a REDUCE."""

    def __init__(self, func, *args) -> None:
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args

    def __call__(self):  # pickle wants a callable where a Call stands for the function
        raise AssertionError


def raw_global(module: str, name: str, protocol: int = 4) -> bytes:
    """A pickle that only looks up ``module.name`` (STACK_GLOBAL, dotted names allowed in protocol 4)."""
    def text(value: str) -> bytes:
        data = value.encode()
        return b"\x8c" + bytes([len(data)]) + data

    return bytes([0x80, protocol]) + text(module) + text(name) + b"\x93."


def hostile(directory: Path, secret: Path, marker: Path) -> dict[str, Path]:
    """Files that would read ``secret``, create ``marker`` or reach attributes, one per trick."""
    import joblib
    import numpy._core.multiarray as multiarray

    class Persistent(pickle.Pickler):
        def persistent_id(self, obj):
            return "file:" + str(secret) if obj == "x" else None

    def persistent() -> bytes:
        import io

        buffer = io.BytesIO()
        Persistent(buffer).dump({"model": "x"})
        return buffer.getvalue()

    path = str(secret)
    payloads = {
        "memmap_read": Call(int, Call(bytearray, Call(np.memmap, path, "uint8", "r"))),
        "fromfile": Call(np.fromfile, path, np.uint8),
        "numpy_load": Call(np.load, path),
        "os_system": Call(os.system, f"touch {marker}"),
        "subprocess": Call(subprocess.check_output, ["cat", path]),
        "builtins_eval": Call(eval, f"open({path!r}).read()"),
        "builtins_open": Call(open, path),
        "getattr_chain": Call(getattr, Call(getattr, np.random.RandomState, "__init__"), "__globals__"),
        "reconstructor_memmap": Call(copyreg._reconstructor, np.memmap, np.ndarray, None),
        "numpy_reconstruct_memmap": Call(multiarray._reconstruct, np.memmap, (0,), b"b"),
        "partial_eval": Call(functools.partial(eval, "1"), ),
    }
    files = {}
    for name, payload in payloads.items():
        files[name] = directory / f"{name}.pkl"
        files[name].write_bytes(pickle.dumps({"model": payload}, protocol=4))
    files["dotted_attribute"] = directory / "dotted_attribute.pkl"
    files["dotted_attribute"].write_bytes(raw_global("numpy.random._pickle", "__bit_generator_ctor.__globals__"))
    files["ufunc_import_by_name"] = directory / "ufunc_import_by_name.pkl"
    files["ufunc_import_by_name"].write_bytes(b"\x80\x02cnumpy.core\n_ufunc_reconstruct\nX\x02\x00\x00\x00osX\x06"
                                              b"\x00\x00\x00system\x86R.")
    files["persistent_id"] = directory / "persistent_id.pkl"
    files["persistent_id"].write_bytes(persistent())
    # joblib writes object arrays as nested pickles after the first; the opcode walk does not reach them
    files["joblib_object_array"] = directory / "joblib_object_array.joblib"
    joblib.dump({"model": np.array([Call(os.system, f"touch {marker}")], dtype=object)},
                files["joblib_object_array"])
    files["joblib_compressed_memmap"] = directory / "joblib_compressed_memmap.joblib"
    joblib.dump({"model": payloads["memmap_read"]}, files["joblib_compressed_memmap"], compress=3)
    return files


@pytest.fixture
def secret(tmp_path) -> tuple[Path, str]:
    text = f"root:$6$SECRET-{uuid.uuid4().hex}:19000:0:99999:7:::"
    path = tmp_path / "shadow"
    path.write_text(text)
    return path, text


def test_hostile_pickles_are_refused_and_never_show_what_they_would_read(tmp_path, secret):
    path, text = secret
    marker = tmp_path / "payload-ran"
    (tmp_path / "files").mkdir()
    files = hostile(tmp_path / "files", path, marker)
    assert len(files) == 16
    for name, file in files.items():
        report = pickles.scan(file)
        with pytest.raises(ConversionError) as caught:
            pickles.refuse_if_unsafe(report, file.name)
            pickles.restricted_load(file)  # the second guard, for what the walk cannot see
        error = caught.value
        assert error.code == "unsafe_pickle", (name, error.code, error.detail)
        assert text not in error.detail and "SECRET" not in error.detail, name
        with pytest.raises(ConversionError) as caught:  # the restricted unpickler alone refuses it too
            pickles.restricted_load(file)
        assert caught.value.code == "unsafe_pickle", (name, caught.value.detail)
        assert "SECRET" not in caught.value.detail
    assert not marker.exists()


@pytest.mark.slow
@pytest.mark.cpu  # its own processes (the sandbox) only: beside others in the parallel run
def test_hostile_pickles_are_refused_in_the_sandbox(tmp_path, secret):
    path, text = secret
    marker = tmp_path / "payload-ran"
    (tmp_path / "files").mkdir()
    for name, file in hostile(tmp_path / "files", path, marker).items():
        with pytest.raises(ConversionError) as caught:
            convert_file(file, tmp_path / "out.onnx")
        assert caught.value.code == "unsafe_pickle", (name, caught.value.code, caught.value.detail)
        assert "SECRET" not in caught.value.detail, name
        assert not (tmp_path / "out.onnx").exists()
    assert not marker.exists()


@pytest.mark.slow
@pytest.mark.cpu  # its own processes (the sandbox) only: beside others in the parallel run
def test_an_unpickling_error_shows_a_fixed_message_not_the_exception_text(tmp_path):
    """numpy.dtype is allowed; its error would repeat the argument, which a crafted file controls."""
    planted = f"root:$6$SECRET-{uuid.uuid4().hex}"
    file = tmp_path / "model.pkl"
    file.write_bytes(pickle.dumps({"model": Call(np.dtype, planted)}, protocol=2))
    assert pickles.scan(file).unsafe == []
    with pytest.raises(ConversionError) as caught:
        pickles.restricted_load(file)
    assert caught.value.code == "corrupt_file" and planted not in caught.value.detail
    assert planted in str(caught.value.cause)  # kept for the log
    with pytest.raises(ConversionError) as caught:
        convert_file(file, tmp_path / "out.onnx")
    assert caught.value.code == "corrupt_file" and "SECRET" not in caught.value.detail
    assert "model.pkl" in caught.value.detail


def test_allowed_functions_given_a_file_path_do_not_read_it(tmp_path, secret):
    """Reviewed functions are allowed; handed a path they treat it as a string, never as a file."""
    from sklearn.utils.validation import check_array

    path, text = secret
    for payload in (Call(check_array, str(path)), Call(functools.partial(check_array, str(path))),
                    Call(np.dtype, str(path))):
        file = tmp_path / "model.pkl"
        file.write_bytes(pickle.dumps({"model": payload}, protocol=4))
        assert pickles.scan(file).unsafe == []
        with pytest.raises(ConversionError) as caught:
            pickles.restricted_load(file)
        assert caught.value.code == "corrupt_file" and "SECRET" not in caught.value.detail
        assert "SECRET" not in str(caught.value.cause)  # the file was not read at all


@pytest.mark.slow
@pytest.mark.cpu  # its own processes (the sandbox) only: beside others in the parallel run
def test_gradient_boosting_pickle_converts(tmp_path):
    """Issue 21: a plain GradientBoostingClassifier pickle names __pyx_unpickle_SeedSequence."""
    from sklearn.ensemble import GradientBoostingClassifier

    rng = np.random.default_rng(1)
    features = rng.normal(size=(80, 5))
    unseeded = np.random.RandomState()  # what random_state=None gives in a fresh process
    model = GradientBoostingClassifier(n_estimators=10, random_state=unseeded).fit(features, features[:, 0] > 0)
    (tmp_path / "gbc.pkl").write_bytes(pickle.dumps(model))
    assert "numpy.random.bit_generator.__pyx_unpickle_SeedSequence" in pickles.scan(tmp_path / "gbc.pkl").globals
    report = convert_file(tmp_path / "gbc.pkl", tmp_path / "gbc.onnx")
    assert report["verification"]["passed"] is True and report["pickle_scan"]["safe"] is True

"""Files a local conversion or optimisation writes into the user's folder belong to the user who ran it: run
as root, the sandboxed child drops to nobody, and what it wrote used to arrive owned by nobody:nogroup."""

from __future__ import annotations

import os
import shutil

import pytest
from hpcfair import modelAPI

from tests.gateway.models import add_two

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not (shutil.which("bwrap") and shutil.which("setpriv")),
                                reason="only a root caller's sandbox runs as another user")


def owners(paths) -> set[tuple[int, int]]:
    return {(os.stat(path).st_uid, os.stat(path).st_gid) for path in paths}


@pytest.mark.slow
@pytest.mark.cpu  # converts in the sandbox: over 1 s on a quiet machine
def test_a_local_conversion_leaves_files_owned_by_the_caller(tmp_path):
    (tmp_path / "ckpt").mkdir()
    for name in ("encoder", "decoder"):
        (tmp_path / "ckpt" / f"{name}.onnx").write_bytes(add_two(4))
    out = tmp_path / "out"
    out.mkdir()
    reports = modelAPI("http://127.0.0.1:9").conversion({
        "general_args": {"task": "conversion"},
        "model_args": {"model_name": ["encoder", "decoder"],
                       "model_file": [str(tmp_path / "ckpt" / f"{name}.onnx") for name in ("encoder", "decoder")]},
        "out_args": {"export_file": [str(out / "encoder.onnx"), str(out / "decoder.onnx")]}})
    assert [r["verified"] for r in reports] == [True, True]
    assert all(r["verification"] and r["where"] == "local" for r in reports)
    assert owners([out / "encoder.onnx", out / "decoder.onnx"]) == {(os.geteuid(), os.getegid())}


def test_a_local_optimisation_leaves_files_owned_by_the_caller(tmp_path):
    (tmp_path / "model.onnx").write_bytes(add_two(4))
    [report] = modelAPI("http://127.0.0.1:9").optimize({
        "general_args": {"task": "optimize"}, "model_args": {"model_file": str(tmp_path / "model.onnx")},
        "out_args": {"export_file": str(tmp_path / "opt" / "model.optimized.onnx")}})
    assert report["report"]["sandbox"]["user"] == "nobody (uid 65534)"  # the child ran as another user
    assert report["files"] and owners(report["files"]) == {(os.geteuid(), os.getegid())}

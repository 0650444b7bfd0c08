"""Model conversion to ONNX and its verification, shared by the hub's workers and local users.

``convert_file`` runs the conversion in a sandboxed subprocess (see ``sandbox``); nothing here loads
an untrusted file in the calling process. Framework libraries are imported lazily, in the child.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hpcfair.convert import families
from hpcfair.convert.errors import ConversionError
from hpcfair.convert.formats import SNIFFED_SUFFIXES, detect, looks_like_model
from hpcfair.convert.sandbox import Limits

__all__ = ["ConversionError", "Limits", "convert_file", "detect", "looks_like_model", "report_notes"]


def report_notes(report: dict[str, Any]) -> list[str]:
    """What the user must know beyond "verified": an opset other than the one asked for, axes that are
    fixed at their exported size."""
    found = [report[key] for key in ("opset_note", "tolerance_note", "experts") if report.get(key)]
    if report.get("data_files"):
        found.append(f"the weights are kept beside the ONNX file in {', '.join(report['data_files'])} (ONNX "
                     "external data)")
    if report.get("fixed_axes"):
        axes = ", ".join(f"{name}[{axis}]={size}" for name, sizes in report["fixed_axes"].items()
                         for axis, size in sizes.items())
        found.append(f"axes fixed at their exported size (the model fails or differs at another size): {axes}")
    if report.get("coupled_axes"):
        found.append("axes checked at another size with the integer inputs kept below it, because the model "
                     f"refused them otherwise (they index it): {', '.join(report['coupled_axes'])}")
    return found


def convert_file(source: str | Path, output: str | Path, *, opset: int = 17, inputs: list | None = None,
                 sample_inputs: str | Path | None = None, atol: float = 1e-4, rtol: float = 1e-3,
                 limits: Limits | None = None, memory_mb: int | None = None, hide: list[Path] = (),
                 task: str | None = None, on_line=None, external_data_mb: float | None = None) -> dict[str, Any]:
    """Convert one model file to a verified ONNX file in a sandbox; returns the conversion report.

    The sandbox's memory limit is ``memory_mb``, else ``limits.memory_mb``, else one that follows the
    model's size and this machine's memory (``sandbox.memory_for``). ``task`` (feature-extraction,
    text-classification, ...) picks a Hugging Face folder's head; files the runtime needs beside the ONNX
    file (a tokenizer) are written beside ``output`` and listed in the report's ``kept_files``; weights past
    ``external_data_mb`` (default ``HPCFAIR_EXTERNAL_DATA_MB``, 1024) go into data files beside it, listed in
    ``data_files``.
    The file's format comes from its name, or from its content where the name does not say
    (``encoder.ckpt``); the child sees it under a name with the right suffix."""
    from hpcfair import external_data
    from hpcfair.convert import sandbox

    source, output = Path(source), Path(output)
    limits = dataclasses.replace(limits or Limits())
    limits.memory_mb = memory_mb or limits.memory_mb or sandbox.memory_for(sandbox.model_bytes(source))
    workdir = Path(tempfile.mkdtemp(prefix="hpcfair-convert-"))
    try:
        local = workdir / source.name
        if source.is_file() and source.suffix.lower() in SNIFFED_SUFFIXES:  # e.g. model.ckpt: name it as it is
            local = workdir / (source.stem + families.named(detect(source), source.suffix))
        (shutil.copytree if source.is_dir() else shutil.copyfile)(source, local)
        _copy_data_files(source, workdir)
        request: dict[str, Any] = {"task": "convert", "source": local.name, "output": "model.onnx", "opset": opset,
                                   "inputs": inputs, "atol": atol, "rtol": rtol, "model_task": task,
                                   "external_data_mb": external_data_mb if external_data_mb is not None
                                   else external_data.threshold() / 2**20}
        if sample_inputs:
            sample = Path(sample_inputs)
            (workdir / "samples").mkdir()  # under its own name, which the messages use
            shutil.copyfile(sample, workdir / "samples" / sample.name)
            request["sample_inputs"] = f"samples/{sample.name}"
        try:
            result = sandbox.run(request, workdir, limits, hide=hide, on_line=on_line)
        except ConversionError as exc:  # every message names the file it is about
            if source.name not in exc.detail:
                exc.detail = f"{source.name}: {exc.detail}"
                exc.args = (exc.detail,)
            raise
        sandbox.place(workdir, "model.onnx", output)
        for name in [*result.get("data_files", []), *result.get("kept_files", [])]:
            folder = "" if name in result.get("data_files", []) else "keep/"
            sandbox.place(workdir, f"{folder}{name}", output.parent / name)
        return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _copy_data_files(source: Path, workdir: Path) -> None:
    """An ONNX file's weights in data files beside it (ONNX external data) go with it into the work folder;
    a location that leaves the file's folder is left for the child to refuse."""
    if not source.is_file() or source.suffix.lower() != ".onnx":
        return
    import onnx

    from hpcfair import external_data

    try:
        names = external_data.locations(onnx.load(str(source), load_external_data=False))
    except Exception:  # noqa: BLE001 - an unreadable file is the child's to report
        return
    for name in names:
        normal = external_data.safe_location(name)
        if normal and (source.parent / normal).is_file() and not (source.parent / normal).is_symlink():
            (workdir / normal).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source.parent / normal, workdir / normal)

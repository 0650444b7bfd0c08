"""``modelAPI``'s conversion and optimisation: local files in the sandbox on this machine
(``hpcfair.convert``), hub models (and local files with ``general_args.upload``) by the hub's workers."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hpcfair import _registry, _sources
from hpcfair._sources import ModelSource
from hpcfair.client import HubClient
from hpcfair.config import Config
from hpcfair.errors import HubError
from hpcfair.progress import stage_printer


def convert(client: HubClient, config: Config) -> list[dict[str, Any]]:
    """``modelAPI.conversion``: each model converted here or on the hub, one report each."""
    sources = _sources.sources(config)
    exports = _sources.exports(config, sources, ".onnx")
    backends = _sources.backends(config, sources)
    config.check_models_named([source.name for source in sources])
    options = [config.conversion_options(index, source.name) for index, source in enumerate(sources)]  # all checked
    files = _sources.onnx_files(config, sources)
    reports = []
    for index, (source, export, backend) in enumerate(zip(sources, exports, backends, strict=True)):
        if source.local and not config.args.general_args.upload:
            reports.append(convert_here(config, source, export, backend, index, options[index]))
        else:
            reports.append(convert_on_hub(client, config, source, export, options[index], files[index]))
    return reports


def convert_here(config: Config, source: ModelSource, export: Path, backend: str | None,
                 index: int = 0, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """A local file converted in the sandbox on this machine (the ``index``-th model of the config)."""
    from hpcfair.convert import ConversionError, convert_file, detect, report_notes
    from hpcfair.convert.formats import check_backend

    options = options if options is not None else config.conversion_options(index, source.name)
    try:
        fmt = detect(source.local)
        check_backend(fmt, backend, source.local.name)
        report = convert_file(source.local, export, **options, on_line=stage_printer(source.name))
    except ConversionError as exc:
        hint = (" Install the frameworks with: pip install 'hpcfair[convert]'."
                if "No module named" in exc.detail else "")
        raise HubError(f"{source.key} ({source.local.name}): {exc.detail}{hint}", code=exc.code)
    check = report["verification"]
    return {"model": source.name, "source": str(source.local), "format": fmt, "export_file": str(export),
            "where": "local", "opset": report["opset"].get("ai.onnx"), "verified": check["passed"],
            "max_abs_diff": check["max_abs_diff"], "verification": check, "notes": report_notes(report)}


def convert_on_hub(client: HubClient, config: Config, source: ModelSource, export: Path,
                   options: dict[str, Any] | None = None, file: str | None = None) -> dict[str, Any]:
    """A hub model (or a local file or folder published first, with the config's declared inputs and sample
    data) converted by the hub, its ONNX file (``file`` of several) fetched."""
    task = config.task
    options = options or {}
    info = _registry.hub_version(client, config, source, private=task.visibility != "public", metadata=task.metadata,
                                 inputs=options.get("inputs"), sample=options.get("sample_inputs"))
    onnx = _registry.onnx_version(client, info, task.onnx_version)
    _registry.export(client, _registry.onnx_item(onnx, file), export)
    meta = onnx.get("metadata") or {}
    checks = list((meta.get("verification") or {}).values())
    report = {"model": source.name, "source": source.ref or str(source.local), "export_file": str(export),
              "where": "hub", "pid": onnx["pid"], "source_pid": info["pid"], "opset": meta.get("opset"),
              "verified": meta.get("verified"),
              "max_abs_diff": max((c.get("max_abs_diff") or 0 for c in checks), default=None)}
    if onnx["pid"] == info["pid"]:  # uploaded as ONNX: nothing to compare with; the hub's verify job checks it
        if (checked := uploaded_onnx_checked(client, info["pid"])) is not None:
            report.update(verified=checked, checked_only=True)
    return report


def uploaded_onnx_checked(client: HubClient, pid: str) -> bool | None:
    """Whether the hub's ``verify`` job on an uploaded ONNX version (checker, shape inference, a run in ONNX
    Runtime) passed, waiting for it; None when the hub ran none (an older hub)."""
    jobs = _registry.jobs_on(client, "verify", pid)
    if not jobs:
        return None
    done = client.wait(jobs[0], raise_on_failure=False)  # newest first
    return (done.get("result") or {}).get("verified") if done["state"] == "succeeded" else False


def gguf(client: HubClient, ref: str, gguf_type: str = "q8_0", dest: Path | None = None) -> dict[str, Any]:
    """A hub language model converted to one GGUF file on the hub (llama.cpp's own tools, its greedy tokens
    checked through llama-server against transformers), fetched into ``dest`` when given."""
    done = client.wait(client.convert(ref, to="gguf", gguf_type=gguf_type))
    made = client.resolve(done["result"]["pid"])
    files = client.download(made["pid"], dest) if dest is not None else []
    return {"model": ref, "where": "hub", "pid": made["pid"], "version": f"{made['artifact']}@{made['version']}",
            "verified": (made.get("metadata") or {}).get("verified"), "files": [str(path) for path in files],
            "report": (made.get("metadata") or {}).get("gguf_build")}


def optimize(client: HubClient, config: Config) -> list[dict[str, Any]]:
    """``modelAPI.optimize``: each ONNX model optimised here or on the hub, one report each; with ``precision``
    (int8, int4) a language model's generation build at that precision, made on the hub and downloaded into
    ``<model>-<precision>/`` beside the export file."""
    sources = _sources.sources(config)
    exports = _sources.exports(config, sources, ".optimized.onnx")
    files = _sources.onnx_files(config, sources)
    reports = []
    precision = config.task.precision  # a language model's smaller generation build: made on the hub only
    for source, export, file in zip(sources, exports, files, strict=True):
        if source.local and not config.args.general_args.upload and not precision:
            reports.append(optimize_here(config, source, export.parent))
            continue
        info = _registry.hub_version(client, config, source, private=True)
        if not precision:
            info = _registry.onnx_version(client, info, None)
        done = client.wait(client.optimize(info["pid"], file=file or "", quantize=config.task.quantize,
                                           precision=precision))
        derived = client.resolve(done["result"]["pid"])
        files = client.download(derived["pid"], export.parent / f"{source.name}-{precision}" if precision
                                else export.parent)
        meta = derived.get("metadata") or {}
        report = meta.get("generation") if precision else meta.get("optimization")
        reports.append({"model": source.name, "where": "hub", "pid": derived["pid"],
                        "files": [str(p) for p in files], "report": report})
    return reports


def optimize_here(config: Config, source: ModelSource, folder: Path) -> dict[str, Any]:
    """A local ONNX file optimised in the sandbox on this machine."""
    from hpcfair.convert import ConversionError, sandbox

    if source.local.suffix.lower() != ".onnx":
        raise config.error(source.key, "optimize works on ONNX files; convert the model first (task: conversion)")
    workdir = Path(tempfile.mkdtemp(prefix="hpcfair-optimize-"))
    try:
        shutil.copyfile(source.local, workdir / source.local.name)
        try:
            report = sandbox.run({"task": "optimize", "source": source.local.name, "output_dir": "out",
                                  "quantize": config.task.quantize}, workdir)
        except ConversionError as exc:
            raise HubError(f"{source.key}: {exc.detail}", code=exc.code)
        folder.mkdir(parents=True, exist_ok=True)
        files = [str(sandbox.place(workdir, f"out/{name}", folder / name)) for name in report.get("variants", {})]
        report.pop("ok", None)
        return {"model": source.name, "where": "local", "files": files, "report": report}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

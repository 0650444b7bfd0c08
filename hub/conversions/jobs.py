"""Conversion, verification and optimisation jobs (kinds ``convert``, ``verify``, ``optimize``). The model files are
copied out of the object store into a private directory and handled by ``hpcfair.convert`` in a sandboxed
subprocess; this process never loads them. Results are published as a new version linked by provenance to its
source."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from hpcfair.compute.sandboxed import convert_plan, run_request
from hpcfair.convert import report_notes, sandbox

from hub.errors import HubError
from hub.jobs.files import fetch, fetch_data_files, fetch_model, source_cards, staged
from hub.jobs.kinds import JobKind, Plan, register
from hub.jobs.runner import JobContext
from hub.jobs.toolkit import (
    SOURCE_ONLY,
    existing_result,
    free_label,
    hidden_paths,
    limits,
    node_result,
    sandbox_plan,
    source_of,
)
from hub.registry.models import ProvenanceLink, Version
from hub.registry.services import ProvenanceRef, create_version
from hub.registry.uploads import StagedFile


def conversion_plan(ctx: JobContext, source: Version, workdir: Path) -> dict[str, Any]:
    """The files of a conversion copied into ``workdir`` (paths relative to it) and ``convert_file``'s options:
    what this worker, or a Slurm node, converts."""
    params = ctx.job.params
    sample = fetch(source, params["sample_inputs"], workdir) if params.get("sample_inputs") else None
    (workdir / "in").mkdir(exist_ok=True)
    files = []
    for index, path in enumerate(params["files"]):
        local, onnx_name = fetch_model(source, path, workdir / "in" / str(index))
        folder = path.rpartition("/")[0]
        label = (f"{folder}/" if folder else "the Hugging Face folder") if local.is_dir() else path
        files.append({"path": path, "label": label, "local": str(local.relative_to(workdir)), "onnx": onnx_name,
                      "out": f"out/{onnx_name}"})
    options = {"opset": params.get("opset", 17), "atol": params.get("atol", 1e-4), "rtol": params.get("rtol", 1e-3),
               "inputs": source.metadata.get("inputs") if len(params["files"]) == 1 else None,
               "memory_mb": min(params["memory_mb"], sandbox.memory_ceiling_mb()) if params.get("memory_mb") else None,
               "task": source.metadata.get("task"), "external_data_mb": settings.HUB_ONNX_EXTERNAL_DATA_MB}
    return {"files": files, "options": options, "sample": sample.name if sample else None}


def publish_conversion(ctx: JobContext, source: Version, workdir: Path, plan: dict[str, Any],
                       reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Log the verification of each file ``convert_file`` wrote under ``workdir``; publish the ONNX version (or,
    for a verification, only queue the cube)."""
    outputs: list[StagedFile] = []
    for item in plan["files"]:
        report = reports[item["onnx"]]
        ctx.log(f"{item['path']}: {sandbox.describe(report['sandbox'])}")
        for note in report_notes(report):
            ctx.log(f"{item['path']}: {note}", "warning")
        check = report["verification"]
        ctx.log(f"{item['path']}: {'verified' if check['passed'] else 'NOT verified'}, max abs difference "
                f"{check['max_abs_diff']:.3g} (atol {check['atol']}, rtol {check['rtol']})",
                "info" if check["passed"] else "warning")
        outputs.append(staged(workdir / item["out"], item["onnx"]))
        folder = item["onnx"].rpartition("/")[0]  # a tokenizer and config kept beside the ONNX file
        outputs += [staged((workdir / item["out"]).parent / kept, f"{folder}/{kept}".lstrip("/"))
                    for kept in [*report.get("data_files", []), *report.get("kept_files", [])]]
    verified = all(r["verification"]["passed"] for r in reports.values())
    if ctx.job.kind == "verify":
        _queue_cube(ctx, source, verified)
        return {"verified": verified, "files": reports}
    outputs += source_cards(source, workdir, {output.path for output in outputs})
    published = _publish_conversion(ctx, source, outputs, reports, verified)
    _queue_cube(ctx, published, verified)
    return {"version": published.label, "pid": published.pid, "verified": verified,
            "files": {name: {"verification": r["verification"], "source": r["source"]}
                      for name, r in reports.items()}}


def _reporter(ctx: JobContext, path: str, index: int, count: int):
    """The child's lines into the job log; its stages also move the job's progress within this file's share
    (the last share is publishing)."""
    def report(line: str) -> None:
        ctx.log(f"{path}: {line}")
        stage = sandbox.parse_stage(line)
        if stage is not None:
            ctx.progress((index + stage[0]) / (count + 1))
    return report


def _queue_cube(ctx: JobContext, version: Version, verified: bool) -> None:
    from hub.containers.services import on_onnx_verified

    try:
        job = on_onnx_verified(version, ctx.job.requester, verified)
    except HubError as exc:
        ctx.log(f"no MLCube: {exc.message}", "warning")
        return
    if job is not None:
        ctx.log(f"MLCube job {job.pk} queued")


def _publish_conversion(ctx, source: Version, outputs: list[StagedFile], reports: dict, verified: bool) -> Version:
    metadata = {key: value for key, value in source.metadata.items() if key not in SOURCE_ONLY}
    first = next(iter(reports.values()))
    metadata.update({
        "framework": "onnx",
        "format": "onnx",
        "opset": first["opset"].get("ai.onnx"),
        "verified": verified,
        "job": str(ctx.job.pk),
        "conversion": {name: {key: r[key] for key in ("source", "source_format", "framework", "converter",
                                                       "libraries", "opset", "ir_version", "parameters", "sandbox",
                                                       "opset_requested", "opset_note", "fixed_axes", "coupled_axes",
                                                       "data_files", "dtype", "tolerance_note", "peak_memory_mb",
                                                       "task", "hf_class", "head_outputs", "experts")
                              if key in r} | ({"pickle_scan": r["pickle_scan"]} if "pickle_scan" in r else {})
                       for name, r in reports.items()},
        "verification": {name: r["verification"] for name, r in reports.items()},
    })
    if len(reports) == 1:
        metadata.update({"inputs": first["inputs"], "outputs": first["outputs"], "parameters": first["parameters"]})
    else:  # an ensemble: one signature per member
        metadata["members"] = {name: {"inputs": r["inputs"], "outputs": r["outputs"], "parameters": r["parameters"]}
                               for name, r in reports.items()}
    return _publish(ctx, source, outputs, metadata, "onnx", ProvenanceLink.Relation.CONVERTED_FROM)


def _publish(ctx, source: Version, files: list[StagedFile], metadata: dict, suffix: str, relation: str) -> Version:
    label = free_label(source.artifact, f"{source.label}-{suffix}"[:60])
    version = create_version(source.artifact, ctx.job.requester, files=files, label=label, metadata=metadata,
                             provenance=[ProvenanceRef(relation, source)], system=True, duplicates="artifact")
    ctx.log(f"published {version} ({version.pid})")
    return version


def optimize_request(ctx: JobContext, source: Version, workdir: Path) -> dict[str, Any]:
    """The sandboxed child's request for an optimisation, its file copied into ``workdir``."""
    local = fetch(source, ctx.job.params["file"], workdir)
    fetch_data_files(source, ctx.job.params["file"], local)  # its weights, when they live beside it
    return {"task": "optimize", "source": local.name, "output_dir": "out",
            "quantize": ctx.job.params.get("quantize", True)}


def publish_optimized(ctx: JobContext, source: Version, workdir: Path, report: dict[str, Any]) -> dict[str, Any]:
    """Publish the variants the child wrote under ``workdir/out`` (on this worker, or a Slurm node's)."""
    ctx.log(sandbox.describe(report["sandbox"]))
    names = [*report["variants"], *(data for variant in report["variants"].values()
                                    for data in variant.get("data_files", []))]
    files = [staged(sandbox.output_file(workdir, f"out/{name}"), name) for name in names]
    for name, variant in report["variants"].items():
        ctx.log(f"{name}: {variant['size_ratio']:.0%} of the size, {variant['speedup']:.2f}x speed, "
                f"max abs difference {variant['max_abs_diff']:.3g}")
    metadata = {key: value for key, value in source.metadata.items() if key not in {"verification", "conversion"}}
    metadata.update({"job": str(ctx.job.pk), "optimization": {k: v for k, v in report.items() if k != "ok"}})
    version = _publish(ctx, source, files, metadata, "opt", ProvenanceLink.Relation.DERIVED_FROM)
    return {"version": version.label, "pid": version.pid, "optimization": metadata["optimization"]}


@register
class ConvertJob(JobKind):
    """Convert each selected file of a version to ONNX in the conversion sandbox, verify it numerically against
    the original and publish the ONNX version (then queue its cube)."""

    name = "convert"
    label = "conversion to ONNX"
    queue = "convert"
    verb = "converting"

    def done_already(self, ctx: JobContext, source: Version) -> Version | None:
        return existing_result(ctx, source, ProvenanceLink.Relation.CONVERTED_FROM)

    def run(self, ctx: JobContext) -> dict[str, Any]:
        source = source_of(ctx)
        if done := self.done_already(ctx, source):
            ctx.log(f"already published as {done}")
            return {"version": done.label, "pid": done.pid, "verified": done.metadata.get("verified")}
        workdir = Path(tempfile.mkdtemp(prefix="hpcfair-job-"))
        try:
            plan = conversion_plan(ctx, source, workdir)

            def on_line(path: str, index: int):
                ctx.log(f"{path}: {self.verb} in a sandbox")
                return _reporter(ctx, path, index, len(plan["files"]))

            reports = convert_plan(workdir, plan, limits(), hidden_paths(), on_line,
                                   lambda done, count: ctx.progress(done / (count + 1)))
            return publish_conversion(ctx, source, workdir, plan, reports)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def stage(self, job, folder: Path) -> Plan | None:
        ctx = JobContext(job)
        source = source_of(ctx)
        if self.done_already(ctx, source):
            return None  # a retried job that published already: run() answers at once
        (folder / "work").mkdir()
        plan = conversion_plan(ctx, source, folder / "work")
        return sandbox_plan("convert", f"{self.label} of {source}: {', '.join(f['path'] for f in plan['files'])}",
                            plan=plan)

    def publish(self, job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        import json

        ctx = JobContext(job)
        plan = json.loads((folder / "job.json").read_text())["plan"]
        return publish_conversion(ctx, source_of(ctx), folder / "work", plan, node_result(folder)["reports"])


@register
class VerifyJob(ConvertJob):
    """Validate uploaded ONNX files (checker, shape inference, a run in ONNX Runtime) in the sandbox."""

    name = "verify"
    label = "verification"
    verb = "verifying"

    def done_already(self, ctx: JobContext, source: Version) -> Version | None:
        return None  # a verification publishes nothing new: it always runs


@register
class OptimizeJob(JobKind):
    """ONNX Runtime graph optimisation and int8 quantisation in the sandbox, published as one derived
    version."""

    name = "optimize"
    label = "optimisation"
    queue = "convert"

    def run(self, ctx: JobContext) -> dict[str, Any]:
        source = source_of(ctx)
        if done := existing_result(ctx, source, ProvenanceLink.Relation.DERIVED_FROM):
            return {"version": done.label, "pid": done.pid}
        workdir = Path(tempfile.mkdtemp(prefix="hpcfair-job-"))
        try:
            request = optimize_request(ctx, source, workdir)
            ctx.log(f"{ctx.job.params['file']}: optimising in a sandbox")
            report = run_request(request, workdir, limits(), hidden_paths(), ctx.log)
            return publish_optimized(ctx, source, workdir, report)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def stage(self, job, folder: Path) -> Plan | None:
        ctx = JobContext(job)
        source = source_of(ctx)
        if existing_result(ctx, source, ProvenanceLink.Relation.DERIVED_FROM):
            return None  # a retried job that published already: run() answers at once
        (folder / "work").mkdir()
        request = optimize_request(ctx, source, folder / "work")
        return sandbox_plan("sandbox", f"optimise {source} {job.params['file']}", request=request)

    def publish(self, job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        ctx = JobContext(job)
        return publish_optimized(ctx, source_of(ctx), folder / "work", node_result(folder)["report"])

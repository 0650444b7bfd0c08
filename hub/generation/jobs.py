"""Generation jobs: ``generation`` builds a causal LM's generation model (onnxruntime-genai's builder and a
check of its greedy tokens against transformers, in the conversion sandbox) and publishes it as a version
derived from its source; ``generate`` runs a file of prompts through it (``hub.generation.batch``)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hpcfair.compute.sandboxed import run_request

from hub.conversions.jobs import (
    _fetch_model,
    existing_result,
    free_label,
    hidden_paths,
    limits,
    node_result,
    sandbox_plan,
    source_of,
)
from hub.generation.services import FORMAT, generation_model
from hub.jobs.files import fetch, staged
from hub.jobs.kinds import JobKind, Plan, register
from hub.jobs.runner import JobContext
from hub.registry.models import ProvenanceLink, Version
from hub.registry.services import ProvenanceRef, create_version

_SOURCE_ONLY = {"framework", "format", "inputs", "outputs", "sample_inputs", "verification", "conversion", "verified",
                "optimization", "opset", "weights", "generation"}


def build_request(ctx: JobContext, source: Version, workdir: Path) -> dict[str, Any]:
    """The sandbox's request for a build, the source folder (and for a smaller copy, the full-precision build to
    compare with) copied into ``workdir``."""
    params = ctx.job.params
    folder = params["folder"]
    local, _ = _fetch_model(source, f"{folder}/config.json".lstrip("/"), workdir / "in")
    request = {"task": "generation_build", "source": str(local.relative_to(workdir)), "output": "out",
               "precision": params.get("precision", "fp32")}
    if request["precision"] != "fp32":
        try:
            full = generation_model(source)
        except Exception:
            full = None
        if full is not None and full.metadata.get("generation", {}).get("precision") == "fp32":
            (workdir / "full").mkdir()
            for file in full.files.all():
                fetch(full, file.path, workdir / "full")
            request["full"] = "full"
    return request


def publish_build(ctx: JobContext, source: Version, workdir: Path, report: dict[str, Any]) -> dict[str, Any]:
    """Publish the built folder under ``workdir/out`` as a version derived from ``source``."""
    check = report["verification"]
    ctx.log(f"built {report['family']} ({report['precision']}) in {report['build_seconds']} s, "
            f"{report['size_bytes'] / 2**20:.1f} MiB; {'verified' if check['passed'] else 'NOT verified'}: "
            f"{check['method']}", "info" if check["passed"] else "warning")
    if "comparison" in report:
        c = report["comparison"]
        ctx.log(f"against fp32: {c['size_ratio']:.0%} of the size, perplexity {c['perplexity']:.3f} vs "
                f"{c['full_perplexity']:.3f}, {c['tokens_per_second']:.1f} vs {c['full_tokens_per_second']:.1f} "
                "tokens/s")
    out = workdir / "out"
    files = [staged(path, path.name) for path in sorted(out.iterdir()) if path.is_file()]
    metadata = {key: value for key, value in source.metadata.items() if key not in _SOURCE_ONLY}
    metadata.update({"framework": "onnx", "format": FORMAT, "task": "text-generation", "job": str(ctx.job.pk),
                     "verified": bool(check["passed"]), "generation": report})
    suffix = "genai" if report["precision"] == "fp32" else f"genai-{report['precision']}"
    label = free_label(source.artifact, f"{source.label}-{suffix}"[:60])
    version = create_version(source.artifact, ctx.job.requester, files=files, label=label, metadata=metadata,
                             provenance=[ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, source)], system=True)
    ctx.log(f"published {version} ({version.pid})")
    return {"version": version.label, "pid": version.pid, "verified": bool(check["passed"]), "generation": report}


@register
class GenerationBuildJob(JobKind):
    """Build the generation model (KV cache, onnxruntime-genai) of a Hugging Face causal LM folder, verify its
    greedy tokens against transformers and publish it."""

    name = "generation"
    label = "generation build"

    def run(self, ctx: JobContext) -> dict[str, Any]:
        source = source_of(ctx)
        if done := existing_result(ctx, source, ProvenanceLink.Relation.DERIVED_FROM):
            return {"version": done.label, "pid": done.pid}
        workdir = Path(tempfile.mkdtemp(prefix="hpcfair-generation-"))
        try:
            request = build_request(ctx, source, workdir)
            ctx.log(f"{ctx.job.params['folder'] or 'the folder'}: building in a sandbox")
            report = run_request(request, workdir, limits(), hidden_paths(), ctx.log)
            return publish_build(ctx, source, workdir, report)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def stage(self, job, folder: Path) -> Plan | None:
        ctx = JobContext(job)
        source = source_of(ctx)
        if existing_result(ctx, source, ProvenanceLink.Relation.DERIVED_FROM):
            return None
        (folder / "work").mkdir()
        request = build_request(ctx, source, folder / "work")
        return sandbox_plan("sandbox", f"{self.label} of {source}", request=request)

    def publish(self, job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        ctx = JobContext(job)
        return publish_build(ctx, source_of(ctx), folder / "work", node_result(folder)["report"])

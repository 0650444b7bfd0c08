"""Generation jobs: ``generation`` builds a language model's generation model (onnxruntime-genai's builder, or
the general route's export with past key/values, and a check of its greedy tokens against transformers, in the
conversion sandbox) and publishes it as a version derived from its source; ``gguf`` converts the folder to a GGUF
file for llama.cpp (``hpcfair.generate.gguf_build``, checked the same way through llama-server) and publishes it
as a version converted from it; ``generate`` runs a file of prompts through a model (``hub.generation.batch``);
``serve`` runs a model's own OpenAI-compatible server on a node until it is idle (``hub.generation.serving``)."""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.conf import settings
from hpcfair.compute import CodedError
from hpcfair.compute.sandboxed import run_request
from hpcfair.convert import Limits, sandbox

from hub.errors import HubError
from hub.generation import serving
from hub.generation.services import FORMAT, FORMATS, generation_model
from hub.jobs.files import fetch, fetch_model, source_cards, staged
from hub.jobs.kinds import DEVICE, JobKind, Plan, register
from hub.jobs.runner import JobContext
from hub.jobs.toolkit import (
    SOURCE_ONLY,
    existing_result,
    free_label,
    hidden_paths,
    limits,
    node_result,
    results_artifact,
    sandbox_plan,
    source_of,
)
from hub.registry.models import ProvenanceLink, Version
from hub.registry.services import ProvenanceRef, create_version
from hub.registry.uploads import StagedFile

_SOURCE_ONLY = SOURCE_ONLY | {"generation"}  # metadata of the source's files, not of the build
BUILD_MEMORY_PER_MB = 4  # MB of address space per MB of weights, above the sandbox's floor


def build_limits(source: Version, folder: str) -> Limits:
    """A conversion's limits, with time and memory for the model's size: onnxruntime-genai's builder and the
    token check take minutes per GiB of weights on a few cores, and a quantized build holds the fp32 weights,
    their quantized copy and transformers' model (a 702 M Llama's int8 build ran out of 8 GiB of address
    space); ``HUB_CONVERT_MEMORY_MB`` still fixes the limit."""
    size = sum(f.size for f in source.files.all() if f.path.startswith(folder))
    minutes = 10 * max(1.0, size / 2**30)
    base = limits()
    memory = base.memory_mb or min(sandbox.memory_for(0) + BUILD_MEMORY_PER_MB * size // 2**20,
                                   sandbox.memory_ceiling_mb())
    return replace(base, wall_seconds=max(base.wall_seconds, int(minutes * 60)), memory_mb=memory,
                   cpu_seconds=max(base.cpu_seconds, int(minutes * 60 * max(1, base.threads or 1))))


def build_request(ctx: JobContext, source: Version, workdir: Path) -> dict[str, Any]:
    """The sandbox's request for a build, the source folder (and for a smaller copy, the full-precision build to
    compare with) copied into ``workdir``."""
    params = ctx.job.params
    folder = params["folder"]
    local, _ = fetch_model(source, f"{folder}/config.json".lstrip("/"), workdir / "in")
    request = {"task": "generation_build", "source": str(local.relative_to(workdir)), "output": "out",
               "precision": params.get("precision", "fp32")}
    if request["precision"] != "fp32":
        try:
            full = generation_model(source)
        except HubError:  # no full-precision build yet: nothing to compare with
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
    form = report.get("route") if report.get("route") in FORMATS else FORMAT
    task = "text2text-generation" if report.get("kind") == "encoder-decoder" else "text-generation"
    route = "genai" if form == FORMAT else "kv"
    suffix = route if report["precision"] == "fp32" else f"{route}-{report['precision']}"
    version = publish_beside(ctx, source, workdir, files, suffix, ProvenanceLink.Relation.DERIVED_FROM,
                             {"framework": "onnx", "format": form, "task": task, "job": str(ctx.job.pk),
                              "verified": bool(check["passed"]), "generation": report})
    return {"version": version.label, "pid": version.pid, "verified": bool(check["passed"]), "generation": report}


def publish_beside(ctx: JobContext, source: Version, workdir: Path, files: list, suffix: str,
                   relation: str, metadata: dict[str, Any]) -> Version:
    """Publish what a build made of ``source`` as a new version of its artifact (labelled ``<label>-<suffix>``,
    ``relation`` to it, the model's cards beside it, its metadata over the source's): hub-made, so a duplicate
    only within the artifact."""
    files = files + source_cards(source, workdir, {f.path for f in files})  # the model's card holds for its build
    inherited = {key: value for key, value in source.metadata.items() if key not in _SOURCE_ONLY}
    version = create_version(source.artifact, ctx.job.requester, files=files,
                             label=free_label(source.artifact, f"{source.label}-{suffix}"[:60]),
                             metadata={**inherited, **metadata}, provenance=[ProvenanceRef(relation, source)],
                             system=True, duplicates="artifact")
    ctx.log(f"published {version} ({version.pid})")
    return version

@register
class GenerationBuildJob(JobKind):
    """Build the generation model (KV cache; onnxruntime-genai or the general route) of a Hugging Face language
    model folder, verify its greedy tokens against transformers and publish it."""

    name = "generation"
    label = "generation build"
    queue = "convert"
    relation = ProvenanceLink.Relation.DERIVED_FROM  # what the published version is to its source
    verb = "building"

    def request(self, ctx: JobContext, source: Version, workdir: Path) -> dict[str, Any]:
        return build_request(ctx, source, workdir)

    def publish_report(self, ctx: JobContext, source: Version, workdir: Path, report: dict[str, Any]
                       ) -> dict[str, Any]:
        return publish_build(ctx, source, workdir, report)

    def run(self, ctx: JobContext) -> dict[str, Any]:
        source = source_of(ctx)
        if done := existing_result(ctx, source, self.relation):
            return {"version": done.label, "pid": done.pid}
        workdir = Path(tempfile.mkdtemp(prefix=f"hpcfair-{self.name}-"))
        try:
            request = self.request(ctx, source, workdir)
            ctx.log(f"{ctx.job.params['folder'] or 'the folder'}: {self.verb} in a sandbox")
            report = run_request(request, workdir, build_limits(source, ctx.job.params["folder"]), hidden_paths(),
                                 ctx.log)
            return self.publish_report(ctx, source, workdir, report)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def stage(self, job, folder: Path) -> Plan | None:
        ctx = JobContext(job)
        source = source_of(ctx)
        if existing_result(ctx, source, self.relation):
            return None
        (folder / "work").mkdir()
        request = self.request(ctx, source, folder / "work")
        return sandbox_plan("sandbox", f"{self.label} of {source}", build_limits(source, job.params["folder"]),
                            request=request)

    def publish(self, job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        ctx = JobContext(job)
        return self.publish_report(ctx, source_of(ctx), folder / "work", node_result(folder)["report"])


# --- a GGUF file for llama.cpp (kind gguf) -----------------------------------------------------------------


def gguf_request(ctx: JobContext, source: Version, workdir: Path) -> dict[str, Any]:
    """The sandbox's request for a GGUF build: the source folder and llama.cpp's converter copied into
    ``workdir`` (the child sees nothing else of the worker's)."""
    from hpcfair.generate.gguf_build import CONVERTER, stage_converter

    params = ctx.job.params
    local, _ = fetch_model(source, f"{params['folder']}/config.json".lstrip("/"), workdir / "in")
    stage_converter(Path(settings.HUB_LLAMA_CONVERT), workdir / CONVERTER)
    return {"task": "gguf_build", "source": str(local.relative_to(workdir)), "output": "out", "converter": CONVERTER,
            "gguf_type": params["gguf_type"], "server": settings.HUB_LLAMA_SERVER,
            "threads": max(1, settings.HUB_CONVERT_THREADS)}


def publish_gguf(ctx: JobContext, source: Version, workdir: Path, report: dict[str, Any]) -> dict[str, Any]:
    """Publish the GGUF file under ``workdir/out`` as a version converted from ``source`` (its facts read from
    the file as for any GGUF upload: ``hub.metadata.gguf``), served by llama.cpp."""
    check = report["verification"]
    ctx.log(f"built {report['file']} ({report['gguf_type']}, {report['size_bytes'] / 2**20:.1f} MiB) in "
            f"{report['build_seconds']} s; verified: {check['method']}")
    files = [staged(sandbox.output_file(workdir, f"out/{report['file']}"), report["file"])]
    build = {key: value for key, value in report.items() if key not in ("ok", "sandbox")}
    version = publish_beside(ctx, source, workdir, files, f"gguf-{report['gguf_type'].replace('_', '-')}",
                             ProvenanceLink.Relation.CONVERTED_FROM,
                             {"job": str(ctx.job.pk), "verified": True, "task": "text-generation", "gguf_build": build})
    return {"version": version.label, "pid": version.pid, "verified": True, "gguf_build": build}


@register
class GGUFBuildJob(GenerationBuildJob):
    """Convert a Hugging Face causal LM folder to a GGUF file with llama.cpp's own tools, check its greedy tokens
    through llama-server against transformers and publish it (``converted_from`` its source)."""

    name = "gguf"
    label = "GGUF build"
    relation = ProvenanceLink.Relation.CONVERTED_FROM
    verb = "converting to GGUF"

    def request(self, ctx: JobContext, source: Version, workdir: Path) -> dict[str, Any]:
        return gguf_request(ctx, source, workdir)

    def publish_report(self, ctx: JobContext, source: Version, workdir: Path, report: dict[str, Any]
                       ) -> dict[str, Any]:
        return publish_gguf(ctx, source, workdir, report)


# --- a file of prompts (kind generate) ----------------------------------------------------------------------


def batch_limits() -> Limits:
    return replace(limits(), wall_seconds=max(limits().wall_seconds, settings.HUB_GENERATE_JOB_S),
                   cpu_seconds=max(limits().cpu_seconds, settings.HUB_GENERATE_JOB_S * 4))


def batch_request(ctx: JobContext, workdir: Path) -> tuple[dict[str, Any], Version, Version]:
    """The sandbox's request for a batch, the model's files and the prompts copied into ``workdir``."""
    params = ctx.job.params
    model = Version.objects.filter(pk=params["model"], deleted_at__isnull=True).first()
    dataset = Version.objects.filter(pk=params["dataset"]["version_id"], deleted_at__isnull=True).first()
    if model is None or dataset is None:
        raise CodedError("gone", "The generation model or the prompts' dataset was deleted before the job ran.")
    (workdir / "model").mkdir()
    for file in model.files.all():
        fetch(model, file.path, workdir / "model")
    prompts = fetch(dataset, params["dataset"]["file"], workdir)
    (workdir / "out").mkdir()
    request = {"task": "generate_batch", "model": "model", "prompts": prompts.name, "output": "out/generations.jsonl",
               "options": {**params["options"], "max_tokens_limit": settings.HUB_GENERATE_MAX_TOKENS},
               "threads": settings.HUB_GENERATE_THREADS}
    return request, model, dataset


def publish_batch(ctx: JobContext, model: Version, dataset: Version, workdir: Path, report: dict[str, Any],
                  execution: dict[str, Any] | None = None) -> dict[str, Any]:
    """The answers as a version of the requester's ``<model>-outputs`` dataset."""
    ctx.log(f"{report['prompts']} prompts, {report['completion_tokens']} tokens in {report['seconds']} s "
            f"({report['tokens_per_second']} tokens/s)")
    user = ctx.job.requester
    artifact = results_artifact(user, model)
    done = artifact.versions.filter(deleted_at__isnull=True, metadata__job=str(ctx.job.pk)).first()
    if done is None:
        path = sandbox.output_file(workdir, "out/generations.jsonl")
        metadata = {"title": f"Generations of {model} on {dataset}",
                    "description": f"Text generated by {model} ({model.pid}) for each prompt of {dataset} "
                                   f"({dataset.pid}), job {ctx.job.pk}.",
                    "creators": [{"name": user.get_full_name() or user.username}],
                    "license": (model.metadata or {}).get("license") or "CC-BY-4.0", "keywords": ["generation"],
                    "job": str(ctx.job.pk), "generation": {"batch": report, "options": ctx.job.params["options"]},
                    **({"execution": execution} if execution else {})}
        files: list[StagedFile] = [staged(path, "generations.jsonl")]
        try:
            done = create_version(artifact, user, files=files, metadata=metadata, system=True, provenance=[
                ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, model),
                ProvenanceRef(ProvenanceLink.Relation.DERIVED_FROM, dataset)])
        except HubError as exc:
            if exc.error_code != "duplicate_version":
                raise
            done = Version.objects.get(pid=exc.extra["existing_pid"])  # the same answers exist: point at them
    ctx.log(f"published the generations as {done} ({done.pid})")
    return {"version": str(done), "pid": done.pid, **report}


@register
class GenerateJob(JobKind):
    """Answer every prompt of a dataset's file with a generation model; publish the answers as a dataset."""

    name = "generate"
    label = "generation over a dataset"
    queue = DEVICE

    def run(self, ctx: JobContext) -> dict[str, Any]:
        workdir = Path(tempfile.mkdtemp(prefix="hpcfair-generate-"))
        try:
            request, model, dataset = batch_request(ctx, workdir)
            ctx.log(f"{model} on {dataset} {ctx.job.params['dataset']['file']}: generating in a sandbox")
            report = run_request(request, workdir, batch_limits(), hidden_paths(), _progress(ctx))
            return publish_batch(ctx, model, dataset, workdir, report)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def stage(self, job, folder: Path) -> Plan | None:
        (folder / "work").mkdir()
        request, model, dataset = batch_request(JobContext(job), folder / "work")
        return sandbox_plan("sandbox", f"{model} on {dataset}", batch_limits(), request=request)

    def publish(self, job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        ctx = JobContext(job)
        model = Version.objects.get(pk=job.params["model"])
        dataset = Version.objects.get(pk=job.params["dataset"]["version_id"])
        return publish_batch(ctx, model, dataset, folder / "work", node_result(folder)["report"], execution)


def _progress(ctx: JobContext):
    def on_line(line: str) -> None:
        stage = sandbox.parse_stage(line)
        if stage is not None:
            ctx.progress(stage[0])
        else:
            ctx.log(line)
    return on_line


@register
class ServeJob(JobKind):
    """Serve one model over an OpenAI-compatible API on a node (``hpcfair.serve``) until it is idle for the job's
    ``idle_s``; the hub routes ``/v1/*`` for it there meanwhile (``hub.generation.serving``)."""

    name = "serve"
    label = "model server"
    queue = DEVICE

    def run(self, ctx: JobContext) -> dict[str, Any]:
        folder = Path(tempfile.mkdtemp(prefix="hub-serve-"))
        try:
            (folder / "out").mkdir()
            (folder / "job.json").write_text(json.dumps(serving.prepare(ctx.job, folder)))
            return serving.run_here(ctx.job, folder, ctx.log)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def stage(self, job, folder: Path) -> Plan | None:
        spec = serving.prepare(job, folder)
        size = sum(path.stat().st_size for path in (folder / "model").rglob("*") if path.is_file())
        return Plan(spec, cpus=settings.HUB_GENERATE_THREADS, memory_mb=2 * size // 2**20 + 1024,
                    summary=f"serve {spec['name']} with {spec['engine']}, until {spec['idle_s']} s without a request")

    def follow(self, job, folder: Path) -> None:
        if url := serving.announce(job, folder):
            job.append_log("info", f"serving {job.params['name']} at {url}")

    def publish(self, job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        return serving.outcome(folder)

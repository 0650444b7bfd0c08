"""What the kinds share (docs/developing/extending/job-kind.md): the version a job works on, the idempotent retry's
result, a free version label, the conversion sandbox's limits and what it must not see, and a batch node's plan and
result. Files in and out of the object store are ``hub.jobs.files``."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from django.conf import settings
from hpcfair.compute import CodedError
from hpcfair.convert import Limits

from hub.jobs.kinds import Plan
from hub.jobs.runner import JobContext
from hub.registry import services as registry
from hub.registry.models import Artifact, ProvenanceLink, Version

# Metadata that describes the source file's framework, not what a job derives from it (an ONNX copy, a build).
SOURCE_ONLY = {"framework", "format", "inputs", "outputs", "sample_inputs", "verification", "conversion",
               "verified", "optimization", "opset", "weights"}


def limits(**changes: Any) -> Limits:
    """The conversion sandbox's limits (``HUB_CONVERT_*``), with ``changes`` (a kind's own time or memory)."""
    return replace(Limits(memory_mb=settings.HUB_CONVERT_MEMORY_MB, cpu_seconds=settings.HUB_CONVERT_CPU_S,
                          wall_seconds=settings.HUB_CONVERT_WALL_S, threads=settings.HUB_CONVERT_THREADS,
                          uid=settings.HUB_CONVERT_UID, gid=settings.HUB_CONVERT_GID), **changes)


def hidden_paths() -> list[Path]:
    """What a sandboxed child must not see: the hub's database, blobs and staged uploads."""
    return [Path(p) for p in (settings.VAR_DIR, settings.HUB_STORAGE.get("DIR"), settings.HUB_UPLOAD_DIR) if p]


def source_of(ctx: JobContext) -> Version:
    """The job's version; ``gone`` when it was deleted meanwhile."""
    version = ctx.job.version
    if version is None or version.is_deleted:
        raise CodedError("gone", "The version was deleted before it could be processed.")
    return version


def free_label(artifact, base: str) -> str:
    """``base``, or ``base-2``, ``base-3``, ...: the first label ``artifact`` has no version of."""
    taken = set(artifact.versions.values_list("label", flat=True))
    label, n = base, 2
    while label in taken:
        label, n = f"{base}-{n}", n + 1
    return label


def existing_result(ctx: JobContext, source: Version, relation: str) -> Version | None:
    """A retried job whose first attempt published already: return that version (idempotence)."""
    for link in ProvenanceLink.objects.filter(target=source, relation=relation).select_related("version"):
        if str(link.version.metadata.get("job")) == str(ctx.job.pk) and not link.version.is_deleted:
            return link.version
    return None


def sandbox_plan(compute: str, summary: str, limits_: Limits | None = None, **fields: Any) -> Plan:
    """A batch plan for a sandboxed compute of the node's runner: the hub's limits (a conversion's unless
    given) and the paths the child must not see."""
    return Plan({"compute": compute, "limits": asdict(limits_ or limits()),
                 "hide": [str(path) for path in hidden_paths()], **fields},
                cpus=max(1, settings.HUB_CONVERT_THREADS), summary=summary)


def node_result(folder: Path) -> dict[str, Any]:
    """What the node's task 0 wrote (``out/result-0.json``)."""
    return json.loads((folder / "out" / "result-0.json").read_text())


def results_artifact(user, model_version: Version) -> Artifact:
    """The requester's ``<model>-outputs`` dataset (made private on first use)."""
    base = f"{model_version.artifact.name}-outputs"[:90]
    name, n = base, 2
    while True:
        existing = Artifact.objects.live().filter(owner=user, name=name).first()
        if existing is None:
            return registry.create_artifact(
                user, kind=Artifact.Kind.DATASET, name=name, visibility=Artifact.Visibility.PRIVATE,
                title=f"Outputs of {model_version.artifact.full_name}",
                description=f"Inference outputs of {model_version.artifact.full_name}, made by the hub's gateway.")
        if existing.kind == Artifact.Kind.DATASET:
            return existing
        name, n = f"{base}-{n}", n + 1

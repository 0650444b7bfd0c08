"""Metadata of versions: prepared (card + user input + derived facts, validated by the field checks and
the SHACL shapes) before a version is stored, and turned into records for the RDF exports."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db.models import prefetch_related_objects
from django.urls import reverse

from hub.errors import HubError
from hub.metadata.derive import FileInfo, derive, read_card
from hub.registry.access import Viewer, sources
from hub.registry.api.serializers import absolute, file_url, pid_url
from hub.registry.models import Artifact, Version
from ontology import shapes
from ontology.exports import FORMATS
from ontology.fields import FIELDS, MetadataError, validate
from ontology.graph import to_graph
from ontology.record import FileEntry, Link, Record

# Facts read from an ONNX file win over what a user typed: they are what the file is.
AUTHORITATIVE = {"opset", "inputs", "outputs", "parameters"}


def invalid(exc: MetadataError) -> HubError:
    return HubError("invalid_metadata", f"The metadata needs fixing. {exc}", errors=exc.errors)


def prepare(artifact: Artifact, metadata: dict[str, Any], files: Sequence[FileInfo], *,
            system: bool = False) -> dict[str, Any]:
    """The metadata to store for a new version of ``artifact``, or a 400 naming every bad field.

    Precedence: the card's front matter < the metadata sent < facts derived from the files; the
    artifact's title and description fill in when neither the card nor the metadata has them.
    """
    try:
        front, body = read_card(files)
        merged: dict[str, Any] = {**front, **metadata}
        for name in ("title", "description"):
            if name not in merged and getattr(artifact, name):
                merged[name] = getattr(artifact, name)
        facts = derive(artifact.kind, files)
        derived = sorted(k for k, v in facts.items() if k in AUTHORITATIVE or merged.get(k) is None)
        merged.update({k: facts[k] for k in derived})
        if body.strip() and "card" not in merged:
            merged["card"] = body.strip()[:100_000]
            derived.append("card")
        if derived:
            merged["derived"] = sorted(set(derived) | set(merged.get("derived") or []))
        if not system:
            _refuse_hub_fields({**front, **metadata})
        clean = validate(merged, artifact.kind, system=True)
        shapes.check(to_graph(_provisional(artifact, clean, files)))
    except MetadataError as exc:
        raise invalid(exc)
    return clean


def _refuse_hub_fields(sent: dict[str, Any]) -> None:
    """Fields such as ``verified`` or ``card`` are the hub's to write, never a user's."""
    bad = sorted(name for name in sent if name in FIELDS and FIELDS[name].system)
    if bad:
        raise MetadataError({name: ["The hub sets this field itself."] for name in bad})


def _provisional(artifact: Artifact, metadata: dict[str, Any], files: Sequence[FileInfo]) -> Record:
    return Record(iri="urn:hpcfair:pending", pid="pending", kind=artifact.kind, label="pending", metadata=metadata,
                  published=datetime.now(UTC), owner=artifact.owner.username, public=artifact.is_public,
                  files=[FileEntry(f.path, f.size, "0" * 64, "application/octet-stream", "urn:hpcfair:pending")
                         for f in files])


# --- records -----------------------------------------------------------------------------------------


def export_urls(version: Version) -> dict[str, str]:
    artifact = version.artifact
    names = [n for n in FORMATS if n != "croissant" or artifact.kind == "dataset"]
    return {name: absolute(reverse("api:version-metadata",
                                   args=[artifact.owner.username, artifact.name, version.label, name]))
            for name in names}


def with_measurements(version: Version) -> dict[str, Any]:
    """The version's metadata plus what the hub measured about it since (latency per hardware)."""
    from hub.gateway.models import measured

    found = measured(version)
    if not found:
        return version.metadata
    return {**version.metadata, "benchmarks": [*(version.metadata.get("benchmarks") or []), *found]}


def version_record(version: Version, viewer: Viewer) -> Record:
    """The record of one version (files, provenance, its concept) as ``viewer`` may see it: a source they
    may not read keeps its relation and kind, not its name, PID or IRI."""
    # One query each for files and provenance, skipped where a list view prefetched them already.
    prefetch_related_objects([version], "files", "provenance__target__artifact__owner")
    artifact = version.artifact
    job = version.metadata.get("job")
    return Record(
        iri=pid_url(version.pid), pid=version.pid, kind=artifact.kind, label=version.label,
        metadata=with_measurements(version), published=version.created, owner=artifact.owner.username,
        public=artifact.is_public,
        files=[FileEntry(f.path, f.size, f.blob_id, f.media_type, file_url(version, f.path))
               for f in version.files.all()],
        provenance=[Link.hidden(s.relation, s.kind) if s.target is None
                    else Link(s.relation, pid_url(s.target.pid), s.target.pid, str(s.target))
                    for s in sources(viewer, version)],
        concept_iri=pid_url(artifact.pid), concept_pid=artifact.pid,
        job_url=absolute(reverse("api:job-detail", args=[job])) if isinstance(job, str) and job else "",
        export_urls=export_urls(version),
    )


def concept_record(artifact: Artifact, viewer: Viewer) -> Record | None:
    """The concept PID's record: the latest version's metadata, pointing at every live version."""
    latest = artifact.latest_version()
    if latest is None:
        return None
    record = version_record(latest, viewer)
    record.iri, record.pid, record.label = pid_url(artifact.pid), artifact.pid, ""
    record.versions = [Link("has_version", pid_url(v.pid), v.pid, str(v))
                       for v in artifact.versions.filter(deleted_at__isnull=True).select_related("artifact__owner")]
    return record


def record_for(found: Artifact | Version, viewer: Viewer) -> Record | None:
    return version_record(found, viewer) if isinstance(found, Version) else concept_record(found, viewer)

"""Metadata of versions: prepared (card + user input + derived facts, validated by the field checks and
the SHACL shapes) before a version is stored, and turned into records for the RDF exports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from django.db.models import prefetch_related_objects
from django.urls import reverse

from hub.errors import HubError
from hub.metadata.cards import from_hugging_face, title_and_description
from hub.metadata.derive import FileInfo, derive, read_card, split_card
from hub.registry import lineage
from hub.registry.access import Viewer, sources
from hub.registry.files_access import strictest_state
from hub.registry.links import absolute, file_url, pid_url
from hub.registry.models import Artifact, Version
from ontology import shapes
from ontology.exports import names_for
from ontology.fields import BUILT_FORMATS, FIELDS, MetadataError, validate
from ontology.graph import to_graph
from ontology.record import FileEntry, Link, Record

# Facts read from an ONNX file win over what a user typed: they are what the file is.
AUTHORITATIVE = {"opset", "inputs", "outputs", "parameters"}


def invalid(exc: MetadataError) -> HubError:
    return HubError("invalid_metadata", f"The metadata needs fixing. {exc}", errors=exc.errors)


def prepare(artifact: Artifact, metadata: dict[str, Any], files: Sequence[FileInfo], *,
            system: bool = False) -> dict[str, Any]:
    """The metadata to store for a new version of ``artifact``, or a 400 naming every bad field.

    Precedence: the card's front matter (a Hugging Face card's keys read as the hub's, ``hub.metadata.cards``)
    < the metadata sent < facts derived from the files. When neither the card's front matter nor the
    metadata has a title or description, the artifact's fill in (a title that is only its name excepted),
    else the card's first heading and paragraph.
    """
    try:
        front, body = read_card(files)
        front = from_hugging_face(front, artifact.kind)
        merged: dict[str, Any] = {**front, **metadata}
        opening = title_and_description(body)
        given = {"title": artifact.title if artifact.title != artifact.name else "",  # the name: no title given
                 "description": artifact.description}
        for name in ("title", "description"):
            if name not in merged and (given[name] or opening.get(name) or getattr(artifact, name)):
                merged[name] = given[name] or opening.get(name) or getattr(artifact, name)
        facts = derive(artifact.kind, files)
        if facts.get("records") and isinstance(merged.get("records"), list):
            merged["records"] = _columns(facts.pop("records"), merged["records"])
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


def card_fields(text: str, kind: str, name: str = "README.md") -> dict[str, Any]:
    """What ``prepare`` takes from a card's text (Hugging Face keys read as the hub's; the first heading and
    paragraph as title and description where the front matter has none): for a form to show before
    publishing. A ``MetadataError`` when the front matter cannot be read."""
    front, body = split_card(text, name)
    fields = from_hugging_face(front, kind)
    for key, value in title_and_description(body).items():
        fields.setdefault(key, value)
    return fields


def _columns(found: list[dict[str, Any]], given: list[Any]) -> list[dict[str, Any]]:
    """The columns read from the file, each with what the metadata says about it (description, unit, a
    dtype), then any column the metadata names that the file lacks."""
    given = [{"name": item} if isinstance(item, str) else item for item in given]
    named = {item["name"]: item for item in given if isinstance(item, dict) and isinstance(item.get("name"), str)}
    out = [{**column, **named.pop(column["name"], {})} for column in found]
    return out + [item for item in given if not isinstance(item, dict) or item.get("name") in named]


def _refuse_hub_fields(sent: dict[str, Any]) -> None:
    """Fields such as ``verified`` or ``card`` are the hub's to write, never a user's."""
    bad = sorted(name for name in sent if name in FIELDS and FIELDS[name].system)
    errors = {name: ["The hub sets this field itself."] for name in bad}
    if sent.get("format") in BUILT_FORMATS:
        errors["format"] = [f"{sent['format']} is the format of the hub's own generation builds: publish the "
                            "Hugging Face folder (config.json, weights, tokenizer.json) and the hub builds and "
                            "verifies its generation model."]
    if errors:
        raise MetadataError(errors)


def _provisional(artifact: Artifact, metadata: dict[str, Any], files: Sequence[FileInfo]) -> Record:
    return Record(iri="urn:hpcfair:pending", pid="pending", kind=artifact.kind, label="pending", metadata=metadata,
                  published=datetime.now(UTC), owner=artifact.owner.username, public=artifact.is_public,
                  files=[FileEntry(f.path, f.size, "0" * 64, "application/octet-stream", "urn:hpcfair:pending")
                         for f in files])


# --- records -----------------------------------------------------------------------------------------


def export_urls(version: Version) -> dict[str, str]:
    artifact = version.artifact
    return {name: absolute(reverse("api:version-metadata",
                                   args=[artifact.owner.username, artifact.name, version.label, name]))
            for name in names_for(artifact.kind)}


def pid_export_url(pid: str, name: str) -> str:
    """A PID's record in one format, whatever it names (a concept, a version, a tombstone): where the
    resolver sends a client that asked for that format."""
    return absolute(reverse("api:pid-metadata", args=[name, pid]))


def pid_export_urls(pid: str, kind: str) -> dict[str, str]:
    return {name: pid_export_url(pid, name) for name in names_for(kind)}


def landing_url(pid: str) -> str:
    """The landing page of a PID: where the resolver sends browsers."""
    return absolute(reverse("landing", args=[pid]))


def with_measurements(version: Version) -> dict[str, Any]:
    """The version's metadata plus what the hub measured about it since (latency per hardware)."""
    from hub.gateway.models import measured

    found = measured(version)
    if not found:
        return version.metadata
    return {**version.metadata, "benchmarks": [*(version.metadata.get("benchmarks") or []), *found]}


def _version_link(version: Version) -> Link:
    return Link("version", pid_url(version.pid), version.pid, str(version))


def _siblings(version: Version) -> list[Any]:
    """The artifact's versions, oldest first, each with ``is_variant`` (``hub.registry.lineage``); no query where
    the artifact's ``versions`` were prefetched with that flag (the SPARQL store's render of a batch)."""
    artifact = version.artifact
    if "versions" in getattr(artifact, "_prefetched_objects_cache", {}):
        return sorted(artifact.versions.all(), key=lambda v: (v.created, v.pk))
    return lineage.chain(artifact)


def _neighbours(version: Version, ordered: list[Any]) -> tuple[Link | None, Link | None]:
    """The uploads just before and after ``version`` (``hub.registry.lineage.neighbours``: the hub's variants
    are left out, deleted uploads only where no live one lies on that side; their PIDs still resolve)."""
    name = version.artifact.full_name

    def link(found: Any | None) -> Link | None:
        return Link("version", pid_url(found.pid), found.pid, f"{name}@{found.label}") if found else None

    before, after = lineage.neighbours(version, ordered)
    return link(before), link(after)


def version_record(version: Version, viewer: Viewer) -> Record:
    """The record of one version (files, provenance, its concept, its neighbours) as ``viewer`` may see it:
    a source they may not read keeps its relation and kind, not its name, PID or IRI. A deleted version's
    record is its tombstone's: no files, marked withdrawn."""
    # One query each for files and provenance, skipped where a list view prefetched them already.
    prefetch_related_objects([version], "files", "provenance__target__artifact__owner")
    artifact = version.artifact
    job = version.metadata.get("job")
    siblings = _siblings(version)
    previous, following = _neighbours(version, siblings)
    source = lineage.variant_source(version, siblings)
    return Record(
        iri=pid_url(version.pid), pid=version.pid, kind=artifact.kind, label=version.label,
        metadata=with_measurements(version), published=version.created, owner=artifact.owner.username,
        public=artifact.is_public,
        files_access=(access := strictest_state(version))[0], available=access[1],
        files=[] if version.is_deleted else [FileEntry(f.path, f.size, f.blob_id, f.media_type,
                                                       file_url(version, f.path)) for f in version.files.all()],
        provenance=[Link.hidden(s.relation, s.kind) if s.target is None
                    else Link(s.relation, pid_url(s.target.pid), s.target.pid, str(s.target))
                    for s in sources(viewer, version)],
        concept_iri=pid_url(artifact.pid), concept_pid=artifact.pid,
        activity_iri=f"{pid_url(version.pid)}#activity" if isinstance(job, str) and job else "",
        export_urls=(pid_export_urls(version.pid, artifact.kind) if version.is_deleted or artifact.deleted_at
                     else export_urls(version)),
        previous=previous, next=following,
        variant_of=Link("variant_of", pid_url(source.pid), source.pid, str(source)) if source else None,
        withdrawn=version.deleted_at, withdrawn_reason=version.deletion_reason, landing_url=landing_url(version.pid),
    )


def concept_record(artifact: Artifact, viewer: Viewer) -> Record:
    """The concept PID's record: the latest version's description, with every version as a part
    (``HasVersion``) and only the provenance that leads outside the artifact. An artifact without a
    version yet has a record too (its title, description and owner); a deleted one is withdrawn."""
    versions = list(artifact.versions.order_by("created", "id").select_related("artifact__owner"))
    live = [v for v in versions if not v.is_deleted]
    latest = (live or versions or [None])[-1]
    common = {"iri": pid_url(artifact.pid), "pid": artifact.pid, "kind": artifact.kind, "label": "",
              "owner": artifact.owner.username, "public": artifact.is_public,
              "export_urls": pid_export_urls(artifact.pid, artifact.kind), "landing_url": landing_url(artifact.pid),
              "withdrawn": artifact.deleted_at, "withdrawn_reason": artifact.deletion_reason,
              "versions": [_version_link(v) for v in (live if not artifact.deleted_at else versions)]}
    if latest is None:
        metadata = {"title": artifact.title or artifact.full_name, "kind": artifact.kind,
                    **({"description": artifact.description} if artifact.description else {})}
        return Record(metadata=metadata, published=artifact.created, **common)
    record = version_record(latest, viewer)
    own = {v.pid for v in versions}
    # The concept's files are its latest version's, at the URLs that always give the latest (their Link
    # headers lead back to the concept's page, as its linkset says).
    files = [replace(f, url=file_url(latest, f.path, "latest")) for f in record.files]
    return Record(metadata=record.metadata, published=versions[0].created,
                  updated=latest.created if len(versions) > 1 else None, latest_label=latest.label,
                  files=files if not artifact.deleted_at else [],
                  provenance=[link for link in record.provenance if link.pid not in own], **common)


def record_for(found: Artifact | Version, viewer: Viewer) -> Record:
    return version_record(found, viewer) if isinstance(found, Version) else concept_record(found, viewer)


def class_labels(version: Version, viewer: Viewer) -> list[str] | None:
    """The class names of ``version``'s classes, where it or its training data records them (issue 41,
    point 4): its own ``labels`` (a card's, or a Hugging Face folder's ``id2label``), else those of the version
    it was converted from, else those of a dataset it was trained on that ``viewer`` may read."""
    from hub.conversions.services import converted_from

    for candidate in (version, converted_from(version)):
        if candidate is None:
            continue
        labels = candidate.metadata.get("labels")
        if isinstance(labels, list) and labels:
            return labels
        for source in sources(viewer, candidate):
            if source.relation == "trained_on" and source.target is not None:
                labels = source.target.metadata.get("labels")
                if isinstance(labels, list) and labels:
                    return labels
    return None

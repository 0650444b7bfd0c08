"""Keeping the search index in step with the registry (called from the registry's signals)."""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.search import SearchVector
from django.db import connection, transaction
from django.db.models import F, Value

from hub.metadata import scientific
from hub.metadata.services import with_measurements
from hub.registry import lineage
from hub.registry.models import Artifact, ProvenanceLink, Version
from hub.search.backends import backend
from hub.search.models import FacetValue, SearchEntry, SearchState
from ontology.fields import FRAMEWORK_ALIASES

CARD_CHARS = 20_000
# framework -> the other names the metadata accepts for it (scikit-learn: sklearn, scikitlearn)
ALIASES = {name: [alias for alias, n in FRAMEWORK_ALIASES.items() if n == name] for name in FRAMEWORK_ALIASES.values()}


def facet_values(artifact: Artifact, metadata: dict[str, Any]) -> set[tuple[str, str]]:
    values = {("kind", artifact.kind), ("owner", artifact.owner.username)}
    for name in ("framework", "format", "task", "license", "quantization"):
        if isinstance(metadata.get(name), str):
            values.add((name, metadata[name]))
    for word in metadata.get("keywords") or []:
        values.add(("keyword", word.lower()[:200]))
    values |= {("standard_name", name[:200]) for name in scientific.standard_names(metadata)}
    values |= {("variable", name[:200]) for name in scientific.variable_names(metadata)}
    for item in metadata.get("benchmarks") or []:
        hardware = item.get("hardware") or {}
        values.add(("hardware", hardware.get("kind", "cpu")))
        for key in ("gpu_model", "cpu_model"):
            if hardware.get(key):
                values.add(("hardware", str(hardware[key])[:200]))
    return values


def document(artifact: Artifact, versions: list[Version]) -> dict[str, Any]:
    """The entry's columns: the title from the version the artifact stands for (its newest upload, not the
    hub's ``1.0-onnx`` made from it: ``current``), and the words of all its live versions (newest first), so that
    a model is found by what its original is as well as by its ONNX conversion: keywords, framework, format and
    task names, descriptions, creators and the current card."""
    latest = versions[0] if versions else None
    current = next((v for v in versions if not lineage.is_variant(v)), latest)
    metadata = current.metadata if current else {}
    words: list[str] = []
    texts: list[str] = [artifact.name]
    for version in versions:
        meta = version.metadata
        words += [str(w) for w in meta.get("keywords") or []]
        words += [meta[name] for name in ("framework", "format", "task") if isinstance(meta.get(name), str)]
        words += ALIASES.get(str(meta.get("framework")), [])  # "sklearn" finds scikit-learn models
        words += scientific.standard_names(meta) + scientific.variable_names(meta)  # "air_temperature" finds it
        texts.append(str(meta.get("description") or ""))
        texts += [str(c.get("name", "")) for c in meta.get("creators") or [] if isinstance(c, dict)]
    if not versions:
        texts.append(artifact.description)
    texts.append(str(metadata.get("card") or "")[:CARD_CHARS])
    return {
        "version": latest, "current": current, "kind": artifact.kind, "visibility": artifact.visibility,
        "owner": artifact.owner,
        "title": (metadata.get("title") or artifact.title or artifact.name)[:300],
        "keywords": " ".join(dict.fromkeys(words)),
        "text": "\n".join(dict.fromkeys(filter(None, texts))),
        "updated": latest.created if latest else artifact.created,
    }


def derived_parent(artifact: Artifact, versions: list[Version]) -> Artifact | None:
    """The artifact ``artifact`` was made from by the hub, shown with it in search instead of beside it:
    every live version was published by a hub job (an MLCube, inference outputs) and derives from versions of
    one and the same other artifact. Artifacts people publish, and merges of several, stand on their own."""
    if not versions or any(not v.metadata.get("job") for v in versions):
        return None
    sources = {link.target.artifact_id for v in versions for link in v.provenance.all()
               if link.relation in (ProvenanceLink.Relation.DERIVED_FROM, ProvenanceLink.Relation.CONVERTED_FROM)}
    sources.discard(artifact.pk)
    if len(sources) != 1:
        return None
    return Artifact.objects.live().filter(pk=sources.pop()).first()


def next_generation() -> int:
    """Raise the index's generation. The state row stays locked until the caller's transaction commits,
    so a later change always gets a higher number than every change committed before it."""
    updated = SearchState.objects.filter(pk=1).update(generation=F("generation") + 1)
    if not updated:
        SearchState.objects.get_or_create(pk=1)
        SearchState.objects.filter(pk=1).update(generation=F("generation") + 1)
    return SearchState.objects.filter(pk=1).values_list("generation", flat=True).get()


# Raise it whenever document() or facet_values() change what an entry holds: the next `migrate` rebuilds
# every entry (hub.search.apps), so an upgrade never leaves artifacts unfindable by what the new code indexes.
# 2: MLCube projects made before cubes followed their model took its visibility in registry 0004, beside the index.
# 3: HDF5/NetCDF/Zarr variables and CF standard names (facets standard_name and variable, and words).
# 4: the current version (the newest upload, not a conversion) beside the newest one, its title and card.
# 5: a GGUF model's quantization (facet quantization).
INDEX_FORMAT = 5


def rebuild() -> int:
    """Every live artifact's entry made again and deleted ones' retired; returns how many were indexed."""
    for artifact in Artifact.objects.filter(deleted_at__isnull=False, search_entry__live=True):
        reindex(artifact)
    count = 0
    for artifact in Artifact.objects.live().select_related("owner").iterator():
        reindex(artifact)
        count += 1
    SearchState.objects.update_or_create(pk=1, defaults={"format": INDEX_FORMAT})
    return count


def outdated() -> bool:
    """Whether the entries were made by another INDEX_FORMAT than this code's (or never)."""
    state = SearchState.objects.filter(pk=1).first()
    return state is None or state.format != INDEX_FORMAT


def heal() -> int:
    """Index the live artifacts that have no live entry and retire the entries of deleted ones: what
    ``hub_serve`` does as it starts (an older ``var/``, an entry lost some other way), in two indexed queries when
    nothing is missing, instead of rebuilding every entry (``rebuild``: about 8 minutes at 100k artifacts).
    Returns how many entries it changed."""
    changed = 0
    for artifact in Artifact.objects.filter(deleted_at__isnull=False, search_entry__live=True):
        reindex(artifact)
        changed += 1
    for artifact in Artifact.objects.live().exclude(search_entry__live=True).select_related("owner").iterator():
        reindex(artifact)
        changed += 1
    return changed


def reindex(artifact: Artifact) -> None:
    """Bring ``artifact``'s entry up to date (or retire it when the artifact is deleted)."""
    with transaction.atomic():
        _reindex(artifact, next_generation())


def _reindex(artifact: Artifact, seq: int) -> None:
    if artifact.deleted_at is not None:
        FacetValue.objects.filter(entry__artifact=artifact).delete()
        SearchEntry.objects.filter(artifact=artifact).update(live=False, seq=seq)
        return
    versions = list(artifact.versions.filter(deleted_at__isnull=True).order_by("-created", "-id")
                    .prefetch_related("provenance__target"))
    entry, _ = SearchEntry.objects.update_or_create(
        artifact=artifact, defaults={**document(artifact, versions), "parent": derived_parent(artifact, versions),
                                     "live": True, "seq": seq})
    wanted = {("kind", artifact.kind), ("owner", artifact.owner.username)}
    for version in versions:
        wanted |= facet_values(artifact, with_measurements(version))
    FacetValue.objects.filter(entry=entry).delete()
    FacetValue.objects.bulk_create([FacetValue(entry=entry, facet=f, value=v) for f, v in sorted(wanted)])
    if connection.vendor == "postgresql":
        SearchEntry.objects.filter(pk=entry.pk).update(search_vector=vector())


def vector():
    """Weighted: title (A) > keywords (B) > description, creators and card (C)."""
    config = Value("english")
    return (SearchVector("title", weight="A", config=config) + SearchVector("keywords", weight="B", config=config)
            + SearchVector("text", weight="C", config=config))


def on_version_published(sender, version: Version, **kwargs) -> None:
    on_artifact_changed(sender, version.artifact)


def on_artifact_changed(sender, artifact: Artifact, **kwargs) -> None:
    """The registry changed ``artifact``: its entry, then the backend's own store (``SearchBackend.changed``)."""
    reindex(artifact)
    backend().changed(artifact)

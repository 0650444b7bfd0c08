"""Keeping the search index in step with the registry (called from the registry's signals)."""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.search import SearchVector
from django.db import connection, transaction
from django.db.models import F, Value

from hub.metadata.services import with_measurements
from hub.registry.models import Artifact, Version
from hub.search.models import FacetValue, SearchEntry, SearchState

CARD_CHARS = 20_000


def facet_values(artifact: Artifact, metadata: dict[str, Any]) -> set[tuple[str, str]]:
    values = {("kind", artifact.kind), ("owner", artifact.owner.username)}
    for name in ("framework", "format", "task", "license"):
        if isinstance(metadata.get(name), str):
            values.add((name, metadata[name]))
    for word in metadata.get("keywords") or []:
        values.add(("keyword", word.lower()[:200]))
    for item in metadata.get("benchmarks") or []:
        hardware = item.get("hardware") or {}
        values.add(("hardware", hardware.get("kind", "cpu")))
        for key in ("gpu_model", "cpu_model"):
            if hardware.get(key):
                values.add(("hardware", str(hardware[key])[:200]))
    return values


def document(artifact: Artifact, version: Version | None) -> dict[str, Any]:
    """The entry's columns: title, keywords and free text from the artifact and its latest version."""
    metadata = version.metadata if version else {}
    creators = " ".join(c.get("name", "") for c in metadata.get("creators") or [] if isinstance(c, dict))
    return {
        "version": version, "kind": artifact.kind, "visibility": artifact.visibility, "owner": artifact.owner,
        "title": (metadata.get("title") or artifact.title or artifact.name)[:300],
        "keywords": " ".join(metadata.get("keywords") or []),
        "text": "\n".join(filter(None, [artifact.name, metadata.get("description") or artifact.description,
                                        creators, (metadata.get("card") or "")[:CARD_CHARS]])),
        "updated": version.created if version else artifact.created,
    }


def next_generation() -> int:
    """Raise the index's generation. The state row stays locked until the caller's transaction commits,
    so a later change always gets a higher number than every change committed before it."""
    updated = SearchState.objects.filter(pk=1).update(generation=F("generation") + 1)
    if not updated:
        SearchState.objects.get_or_create(pk=1)
        SearchState.objects.filter(pk=1).update(generation=F("generation") + 1)
    return SearchState.objects.filter(pk=1).values_list("generation", flat=True).get()


def reindex(artifact: Artifact) -> None:
    """Bring ``artifact``'s entry up to date (or retire it when the artifact is deleted)."""
    with transaction.atomic():
        _reindex(artifact, next_generation())


def _reindex(artifact: Artifact, seq: int) -> None:
    if artifact.deleted_at is not None:
        FacetValue.objects.filter(entry__artifact=artifact).delete()
        SearchEntry.objects.filter(artifact=artifact).update(live=False, seq=seq)
        return
    version = artifact.latest_version()
    entry, _ = SearchEntry.objects.update_or_create(
        artifact=artifact, defaults={**document(artifact, version), "live": True, "seq": seq})
    wanted = facet_values(artifact, with_measurements(version) if version else {})
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
    reindex(version.artifact)


def on_artifact_changed(sender, artifact: Artifact, **kwargs) -> None:
    reindex(artifact)

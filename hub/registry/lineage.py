"""How an artifact's versions relate to each other: the one rule that tells the versions its people published
(uploads, their chain of new versions) from the versions the hub made out of one of them (its ONNX
conversion ``1-onnx``, an optimisation ``1-onnx-opt``, a language model's export: *variants* of that source).

A variant is a version that names another version **of the same artifact** as its source, by
``converted_from``, or by ``derived_from``/``merged_from`` when a hub job made it (its ``job`` field, which
only the hub writes). ``revision_of`` and ``trained_on`` never make a variant. A variant links to its source
by derivation (``hub:variantOf``, ``hub:convertedFrom``, DataCite ``IsVariantFormOf``/``IsDerivedFrom``) and
has no place in the version chain; the chain (predecessor/successor, ``IsNewVersionOf``,
``prov:wasRevisionOf``) joins the uploads only. Deleted uploads are skipped where a live one lies in that
direction: the chain of 1, 2 (deleted), 3 is 1 -> 3, and 2's tombstone still names 1 and 3.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from hub.registry.models import Artifact, ProvenanceLink, Version

SOURCE_RELATIONS = (ProvenanceLink.Relation.CONVERTED_FROM, ProvenanceLink.Relation.DERIVED_FROM,
                    ProvenanceLink.Relation.MERGED_FROM)


def _from_a_sibling() -> Exists:
    """True for a version that is a variant of another version of its artifact (the module's rule)."""
    links = ProvenanceLink.objects.filter(version=OuterRef("pk"), target__artifact_id=OuterRef("artifact_id"),
                                          relation__in=SOURCE_RELATIONS)
    return Exists(links.filter(Q(relation=ProvenanceLink.Relation.CONVERTED_FROM)
                               | Q(version__metadata__has_key="job")))


def is_variant(version: Version) -> bool:
    """The module's rule for one version already in hand, over its ``provenance`` (prefetch it for many)."""
    return any(link.target.artifact_id == version.artifact_id and link.relation in SOURCE_RELATIONS
               and (link.relation == ProvenanceLink.Relation.CONVERTED_FROM or "job" in (version.metadata or {}))
               for link in version.provenance.all())


def with_variant_flag(versions: QuerySet[Version]) -> QuerySet[Version]:
    """``versions``, each annotated ``is_variant`` (one query, whatever their number)."""
    return versions.annotate(is_variant=_from_a_sibling())


def current_version(artifact: Artifact) -> Version | None:
    """The version the artifact stands for to people: its newest live upload (not a variant the hub made
    from one), else its newest live version when every one is a variant. What its landing page opens on,
    and what ``owner/name@current`` names (``latest`` is the newest live version of any kind)."""
    live = artifact.versions.filter(deleted_at__isnull=True).order_by("-created", "-id")
    return with_variant_flag(live).filter(is_variant=False).first() or live.first()


def chain(artifact: Artifact) -> list[Any]:
    """The artifact's versions, oldest first, annotated ``is_variant``: what ``neighbours`` reads. Only the
    fields a link needs are loaded."""
    versions = artifact.versions.only("pk", "pid", "label", "created", "deleted_at", "artifact_id")
    return list(with_variant_flag(versions).order_by("created", "id"))


def neighbours(version: Version, ordered: Sequence[Any]) -> tuple[Any | None, Any | None]:
    """The uploads just before and after ``version`` among ``ordered`` (its artifact's versions, oldest first,
    each with ``is_variant``): the nearest live one on each side, else the nearest deleted one (its PID
    resolves to a tombstone). (None, None) for a variant: it is no new version of anything."""
    uploads = [v for v in ordered if not v.is_variant]
    index = next((i for i, v in enumerate(uploads) if v.pk == version.pk), None)
    if index is None:
        return None, None

    def nearest(side: Sequence[Any]) -> Any | None:
        return next((v for v in side if v.deleted_at is None), side[0] if side else None)

    return nearest(uploads[:index][::-1]), nearest(uploads[index + 1:])


def variant_source(version: Version, ordered: Sequence[Any]) -> Version | None:
    """The version of the same artifact that the variant ``version`` was made from (None for an upload)."""
    if not next((v.is_variant for v in ordered if v.pk == version.pk), False):
        return None
    siblings = {v.pk for v in ordered}
    links = [link for link in version.provenance.all() if link.target_id in siblings
             and link.relation in SOURCE_RELATIONS]
    links.sort(key=lambda link: link.relation != ProvenanceLink.Relation.CONVERTED_FROM)
    return links[0].target if links else None

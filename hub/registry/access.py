"""Who sees what: the one visibility check per viewer, used by every surface that names an artifact.

``readable_by`` (``hub.registry.rule``) is the rule as a query. A ``Viewer`` applies it to the
artifacts an answer is about to name (the sources and derivatives of a version), so that the API, the
landing pages, every export and PID representation, linksets, OAI-PMH and SPARQL hide the same things
from the same people. A source the viewer may not read stays a relation without name, PID or IRI ("a
restricted dataset"); a derivative the viewer may not read is not there at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import prefetch_related_objects

from hub.orgs.models import Membership, Role, roles_at_least
from hub.registry.models import Artifact, ProvenanceLink, Version
from hub.registry.rule import readable_by
from ontology.record import RELATION_WORDS, restricted_name


class Viewer:
    """One reader (a user, or nobody: the public). Remembers what it asked, so a list costs one query."""

    def __init__(self, user=None) -> None:
        self.user = user if user is not None and user.is_authenticated else None
        self._known: dict[int, bool] = {}

    @classmethod
    def public(cls) -> Viewer:
        """Anyone at all: what OAI-PMH harvesters, the SPARQL graph and anonymous requests get."""
        return cls(None)

    def readable(self, artifacts: Iterable[Artifact]) -> set[int]:
        """The pks of ``artifacts`` this viewer may read (public ones without a query)."""
        artifacts = list(artifacts)
        for artifact in artifacts:
            if artifact.is_public:
                self._known[artifact.pk] = True
        unknown = {a.pk for a in artifacts if a.pk not in self._known}
        if unknown:
            allowed = set()
            if self.user is not None:
                allowed = set(Artifact.objects.filter(pk__in=unknown).filter(readable_by(self.user))
                              .values_list("pk", flat=True))
            self._known.update({pk: pk in allowed for pk in unknown})
        return {a.pk for a in artifacts if self._known[a.pk]}


@dataclass(frozen=True)
class Source:
    """``relation`` to ``target``; ``target`` is None when the viewer may not read it."""

    relation: str
    kind: str
    target: Version | None

    @property
    def restricted(self) -> bool:
        return self.target is None

    @property
    def name(self) -> str:
        return str(self.target) if self.target is not None else restricted_name(self.kind)


def sources(viewer: Viewer, version: Version) -> list[Source]:
    """What ``version`` was made from, as ``viewer`` may see it (restricted ones without identity)."""
    prefetch_related_objects([version], "provenance__target__artifact__owner")  # no-op where prefetched
    links = list(version.provenance.all())
    readable = viewer.readable(link.target.artifact for link in links)
    return [Source(link.relation, link.target.artifact.kind,
                   link.target if link.target.artifact_id in readable else None) for link in links]


def derivatives(viewer: Viewer, version: Version, *, live_only: bool = False) -> list[ProvenanceLink]:
    """The links of what was made from ``version`` that ``viewer`` may read; the others do not exist."""
    prefetch_related_objects([version], "derivatives__version__artifact__owner")
    links = [link for link in version.derivatives.all() if not (live_only and link.version.is_deleted)]
    readable = viewer.readable(link.version.artifact for link in links)
    return [link for link in links if link.version.artifact_id in readable]


def explicit_readers(artifact: Artifact) -> set | None:
    """The users who may read ``artifact`` by name (owner, collaborators, members by role); None when it is
    public or internal (its readers are everyone, or everyone signed in)."""
    if artifact.visibility in (Artifact.Visibility.PUBLIC, Artifact.Visibility.INTERNAL):
        return None
    roles = roles_at_least(Role.READ if artifact.visibility == Artifact.Visibility.ORGANIZATION else Role.WRITE)
    members = Membership.objects.filter(org_id=artifact.owner_id, role__in=roles).select_related("user")
    return {artifact.owner, *artifact.collaborators.all(), *(m.user for m in members)}


def readers_missing(artifact: Artifact, target: Artifact) -> list[str] | None:
    """The users who may read ``artifact`` but not ``target`` (None: ``artifact`` is public or internal, so
    everyone, or everyone signed in, may read it); they see a relation from one to the other without the
    target's name or PID."""
    if target.is_public or (target.visibility == Artifact.Visibility.INTERNAL and not artifact.is_public):
        return []
    readers = explicit_readers(artifact)
    if readers is None:
        return None
    target_readers = {user.pk for user in explicit_readers(target) or ()}
    return sorted({user.username for user in readers if user.pk not in target_readers and not user.is_superuser
                   and not hasattr(user, "organization")})


def unseen_source(link: ProvenanceLink) -> str:
    """A warning for the writers of ``link.version`` when some of its readers may not read its source
    (they see the relation as restricted); "" when all of them may."""
    missing = readers_missing(link.version.artifact, link.target.artifact)
    if missing == []:
        return ""
    who = f"{', '.join(missing)} may read {link.version} but not" if missing else \
        f"{link.version} is {link.version.artifact.visibility}; everyone but the readers of {link.target.artifact} " \
        "cannot see"
    return (f"{who} its source {link.target} ({RELATION_WORDS.get(link.relation, link.relation)}): they see "
            f"'{restricted_name(link.target.artifact.kind)}' there, without its name or PID.")


def publish_warnings(version: Version) -> list[str]:
    """For the publisher: each source of ``version`` that some of its readers may not see."""
    links = version.provenance.select_related("version__artifact__owner", "target__artifact__owner")
    return [warning for link in links if (warning := unseen_source(link))]


def sharing_warnings(artifact: Artifact, viewer: Viewer) -> list[str]:
    """For an owner who changed who may read ``artifact``: relations from or to its live versions that
    some readers now see as restricted (only derivatives the owner may see are named)."""
    warnings = []
    for version in artifact.versions.filter(deleted_at__isnull=True).select_related("artifact__owner"):
        warnings += publish_warnings(version)
        warnings += [w for link in derivatives(viewer, version, live_only=True) if (w := unseen_source(link))]
    return warnings

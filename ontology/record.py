"""A version's record as plain data: everything the RDF mapping and the exports need, with no Django.

The hub builds one from a ``Version`` (``hub.metadata.records``); tests build them by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class FileEntry:
    path: str
    size: int
    sha256: str
    media_type: str
    url: str


# Provenance relations of the registry, as words ("trained on a restricted dataset").
RELATION_WORDS = {"converted_from": "converted from", "merged_from": "merged from", "trained_on": "trained on",
                  "derived_from": "derived from", "revision_of": "revision of"}


def restricted_name(kind: str) -> str:
    """What stands in for an artifact the reader may not see: its kind, nothing that identifies it."""
    return f"a restricted {kind}"


@dataclass(frozen=True)
class Link:
    """``relation`` is a provenance relation of the registry (converted_from, trained_on, ...).

    A restricted link is one whose target the record's reader may not see: it keeps the relation and the
    target's kind, and has no IRI, PID or name (``name`` says "a restricted dataset")."""

    relation: str
    iri: str
    pid: str
    name: str = ""
    restricted: bool = False
    kind: str = ""

    @classmethod
    def hidden(cls, relation: str, kind: str) -> Link:
        return cls(relation, "", "", restricted_name(kind), restricted=True, kind=kind)

    @property
    def words(self) -> str:
        """E.g. "trained on a restricted dataset"."""
        return f"{RELATION_WORDS.get(self.relation, self.relation)} {self.name or self.pid}"


def affiliations(agent: dict[str, Any]) -> list[dict[str, str]]:
    """An agent's affiliations as [{name, ror?}], whether stored as one name (the original form) or a list."""
    value = agent.get("affiliation")
    if not value:
        return []
    return [{"name": value}] if isinstance(value, str) else list(value)


@dataclass
class Record:
    iri: str  # the resolvable PID URL: the RDF subject
    pid: str  # ark:/NAAN/...
    kind: str  # model | dataset | project
    label: str  # the version label ("" for a concept record)
    metadata: dict[str, Any]
    published: datetime
    owner: str
    public: bool = True
    publisher: str = "HPCFair Hub"
    files: list[FileEntry] = field(default_factory=list)
    provenance: list[Link] = field(default_factory=list)  # this version -> its sources
    concept_iri: str = ""
    concept_pid: str = ""
    versions: list[Link] = field(default_factory=list)  # for a concept record: its versions
    # The hub's activity (a job) that generated it, if any: a fragment of the version's own PID URL (``#activity``),
    # described in this record. Never the job's API URL, which only its requester may read.
    activity_iri: str = ""
    export_urls: dict[str, str] = field(default_factory=dict)  # format name -> URL
    previous: Link | None = None  # the upload before this one (of the same artifact; variants left out)
    next: Link | None = None  # the version after it
    # A version the hub made from another version of the same artifact (its ONNX conversion, an optimisation):
    # that source. Such a variant is no new version: previous and next are None (``hub.registry.lineage``).
    variant_of: Link | None = None
    updated: datetime | None = None  # a concept record: when its latest version was published
    latest_label: str = ""  # a concept record: its latest version's label
    withdrawn: datetime | None = None  # a tombstone's record: when it was deleted
    withdrawn_reason: str = ""
    landing_url: str = ""  # the HTML landing page (where the PID sends browsers); "" where unknown
    files_access: str = "open"  # open | restricted | embargoed (the version's files, apart from ``public``)
    available: datetime | None = None  # an embargoed version's files: the date they open

    @property
    def access_right(self) -> str:
        """The COAR / info:eu-repo access right of the files (DataCite ``rightsList``, Dublin Core ``rights``)."""
        if self.is_withdrawn:
            return "info:eu-repo/semantics/closedAccess"
        return {"restricted": "info:eu-repo/semantics/restrictedAccess",
                "embargoed": "info:eu-repo/semantics/embargoedAccess"}.get(self.files_access,
                                                                           "info:eu-repo/semantics/openAccess")

    @property
    def files_conditions(self) -> str:
        """The files' conditions in words; "" for open files."""
        if self.files_access == "restricted":
            return ("Restricted files: the metadata is open; the files are for those the owner grants access "
                    "(request it on the landing page or with `hpcfair request-access`).")
        if self.files_access == "embargoed" and self.available is not None:
            return (f"Embargoed files: the metadata is open; the files open on {self.available.date().isoformat()} "
                    "(until then, for those the owner grants access).")
        return ""

    @property
    def title(self) -> str:
        return self.metadata.get("title") or self.owner

    @property
    def creators(self) -> list[dict[str, Any]]:
        return self.metadata.get("creators") or [{"name": self.owner}]

    @property
    def is_withdrawn(self) -> bool:
        return self.withdrawn is not None

    @property
    def withdrawal(self) -> str:
        """E.g. "Withdrawn on 2026-03-04: superseded. Its files are no longer available." """
        if self.withdrawn is None:
            return ""
        reason = f": {self.withdrawn_reason.rstrip('.')}" if self.withdrawn_reason else ""
        return f"Withdrawn on {self.withdrawn.date().isoformat()}{reason}. Its files are no longer available."

    @property
    def license_uri(self) -> str:
        from ontology.vocab import LICENSE_REFS, SPDX_LICENSES

        license = self.metadata.get("license") or ""
        if not license:
            return ""
        return (LICENSE_REFS if license.startswith("LicenseRef-") else SPDX_LICENSES) + license

    @property
    def year(self) -> int:
        return self.published.year

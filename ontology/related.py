"""Related works named in the metadata (``references``, ``sources``, ``cites``, ``url``): the identifier
each one holds (a DOI, ARK, arXiv id or URL, anywhere in a free-text citation) as a DataCite related
identifier and as a resolvable IRI for RDF and schema.org. Free text without one stays text."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# metadata field -> DataCite relationType (this work -> the related one)
RELATIONS = {"references": "References", "sources": "IsDerivedFrom", "cites": "Cites", "url": "IsSupplementTo"}

_DOI_RE = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>]+)", re.IGNORECASE)
_ARK_RE = re.compile(r"\b(ark:/?\d{5,}/[^\s\"<>?#]+)", re.IGNORECASE)
_ARXIV_RE = re.compile(r"\barxiv[:\s]\s*(\d{4}\.\d{4,5}(?:v\d+)?|[a-z.-]+/\d{7}(?:v\d+)?)", re.IGNORECASE)
_ARXIV_URL_RE = re.compile(r"arxiv\.org/(?:abs|pdf)/(\d{4}\.\d{4,5}(?:v\d+)?)", re.IGNORECASE)
_URL_RE = re.compile(r"https?://[^\s\"<>]+", re.IGNORECASE)
_TRAILING = ".,;:)]}'"


@dataclass(frozen=True)
class RelatedWork:
    text: str  # as the metadata gave it
    relation: str  # DataCite relationType
    identifier: str = ""  # the DataCite relatedIdentifier ("" for free text)
    identifier_type: str = ""  # DOI | ARK | arXiv | URL
    iri: str = ""  # where it resolves

    @property
    def typed(self) -> bool:
        return bool(self.identifier)


def _clean(found: str) -> str:
    return found.rstrip(_TRAILING)


def identify(text: str, relation: str) -> RelatedWork:
    """The first identifier in ``text``: a DOI (also inside doi.org URLs), an ARK (also behind a resolver),
    an arXiv id, else a URL; free text keeps none."""
    doi = _DOI_RE.search(text)
    if doi:
        value = _clean(doi.group(1))
        return RelatedWork(text, relation, value, "DOI", "https://doi.org/" + value)
    ark = _ARK_RE.search(text)
    if ark:
        value = "ark:/" + _clean(ark.group(1))[4:].lstrip("/")
        return RelatedWork(text, relation, value, "ARK", "https://n2t.net/" + value)
    arxiv = _ARXIV_RE.search(text) or _ARXIV_URL_RE.search(text)
    if arxiv:
        value = _clean(arxiv.group(1))
        return RelatedWork(text, relation, f"arXiv:{value}", "arXiv", f"https://arxiv.org/abs/{value}")
    link = _URL_RE.search(text)
    if link:
        value = _clean(link.group(0))
        return RelatedWork(text, relation, value, "URL", value)
    return RelatedWork(text, relation)


def related_works(metadata: dict[str, Any]) -> list[RelatedWork]:
    """Every related work of the metadata, in field order (references, sources, cites, url)."""
    out = []
    for field, relation in RELATIONS.items():
        values = metadata.get(field) or []
        for text in [values] if isinstance(values, str) else values:
            out.append(identify(str(text), relation))
    return out

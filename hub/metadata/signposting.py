"""FAIR Signposting (https://signposting.org/FAIR/), levels 1 and 2: typed links from a landing page to
its PID, metadata, files, type, license and authors, as ``Link`` headers and as a linkset."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from hub.registry.api.serializers import absolute
from ontology.exports import FORMATS, SCHEMA_TYPES
from ontology.record import Record

# The metadata formats a landing page announces with rel="describedby" (one per media type).
DESCRIBED_BY = ["jsonld", "turtle", "rdfxml", "datacite-json", "datacite-xml"]


def linkset_url(pid: str) -> str:
    return absolute(reverse("linkset", args=[pid]))


def links(record: Record) -> list[tuple[str, str, str]]:
    """(target, rel, media type or "") for every signpost of ``record``'s landing page."""
    out: list[tuple[str, str, str]] = [(record.iri, "cite-as", "")]
    for name in DESCRIBED_BY:
        if name in record.export_urls:
            out.append((record.export_urls[name], "describedby", FORMATS[name][0]))
    if "croissant" in record.export_urls:
        out.append((record.export_urls["croissant"], "describedby", FORMATS["croissant"][0]))
    for entry in record.files:
        out.append((entry.url, "item", entry.media_type))
    out.append((f"https://schema.org/{SCHEMA_TYPES[record.kind]}", "type", ""))
    out.append(("https://schema.org/AboutPage", "type", ""))
    if record.license_uri:
        out.append((record.license_uri, "license", ""))
    for person in record.creators:
        if person.get("orcid"):
            out.append((person["orcid"], "author", ""))
    out.append((linkset_url(record.pid), "linkset", "application/linkset+json"))
    return out


def link_header(record: Record) -> str:
    parts = []
    for target, rel, media_type in links(record):
        part = f'<{target}> ; rel="{rel}"'
        if media_type:
            part += f' ; type="{media_type}"'
        parts.append(part)
    return " , ".join(parts)


def linkset(record: Record, landing: str) -> dict[str, Any]:
    """RFC 9264 JSON linkset: the landing page's links, and each file's way back to it (level 2)."""
    context: dict[str, Any] = {"anchor": landing}
    for target, rel, media_type in links(record):
        if rel == "linkset":
            continue
        entry = {"href": target, **({"type": media_type} if media_type else {})}
        context.setdefault(rel, []).append(entry)
    items = [{"anchor": entry.url, "collection": [{"href": landing, "type": "text/html"}]} for entry in record.files]
    described = [{"anchor": url, "describes": [{"href": landing, "type": "text/html"}]}
                 for name, url in record.export_urls.items() if name in DESCRIBED_BY]
    return {"linkset": [context, *items, *described]}

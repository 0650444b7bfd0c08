"""FAIR Signposting (https://signposting.org/FAIR/), levels 1 and 2: typed links from a landing page to
its PID, metadata, files, type, license, authors and neighbouring versions, as ``Link`` headers, as
``<link>`` elements and as an RFC 9264 linkset; and the links back (``describes``, ``collection``) from
each metadata document and file to the landing page."""

from __future__ import annotations

from typing import Any, NamedTuple

from django.urls import reverse

from hub.registry.links import absolute
from ontology.exports import FORMATS, SCHEMA_TYPES
from ontology.record import Record


class Signpost(NamedTuple):
    target: str
    rel: str
    type: str = ""
    profile: str = ""


def linkset_url(pid: str) -> str:
    return absolute(reverse("linkset", args=[pid]))


def links(record: Record) -> list[Signpost]:
    """Every signpost of ``record``'s landing page."""
    out = [Signpost(record.iri, "cite-as")]
    for name, url in record.export_urls.items():  # the metadata formats a landing page announces
        if FORMATS[name].described_by:
            out.append(Signpost(url, "describedby", FORMATS[name].media_type, FORMATS[name].profile))
    for entry in record.files:
        out.append(Signpost(entry.url, "item", entry.media_type))
    out.append(Signpost(f"https://schema.org/{SCHEMA_TYPES[record.kind]}", "type"))
    out.append(Signpost("https://schema.org/AboutPage", "type"))
    if record.license_uri:
        out.append(Signpost(record.license_uri, "license"))
    for agent in record.creators:
        if agent.get("orcid") or agent.get("ror"):
            out.append(Signpost(agent.get("orcid") or agent["ror"], "author"))
    if record.previous:
        out.append(Signpost(record.previous.iri, "predecessor-version"))
    if record.next:
        out.append(Signpost(record.next.iri, "successor-version"))
    out.append(Signpost(linkset_url(record.pid), "linkset", "application/linkset+json"))
    return out


def _attributes(link: Signpost) -> dict[str, str]:
    """A link's ``type`` and ``profile``, where it has them."""
    return {key: value for key, value in (("type", link.type), ("profile", link.profile)) if value}


def _header(signposts: list[Signpost]) -> str:
    return " , ".join(f'<{link.target}> ; rel="{link.rel}"'
                      + "".join(f' ; {key}="{value}"' for key, value in _attributes(link).items())
                      for link in signposts)


# Proxies refuse a response whose headers outgrow their buffer (commonly 8 KB in all). The Link header keeps
# every signpost but the files, and as many files as fit in this many bytes; the linkset, which the header
# names, lists every file (FAIR Signposting's advice for a work of many items).
LINK_HEADER_BUDGET = 6000


def link_header(record: Record) -> str:
    """The landing page's ``Link`` header: every signpost, the files (``item``) as far as
    ``LINK_HEADER_BUDGET`` allows."""
    signposts = links(record)
    size = len(_header([link for link in signposts if link.rel != "item"]).encode())
    dropped = set()
    for link in signposts:
        if link.rel == "item":
            part = len(_header([link]).encode()) + len(" , ")
            if size + part > LINK_HEADER_BUDGET or dropped:
                dropped.add(link)
            else:
                size += part
    return _header([link for link in signposts if link not in dropped])


def back_links(pid: str, landing: str, rel: str) -> str:
    """The ``Link`` header of a metadata document (``describes``) or a file (``collection``): the way back
    to its landing page, and the PID to cite."""
    return _header([Signpost(landing, rel, "text/html"), Signpost(absolute("/" + pid), "cite-as")])


def _target(link: Signpost) -> dict[str, Any]:
    """An RFC 9264 target object: ``href``, ``type``, and ``profile`` as a string (space-separated URIs), the
    form FAIR Signposting's linksets use and its reference parser (the ``signposting`` package) reads."""
    return {"href": link.target, **_attributes(link)}


def linkset(record: Record, landing: str) -> dict[str, Any]:
    """RFC 9264 JSON linkset: the landing page's links, and each file's and metadata document's way back to
    it (level 2)."""
    context: dict[str, Any] = {"anchor": landing}
    for link in links(record):
        if link.rel != "linkset":
            context.setdefault(link.rel, []).append(_target(link))
    home = [{"href": landing, "type": "text/html"}]
    items = [{"anchor": entry.url, "collection": home} for entry in record.files]
    described = [{"anchor": url, "describes": home}
                 for name, url in record.export_urls.items() if FORMATS[name].described_by]
    return {"linkset": [context, *items, *described]}


def linkset_text(body: dict[str, Any]) -> str:
    """A JSON linkset (``linkset``) in RFC 9264's text form, ``application/linkset``: the ``Link`` header's
    syntax, every link with its ``anchor``, one link a line."""
    lines = []
    for context in body["linkset"]:
        for rel, targets in context.items():
            if rel == "anchor":
                continue
            for target in targets:
                line = f'<{target["href"]}> ; rel="{rel}" ; anchor="{context["anchor"]}"'
                line += "".join(f' ; {key}="{target[key]}"' for key in ("type", "profile") if target.get(key))
                lines.append(line)
    return ",\n".join(lines) + "\n"

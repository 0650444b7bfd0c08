"""A record in the other formats research infrastructures read (what Zenodo offers besides DataCite):
Dublin Core (XML, as OAI-PMH's ``oai_dc``), CodeMeta (models and projects), CITATION.cff, DCAT-AP
(RDF/XML) and RO-Crate 1.1 metadata (in the version's zip, and on its own)."""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree as ET

import yaml
from rdflib import BNode, Graph, Literal, URIRef
from rdflib.namespace import DCAT, DCMITYPE, DCTERMS, FOAF, PROV, RDF, SKOS, XSD

from ontology.citations import GENRES, split_name
from ontology.graph import date_term
from ontology.record import Record, affiliations
from ontology.related import related_works

OAI_DC = "http://www.openarchives.org/OAI/2.0/oai_dc/"
DC = "http://purl.org/dc/elements/1.1/"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
OAI_DC_SCHEMA = f"{OAI_DC} http://www.openarchives.org/OAI/2.0/oai_dc.xsd"
CODEMETA_CONTEXT = "https://w3id.org/codemeta/3.0"
CFF_VERSION = "1.2.0"
DCAT_AP = "http://data.europa.eu/r5r/"
ADMS = "http://www.w3.org/ns/adms#"
SPDX = "http://spdx.org/rdf/terms#"
IANA_MEDIA = "http://www.iana.org/assignments/media-types/"


# --- Dublin Core -------------------------------------------------------------------------------------


def dublin_core_element(parent: ET.Element | None, record: Record) -> ET.Element:
    """The record as an ``oai_dc:dc`` element (under ``parent`` when given): the fifteen DC elements."""
    attrs = {f"{{{XSI}}}schemaLocation": OAI_DC_SCHEMA}
    dc = ET.Element(f"{{{OAI_DC}}}dc", attrs) if parent is None else ET.SubElement(parent, f"{{{OAI_DC}}}dc", attrs)
    meta = record.metadata

    def add(tag: str, text: str) -> None:
        if text:
            ET.SubElement(dc, f"{{{DC}}}{tag}").text = text

    add("title", record.title)
    for person in record.creators:
        add("creator", person["name"])
    for agent in meta.get("contributors") or []:
        add("contributor", agent["name"])
    for word in [*meta.get("keywords", []), meta.get("subject", ""), meta.get("discipline", "")]:
        add("subject", word)
    add("description", meta.get("description", ""))
    add("publisher", record.publisher)
    add("date", record.published.date().isoformat())
    add("type", "Dataset" if record.kind == "dataset" else "Software")
    for media_type in sorted({f.media_type for f in record.files}):
        add("format", media_type)
    add("identifier", record.iri)
    add("identifier", record.pid)
    add("rights", record.license_uri)
    add("rights", record.access_right)  # OpenAIRE's info:eu-repo access right (OAI-PMH harvesters read it)
    if record.available is not None and record.files_access == "embargoed":
        add("date", f"info:eu-repo/date/embargoEnd/{record.available.date().isoformat()}")
    for link in record.provenance:
        add("relation", link.words if link.restricted else link.iri)
    for work in related_works(meta):  # a typed one as its resolvable IRI, free text as given
        add("source" if work.relation == "IsDerivedFrom" else "relation", work.iri or work.text)
    return dc


def dublin_core(record: Record) -> str:
    """Dublin Core as an XML document (the ``oai_dc:dc`` record that OAI-PMH harvesters also get)."""
    for prefix, uri in (("oai_dc", OAI_DC), ("dc", DC), ("xsi", XSI)):
        ET.register_namespace(prefix, uri)
    return ET.tostring(dublin_core_element(None, record), encoding="unicode", xml_declaration=True)


# --- CodeMeta ----------------------------------------------------------------------------------------


def _codemeta_agent(agent: dict[str, Any]) -> dict[str, Any]:
    name = split_name(agent)
    if name.literal:
        out: dict[str, Any] = {"@type": "Organization", "name": name.literal}
        if agent.get("ror"):
            out["@id"] = agent["ror"]
        return out
    out = {"@type": "Person", "familyName": name.surname}
    if name.given:
        out["givenName"] = name.given
    if agent.get("orcid"):
        out["@id"] = agent["orcid"]
    found = affiliations(agent)
    if found:
        out["affiliation"] = [{"@type": "Organization", "name": org["name"], **({"@id": org["ror"]}
                                                                               if org.get("ror") else {})}
                              for org in found]
    return out


def codemeta(record: Record) -> dict[str, Any]:
    """CodeMeta 3.0 (``codemeta.json``) of a model or project: software metadata in schema.org terms."""
    meta = record.metadata
    out: dict[str, Any] = {
        "@context": CODEMETA_CONTEXT,
        "@type": "SoftwareSourceCode",
        "@id": record.iri,
        "identifier": record.pid,
        "name": record.title,
        "description": meta.get("description", ""),
        "author": [_codemeta_agent(agent) for agent in record.creators],
        "datePublished": record.published.date().isoformat(),
        "publisher": {"@type": "Organization", "name": record.publisher},
        "url": record.iri,
        "applicationCategory": GENRES[record.kind],
    }
    if record.label:
        out["version"] = record.label
    if record.license_uri:
        out["license"] = record.license_uri
    if meta.get("contributors"):
        out["contributor"] = [_codemeta_agent(agent) for agent in meta["contributors"]]
    if meta.get("keywords"):
        out["keywords"] = meta["keywords"]
    if meta.get("url"):
        out["codeRepository"] = meta["url"]
    dates = meta.get("dates") or {}
    if dates.get("created"):
        out["dateCreated"] = dates["created"].split("/")[0]
    if dates.get("updated") or record.updated:
        out["dateModified"] = (dates.get("updated") or record.updated.date().isoformat()).split("/")[-1]
    if meta.get("framework"):
        out["runtimePlatform"] = meta["framework"]
    if meta.get("funding"):
        out["funding"] = [grant.get("award_number") or grant.get("award_title") or grant["funder"]
                          for grant in meta["funding"]]
        out["funder"] = [{"@type": "Organization", "name": grant["funder"],
                          **({"@id": grant["funder_id"]} if grant.get("funder_id") else {})}
                         for grant in meta["funding"]]
    if record.files:
        out["fileSize"] = f"{sum(f.size for f in record.files) // 1024}KB"
    related = [link.iri for link in record.provenance if not link.restricted]
    related += [w.iri for w in related_works(meta) if w.typed]
    if related:
        out["relatedLink"] = related
    if record.concept_iri and record.concept_iri != record.iri:
        out["isPartOf"] = record.concept_iri
    return out


def codemeta_json(record: Record) -> str:
    return json.dumps(codemeta(record), indent=2, ensure_ascii=False)


# --- CITATION.cff ------------------------------------------------------------------------------------


def _cff_author(agent: dict[str, Any]) -> dict[str, Any]:
    name = split_name(agent)
    if name.literal:
        return {"name": name.literal}
    out: dict[str, Any] = {"family-names": name.family}
    if name.given:
        out["given-names"] = name.given
    if name.particle:
        out["name-particle"] = name.particle
    if agent.get("orcid"):
        out["orcid"] = agent["orcid"]
    found = affiliations(agent)
    if found:
        out["affiliation"] = "; ".join(org["name"] for org in found)
    return out


def citation_cff(record: Record) -> str:
    """CITATION.cff (Citation File Format 1.2.0), the file GitHub and Zenodo read for "Cite this"."""
    meta = record.metadata
    out: dict[str, Any] = {
        "cff-version": CFF_VERSION,
        "message": f"If you use this {record.kind}, please cite it as below.",
        "type": "dataset" if record.kind == "dataset" else "software",
        "title": record.title,
        "authors": [_cff_author(agent) for agent in record.creators],
        "identifiers": [{"type": "other", "value": record.pid, "description": "The ARK of this record."},
                        {"type": "url", "value": record.iri}],
        "url": record.iri,
        "date-released": record.published.date().isoformat(),
    }
    if record.label:
        out["version"] = record.label
    if meta.get("description"):
        out["abstract"] = meta["description"]
    if meta.get("keywords"):
        out["keywords"] = list(meta["keywords"])
    license_ = meta.get("license") or ""
    if license_.startswith("LicenseRef-"):  # CFF takes SPDX ids only: a LicenseRef by its URL
        out["license-url"] = record.license_uri
    elif license_:
        out["license"] = license_
    if meta.get("url") and record.kind != "dataset":
        out["repository-code"] = meta["url"]
    return yaml.safe_dump(out, sort_keys=False, allow_unicode=True, width=120)


# --- DCAT-AP -----------------------------------------------------------------------------------------


def dcat_graph(record: Record) -> Graph:
    """The record as a DCAT-AP ``dcat:Dataset`` (a model, dataset or project: all are data here) with a
    ``dcat:Distribution`` per file."""
    g = Graph()
    for prefix, ns in (("dcat", DCAT), ("dct", DCTERMS), ("foaf", FOAF), ("adms", ADMS), ("spdx", SPDX),
                       ("xsd", XSD), ("prov", PROV), ("skos", SKOS)):
        g.bind(prefix, ns)
    s = URIRef(record.iri)
    meta = record.metadata
    g.add((s, RDF.type, DCAT.Dataset))
    g.add((s, DCTERMS.title, Literal(record.title)))
    g.add((s, DCTERMS.description, Literal(meta.get("description") or record.title)))
    g.add((s, DCTERMS.identifier, Literal(record.pid)))
    g.add((s, DCTERMS.issued, Literal(record.published.isoformat(timespec="seconds"), datatype=XSD.dateTime)))
    # DCAT-AP 3's ranges, typed in the graph itself (its shapes check them without inference): the landing
    # page a foaf:Document, the type a skos:Concept (DCMI's type vocabulary), agents foaf:Agents, media types
    # dct:MediaTypes, the checksum's algorithm an spdx:ChecksumAlgorithm.
    page = URIRef(record.landing_url or record.iri)
    g.add((s, DCAT.landingPage, page))
    g.add((page, RDF.type, FOAF.Document))
    kind = DCMITYPE.Dataset if record.kind == "dataset" else DCMITYPE.Software
    g.add((s, DCTERMS.type, kind))
    g.add((kind, RDF.type, SKOS.Concept))
    g.add((kind, SKOS.inScheme, URIRef(str(DCMITYPE).rstrip("/"))))
    g.add((kind, SKOS.prefLabel, Literal("Dataset" if record.kind == "dataset" else "Software", lang="en")))
    if record.updated:
        g.add((s, DCTERMS.modified, Literal(record.updated.isoformat(timespec="seconds"), datatype=XSD.dateTime)))
    if record.label:
        g.add((s, URIRef(f"{DCAT}version"), Literal(record.label)))  # DCAT 3
    publisher = BNode()
    g.add((s, DCTERMS.publisher, publisher))
    g.add((publisher, RDF.type, FOAF.Agent))
    g.add((publisher, FOAF.name, Literal(record.publisher)))
    for agent in record.creators:
        node = URIRef(agent.get("orcid") or agent.get("ror")) if agent.get("orcid") or agent.get("ror") else BNode()
        g.add((s, DCTERMS.creator, node))
        g.add((node, RDF.type, FOAF.Organization if agent.get("type") == "organization" else FOAF.Person))
        g.add((node, RDF.type, FOAF.Agent))
        g.add((node, FOAF.name, Literal(agent["name"])))
    for word in [*(meta.get("keywords") or []), meta.get("subject"), meta.get("discipline")]:
        if word:
            g.add((s, DCAT.keyword, Literal(word)))
    license_ = URIRef(record.license_uri) if record.license_uri else None
    if license_ is not None:
        g.add((s, DCTERMS.license, license_))
        g.add((license_, RDF.type, DCTERMS.LicenseDocument))
    if (meta.get("dates") or {}).get("collected"):
        g.add((s, DCTERMS.temporal, date_term(g, meta["dates"]["collected"])))
    if record.concept_iri and record.concept_iri != record.iri:
        g.add((s, DCTERMS.isVersionOf, URIRef(record.concept_iri)))
    for link in record.versions:
        g.add((s, DCTERMS.hasVersion, URIRef(link.iri)))
    for link in record.provenance:
        if not link.restricted:
            # Not dct:source: DCAT-AP 3 would have each source described in full as a dcat:Dataset here (a
            # title and a description); its own record, at its PID, does that.
            g.add((s, PROV.wasDerivedFrom, URIRef(link.iri)))
            g.add((s, DCTERMS.relation, URIRef(link.iri)))
    for work in related_works(meta):
        if work.typed:
            g.add((s, DCTERMS.relation, URIRef(work.iri)))
    for entry in record.files:
        dist = URIRef(entry.url)
        g.add((s, DCAT.distribution, dist))
        g.add((dist, RDF.type, DCAT.Distribution))
        g.add((dist, DCTERMS.title, Literal(entry.path)))
        g.add((dist, DCAT.accessURL, dist))
        g.add((dist, DCAT.downloadURL, dist))
        media = URIRef(IANA_MEDIA + entry.media_type)
        g.add((dist, DCAT.mediaType, media))
        g.add((media, RDF.type, DCTERMS.MediaType))
        g.add((dist, DCAT.byteSize, Literal(entry.size, datatype=XSD.nonNegativeInteger)))
        if license_ is not None:
            g.add((dist, DCTERMS.license, license_))
        checksum = BNode()
        g.add((dist, URIRef(SPDX + "checksum"), checksum))
        g.add((checksum, RDF.type, URIRef(SPDX + "Checksum")))
        g.add((checksum, URIRef(SPDX + "algorithm"), URIRef(SPDX + "checksumAlgorithm_sha256")))
        g.add((URIRef(SPDX + "checksumAlgorithm_sha256"), RDF.type, URIRef(SPDX + "ChecksumAlgorithm")))
        g.add((checksum, URIRef(SPDX + "checksumValue"), Literal(entry.sha256, datatype=XSD.hexBinary)))
    return g


def dcat(record: Record) -> str:
    return dcat_graph(record).serialize(format="xml")


# --- RO-Crate ----------------------------------------------------------------------------------------

RO_CRATE = "https://w3id.org/ro/crate/1.1"
RO_CRATE_METADATA = "ro-crate-metadata.json"
# HPC Ontology terms a crate's root carries (metadata field -> term).
RO_CRATE_HPC = {"framework": "hpc:machineLearningFramework", "format": "hpc:format", "parameters": "hpc:params",
                "task": "hub:task", "opset": "hub:onnxOpset"}


def ro_crate(record: Record, *, attached: bool = True) -> dict[str, Any]:
    """RO-Crate 1.1 metadata (``ro-crate-metadata.json``) of a version: the root data entity with its files,
    creators, license, provenance (``isBasedOn``, the generating job) and HPC Ontology terms. Attached (the
    crate is the version's zip): files by their paths; detached (a document on the web): by their URLs."""
    from ontology.vocab import HPC_NAMESPACE, HUB_NAMESPACE

    meta = record.metadata
    root_id = "./" if attached else record.iri
    graph: list[dict[str, Any]] = [{"@id": RO_CRATE_METADATA, "@type": "CreativeWork",
                                    "conformsTo": {"@id": RO_CRATE}, "about": {"@id": root_id}}]
    people = []
    for agent in record.creators:
        ident = agent.get("orcid") or agent.get("ror") or f"#{agent['name'].replace(' ', '-')}"
        people.append({"@id": ident, "@type": "Organization" if agent.get("type") == "organization" else "Person",
                       "name": agent["name"]})
    root: dict[str, Any] = {
        "@id": root_id, "@type": "Dataset", "name": record.title,
        "description": meta.get("description") or record.title,
        "datePublished": record.published.isoformat(timespec="seconds"),
        "identifier": [record.pid, record.iri], "url": record.iri,
        "author": [{"@id": p["@id"]} for p in people],
        "publisher": {"@id": "#publisher"},
        "hasPart": [{"@id": f.path if attached else f.url} for f in record.files],
        "additionalType": GENRES[record.kind],
    }
    if record.label:
        root["version"] = record.label
    if record.license_uri:
        root["license"] = {"@id": record.license_uri}
        graph.append({"@id": record.license_uri, "@type": "CreativeWork", "name": meta.get("license", ""),
                      "identifier": meta.get("license", "")})
    if meta.get("keywords"):
        root["keywords"] = ", ".join(meta["keywords"])
    based_on = [{"@id": link.iri} for link in record.provenance if not link.restricted]
    if based_on:
        root["isBasedOn"] = based_on
    if record.activity_iri:  # the hub's job that made it, as an RO-Crate action
        graph.append({"@id": record.activity_iri, "@type": "CreateAction", "name": "Generated by the hub",
                      "result": {"@id": root_id}, "object": based_on})
    for key, term in RO_CRATE_HPC.items():
        if meta.get(key) is not None:
            root[term] = meta[key]
    graph.append(root)
    graph += people
    graph.append({"@id": "#publisher", "@type": "Organization", "name": record.publisher})
    for f in record.files:
        graph.append({"@id": f.path if attached else f.url, "@type": "File", "name": f.path,
                      "contentSize": str(f.size), "encodingFormat": f.media_type, "hub:sha256": f.sha256,
                      **({"contentUrl": f.url} if attached else {})})
    return {"@context": [f"{RO_CRATE}/context", {"hpc": HPC_NAMESPACE, "hub": HUB_NAMESPACE}], "@graph": graph}


def ro_crate_json(record: Record) -> str:
    """The detached crate: the version's RO-Crate metadata as a document on the web."""
    return json.dumps(ro_crate(record, attached=False), indent=2, ensure_ascii=False)

"""Exports of a record: RDF (JSON-LD, Turtle, RDF/XML, N-Triples), the schema.org record embedded in
landing pages, DataCite (JSON and XML, kernel 4), Croissant (datasets) and citations (BibTeX, text)."""

from __future__ import annotations

import json
import re
from typing import Any
from xml.etree import ElementTree as ET

from ontology.graph import to_graph
from ontology.record import Link, Record
from ontology.vocab import PREFIXES

# format name -> (media type, rdflib serializer or None)
FORMATS: dict[str, tuple[str, str | None]] = {
    "jsonld": ("application/ld+json", "json-ld"),
    "turtle": ("text/turtle", "turtle"),
    "rdfxml": ("application/rdf+xml", "xml"),
    "ntriples": ("application/n-triples", "nt"),
    "datacite-json": ("application/vnd.datacite.datacite+json", None),
    "datacite-xml": ("application/vnd.datacite.datacite+xml", None),
    "croissant": ("application/ld+json", None),
    "schemaorg": ("application/ld+json", None),
    "bibtex": ("application/x-bibtex", None),
    "citation": ("text/plain", None),
}
RESTRICTED_ACCESS = "Restricted: its owner has not made it public."
SCHEMA_TYPES = {"model": "SoftwareSourceCode", "dataset": "Dataset", "project": "SoftwareSourceCode"}
DATACITE_TYPES = {"model": ("Model", "AI model"), "dataset": ("Dataset", "Dataset"),
                  "project": ("Software", "AI project")}
DATACITE_RELATIONS = {"derived_from": "IsDerivedFrom", "converted_from": "IsVariantFormOf",
                      "merged_from": "IsDerivedFrom", "trained_on": "IsDerivedFrom",
                      "revision_of": "IsNewVersionOf"}
DATACITE_NS = "http://datacite.org/schema/kernel-4"
DATACITE_SCHEMA = f"{DATACITE_NS} http://schema.datacite.org/meta/kernel-4.5/metadata.xsd"
XSI = "http://www.w3.org/2001/XMLSchema-instance"
CROISSANT_CONTEXT = {
    "@language": "en", "@vocab": "https://schema.org/", "sc": "https://schema.org/",
    "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "dct": "http://purl.org/dc/terms/", "citeAs": "cr:citeAs", "column": "cr:column",
    "equivalentProperty": "cr:equivalentProperty",
    "conformsTo": "dct:conformsTo", "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"}, "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract", "field": "cr:field", "fileProperty": "cr:fileProperty", "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet", "format": "cr:format", "includes": "cr:includes", "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath", "key": "cr:key", "md5": "cr:md5", "parentField": "cr:parentField",
    "path": "cr:path", "recordSet": "cr:recordSet", "references": "cr:references", "regex": "cr:regex",
    "repeated": "cr:repeated", "replace": "cr:replace", "samplingRate": "cr:samplingRate",
    "separator": "cr:separator", "source": "cr:source", "subField": "cr:subField", "transform": "cr:transform",
}
CROISSANT_TYPES = {"int8": "sc:Integer", "int16": "sc:Integer", "int32": "sc:Integer", "int64": "sc:Integer",
                   "uint8": "sc:Integer", "uint16": "sc:Integer", "uint32": "sc:Integer", "uint64": "sc:Integer",
                   "float16": "sc:Float", "float32": "sc:Float", "float64": "sc:Float", "bfloat16": "sc:Float",
                   "bool": "sc:Boolean", "string": "sc:Text"}


def export(record: Record, name: str) -> str:
    """The record in export format ``name`` (a key of ``FORMATS``) as text."""
    media_type, serializer = FORMATS[name]
    if serializer == "json-ld":
        return to_graph(record).serialize(format="json-ld", context={k: str(v) for k, v in PREFIXES.items()},
                                          indent=2)
    if serializer:
        return to_graph(record).serialize(format=serializer)
    producers = {"datacite-json": lambda r: json.dumps(datacite(r), indent=2), "datacite-xml": datacite_xml,
                 "croissant": lambda r: json.dumps(croissant(r), indent=2),
                 "schemaorg": lambda r: json.dumps(schema_org(r), indent=2), "bibtex": bibtex,
                 "citation": citation}
    return producers[name](record)


# --- schema.org --------------------------------------------------------------------------------------


def _person(person: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"@type": "Person", "name": person["name"]}
    if person.get("orcid"):
        out["@id"] = out["identifier"] = person["orcid"]
    if person.get("affiliation"):
        out["affiliation"] = {"@type": "Organization", "name": person["affiliation"]}
    return out


def _based_on(link: Link) -> dict[str, Any]:
    if link.restricted:  # no @id: the reader may not know which one
        return {"@type": "CreativeWork", "name": link.name, "conditionsOfAccess": RESTRICTED_ACCESS}
    return {"@id": link.iri, "identifier": link.pid, "name": link.name or link.pid}


def schema_org(record: Record) -> dict[str, Any]:
    """The plain schema.org record that landing pages embed (what search engines and FAIR checkers read)."""
    meta = record.metadata
    out: dict[str, Any] = {
        "@context": "https://schema.org/",
        "@type": SCHEMA_TYPES[record.kind],
        "@id": record.iri,
        "name": record.title,
        "description": meta.get("description", ""),
        "identifier": [record.pid, record.iri],
        "url": record.iri,
        "creator": [_person(p) for p in record.creators],
        "publisher": {"@type": "Organization", "name": record.publisher},
        "datePublished": record.published.date().isoformat(),
        "isAccessibleForFree": True,
        "distribution": [{"@type": "DataDownload", "name": f.path, "contentUrl": f.url,
                          "encodingFormat": f.media_type, "contentSize": f"{f.size} B", "sha256": f.sha256}
                         for f in record.files],
    }
    if record.public:
        out["conditionsOfAccess"] = "Public: anyone may read and download it."
    else:
        out["conditionsOfAccess"] = "Private: only the owner and collaborators may read it."
    if record.label:
        out["version"] = record.label
    if meta.get("keywords"):
        out["keywords"] = meta["keywords"]
    if record.license_uri:
        out["license"] = record.license_uri
    if record.provenance:
        out["isBasedOn"] = [_based_on(link) for link in record.provenance]
    if record.concept_iri and record.concept_iri != record.iri:
        out["isPartOf"] = {"@id": record.concept_iri, "identifier": record.concept_pid}
    if meta.get("references"):
        out["citation"] = meta["references"]
    return out


# --- DataCite ----------------------------------------------------------------------------------------


def _identifier(pid: str) -> dict[str, str]:
    return {"identifier": pid, "identifierType": "ARK"}


def datacite(record: Record) -> dict[str, Any]:
    """DataCite metadata (kernel 4, the REST API's attribute names) with every mandatory property."""
    meta = record.metadata
    general, specific = DATACITE_TYPES[record.kind]
    creators = []
    for person in record.creators:
        entry: dict[str, Any] = {"name": person["name"], "nameType": "Personal"}
        if person.get("orcid"):
            entry["nameIdentifiers"] = [{"nameIdentifier": person["orcid"], "nameIdentifierScheme": "ORCID",
                                         "schemeUri": "https://orcid.org"}]
        if person.get("affiliation"):
            entry["affiliation"] = [{"name": person["affiliation"]}]
        creators.append(entry)
    out: dict[str, Any] = {
        "schemaVersion": DATACITE_NS,
        "identifiers": [_identifier(record.pid)],
        "url": record.iri,
        "creators": creators,
        "titles": [{"title": record.title}],
        "publisher": {"name": record.publisher},
        "publicationYear": str(record.year),
        "types": {"resourceTypeGeneral": general, "resourceType": specific},
        "dates": [{"date": record.published.date().isoformat(), "dateType": "Issued"}],
        "descriptions": ([{"description": meta["description"], "descriptionType": "Abstract"}]
                         if meta.get("description") else [])
        + [{"description": f"Provenance: {link.words}.",
            "descriptionType": "Other"} for link in record.provenance if link.restricted],
        "subjects": [{"subject": word} for word in meta.get("keywords", [])],
        "formats": sorted({f.media_type for f in record.files}),
        "sizes": [f"{sum(f.size for f in record.files)} bytes"] if record.files else [],
        "relatedIdentifiers": [
            {"relatedIdentifier": link.pid, "relatedIdentifierType": "ARK",
             "relationType": DATACITE_RELATIONS.get(link.relation, "IsDerivedFrom")}
            for link in record.provenance if not link.restricted
        ] + ([{"relatedIdentifier": record.concept_pid, "relatedIdentifierType": "ARK", "relationType": "IsVersionOf"}]
             if record.concept_pid and record.concept_pid != record.pid else [])
          + [{"relatedIdentifier": link.pid, "relatedIdentifierType": "ARK", "relationType": "HasVersion"}
             for link in record.versions],
    }
    if record.label:
        out["version"] = record.label
    if meta.get("license"):
        out["rightsList"] = [{"rights": meta["license"], "rightsUri": record.license_uri,
                              "rightsIdentifier": meta["license"], "rightsIdentifierScheme": "SPDX",
                              "schemeUri": "https://spdx.org/licenses/"}]
    return out


def datacite_xml(record: Record) -> str:
    """The same metadata as a DataCite kernel-4 XML ``resource``."""
    data = datacite(record)

    # Unqualified tags under a default xmlns: ElementTree cannot combine default_namespace with attributes.
    def sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
        element = ET.SubElement(parent, tag, {k: v for k, v in attrs.items() if v})
        if text is not None:
            element.text = text
        return element

    root = ET.Element("resource", {"xmlns": DATACITE_NS, f"{{{XSI}}}schemaLocation": DATACITE_SCHEMA})
    sub(root, "identifier", record.pid, identifierType="ARK")
    creators = sub(root, "creators")
    for person in data["creators"]:
        creator = sub(creators, "creator")
        sub(creator, "creatorName", person["name"], nameType="Personal")
        for ident in person.get("nameIdentifiers", []):
            sub(creator, "nameIdentifier", ident["nameIdentifier"], nameIdentifierScheme="ORCID",
                schemeURI="https://orcid.org")
        for affiliation in person.get("affiliation", []):
            sub(creator, "affiliation", affiliation["name"])
    sub(sub(root, "titles"), "title", record.title)
    sub(root, "publisher", record.publisher)
    sub(root, "publicationYear", data["publicationYear"])
    sub(root, "resourceType", data["types"]["resourceType"], resourceTypeGeneral=data["types"]["resourceTypeGeneral"])
    if data["subjects"]:
        subjects = sub(root, "subjects")
        for subject in data["subjects"]:
            sub(subjects, "subject", subject["subject"])
    sub(sub(root, "dates"), "date", data["dates"][0]["date"], dateType="Issued")
    if data["relatedIdentifiers"]:
        related = sub(root, "relatedIdentifiers")
        for item in data["relatedIdentifiers"]:
            sub(related, "relatedIdentifier", item["relatedIdentifier"],
                relatedIdentifierType=item["relatedIdentifierType"], relationType=item["relationType"])
    if data["sizes"]:
        sub(sub(root, "sizes"), "size", data["sizes"][0])
    if data["formats"]:
        formats = sub(root, "formats")
        for media_type in data["formats"]:
            sub(formats, "format", media_type)
    if data.get("version"):
        sub(root, "version", data["version"])
    if data.get("rightsList"):
        right = data["rightsList"][0]
        sub(sub(root, "rightsList"), "rights", right["rights"], rightsURI=right["rightsUri"],
            rightsIdentifier=right["rightsIdentifier"], rightsIdentifierScheme="SPDX",
            schemeURI="https://spdx.org/licenses/")
    if data["descriptions"]:
        descriptions = sub(root, "descriptions")
        for item in data["descriptions"]:
            sub(descriptions, "description", item["description"], descriptionType=item["descriptionType"])
    ET.register_namespace("xsi", XSI)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


# --- Croissant ---------------------------------------------------------------------------------------


def _croissant_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def croissant(record: Record) -> dict[str, Any]:
    """Croissant 1.0 JSON-LD for a dataset: its files, and a record set from the record structure."""
    meta = record.metadata
    out: dict[str, Any] = {
        "@context": CROISSANT_CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": "http://mlcommons.org/croissant/1.0",
        "name": _croissant_id(record.title),
        "description": meta.get("description", ""),
        "url": record.iri,
        "sameAs": record.pid,
        "license": record.license_uri,
        "creator": [_person(p) for p in record.creators],
        "datePublished": record.published.date().isoformat(),
        "citeAs": bibtex(record),
        "distribution": [
            {"@type": "cr:FileObject", "@id": _croissant_id(f.path), "name": _croissant_id(f.path),
             "description": f.path, "contentUrl": f.url, "encodingFormat": f.media_type,
             "contentSize": f"{f.size} B", "sha256": f.sha256}
            for f in record.files
        ],
    }
    if record.label:
        out["version"] = _semver(record.label)
    if meta.get("keywords"):
        out["keywords"] = meta["keywords"]
    table = next((f for f in record.files if f.media_type == "text/csv"), None)
    if meta.get("records") and table is not None:
        source = _croissant_id(table.path)
        out["recordSet"] = [{
            "@type": "cr:RecordSet", "@id": "records", "name": "records",
            "description": f"The records of {table.path}.",
            "field": [{"@type": "cr:Field", "@id": f"records/{_croissant_id(item['name'])}",
                       "name": _croissant_id(item["name"]), "description": item.get("description", item["name"]),
                       "dataType": CROISSANT_TYPES.get(item["dtype"], "sc:Text"),
                       "source": {"fileObject": {"@id": source}, "extract": {"column": item["name"]}}}
                      for item in meta["records"]],
        }]
    return out


def _semver(label: str) -> str:
    """Croissant wants MAJOR.MINOR.PATCH; hub labels are freer (``1``, ``1.0``, ``1-onnx``)."""
    numbers = re.findall(r"\d+", label)[:3]
    return ".".join((numbers + ["0", "0", "0"])[:3]) if numbers else "0.0.0"


# --- citations ---------------------------------------------------------------------------------------


def _bibtex_escape(text: str) -> str:
    return re.sub(r"([{}%&$#_])", r"\\\1", text)


def bibtex(record: Record) -> str:
    key = re.sub(r"[^a-z0-9]", "", record.creators[0]["name"].split()[-1].lower()) or "hub"
    key = f"{key}{record.year}{re.sub(r'[^a-z0-9]', '', record.pid.rsplit('/', 1)[-1].lower())}"
    fields = {
        "author": " and ".join(_bibtex_escape(p["name"]) for p in record.creators),
        "title": "{" + _bibtex_escape(record.title) + "}",
        "year": str(record.year),
        "publisher": _bibtex_escape(record.publisher),
        "version": _bibtex_escape(record.label) if record.label else "",
        "howpublished": f"\\url{{{record.iri}}}",
        "note": f"{record.kind.capitalize()}, {record.pid}",
    }
    body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields.items() if value)
    return f"@misc{{{key},\n{body}\n}}\n"


def citation(record: Record) -> str:
    names = record.creators
    authors = ", ".join(p["name"] for p in names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]["name"]
    version = f" (Version {record.label})" if record.label else ""
    return f"{authors} ({record.year}). {record.title}{version} [{record.kind.capitalize()}]. " \
           f"{record.publisher}. {record.iri}\n"

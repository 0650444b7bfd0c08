"""Exports of a record: RDF (JSON-LD, Turtle, RDF/XML, N-Triples), the schema.org record embedded in
landing pages, DataCite (JSON and XML, kernel 4), Croissant (datasets) and citations (BibTeX, CSL-JSON,
RIS and formatted references, ``ontology.citations``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree as ET

from ontology import citations, crosswalks
from ontology.graph import to_graph
from ontology.record import Link, Record, affiliations
from ontology.related import RelatedWork, related_works
from ontology.subjects import Term, fields_of_science
from ontology.vocab import PREFIXES, cf_standard_name_iri

ACCESS_WORDS = {"restricted": "Restricted Access", "embargoed": "Embargoed Access"}  # DataCite rights
RESTRICTED_ACCESS = "Restricted: its owner has not made it public."
SCHEMA_TYPES = {"model": "SoftwareSourceCode", "dataset": "Dataset", "project": "SoftwareSourceCode"}
DATACITE_TYPES = {"model": ("Model", "AI model"), "dataset": ("Dataset", "Dataset"),
                  "project": ("Software", "AI project")}
DATACITE_RELATIONS = {"derived_from": "IsDerivedFrom", "converted_from": "IsVariantFormOf",
                      "merged_from": "IsDerivedFrom", "trained_on": "IsDerivedFrom",
                      "revision_of": "IsNewVersionOf"}
DATACITE_NS = "http://datacite.org/schema/kernel-4"
DATACITE_SCHEMA = f"{DATACITE_NS} http://schema.datacite.org/meta/kernel-4.6/metadata.xsd"
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


def export(record: Record, name: str, style: str | None = None) -> str:
    """The record in export format ``name`` (a key of ``FORMATS``) as text; ``style`` names the citation
    style of ``citation`` (any CSL style, e.g. ``ontology.citations.STYLES``; raises ``citations.UnknownStyle``)."""
    return FORMATS[name].produce(record, style)


# --- schema.org --------------------------------------------------------------------------------------

# A self-contained context: harvesters without network parse the record too (the remote https://schema.org/
# context would be fetched). Properties whose values are links are typed as IRIs, as schema.org's own context does.
SCHEMA_CONTEXT: dict[str, Any] = {
    "@vocab": "https://schema.org/",
    **{name: {"@id": f"https://schema.org/{name}", "@type": "@id"}
       for name in ("url", "contentUrl", "codeRepository", "license", "sameAs")},
}


def _organization(org: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"@type": "Organization", "name": org["name"]}
    if org.get("ror"):
        out["@id"] = out["identifier"] = org["ror"]
    return out


def _person(agent: dict[str, Any]) -> dict[str, Any]:
    """A creator or contributor: a Person (ORCID) or an Organization (ROR), with affiliations."""
    if agent.get("type") == "organization":
        return _organization(agent)
    out: dict[str, Any] = {"@type": "Person", "name": agent["name"]}
    if agent.get("orcid"):
        out["@id"] = out["identifier"] = agent["orcid"]
    found = [_organization(org) for org in affiliations(agent)]
    if found:
        out["affiliation"] = found[0] if len(found) == 1 else found
    return out


def _based_on(link: Link) -> dict[str, Any]:
    if link.restricted:  # no @id: the reader may not know which one
        return {"@type": "CreativeWork", "name": link.name, "conditionsOfAccess": RESTRICTED_ACCESS}
    return {"@id": link.iri, "identifier": link.pid, "name": link.name or link.pid}


def _work(work: RelatedWork) -> dict[str, Any] | str:
    return {"@id": work.iri, "identifier": work.identifier} if work.typed else work.text


def _grant(grant: dict[str, str]) -> dict[str, Any]:
    funder: dict[str, Any] = {"@type": "Organization", "name": grant["funder"]}
    if grant.get("funder_id"):
        funder["@id"] = funder["identifier"] = grant["funder_id"]
    out: dict[str, Any] = {"@type": "MonetaryGrant", "funder": funder}
    for key, name in (("award_number", "identifier"), ("award_title", "name"), ("award_uri", "url")):
        if grant.get(key):
            out[name] = grant[key]
    return out


def _defined_term(term: Term) -> dict[str, Any]:
    return {"@type": "DefinedTerm", "name": term.label, "termCode": term.code,
            "inDefinedTermSet": {"@type": "DefinedTermSet", "name": term.scheme, "url": term.scheme_uri}}


def variables(record: Record) -> list[dict[str, Any]]:
    """A dataset's derived columns as schema.org ``variableMeasured``: name, type, description, unit."""
    out = []
    for item in record.metadata.get("records") or []:
        entry: dict[str, Any] = {"@type": "PropertyValue", "name": item["name"],
                                 "additionalType": _schema_type(item["dtype"])}
        if item.get("description"):
            entry["description"] = item["description"]
        if item.get("unit"):
            entry["unitText"] = item["unit"]
        out.append(entry)
    return out


def scientific_variables(record: Record) -> list[dict[str, Any]]:
    """The HDF5/NetCDF/Zarr variables the hub read, as schema.org ``variableMeasured``: name, unit, the CF
    standard name (``propertyID``, its NERC vocabulary IRI) and long name, dims and shape in the description."""
    out = []
    for unit in record.metadata.get("scientific") or []:
        for item in unit.get("variables") or []:
            entry: dict[str, Any] = {"@type": "PropertyValue", "name": item["name"],
                                     "identifier": f"{unit['path']}:{item['path']}",
                                     "additionalType": _schema_type(item.get("dtype", "")),
                                     "description": _variable_text(item)}
            if item.get("units"):
                entry["unitText"] = item["units"]
            if item.get("standard_name"):
                entry["alternateName"] = item["standard_name"]
                if iri := cf_standard_name_iri(item["standard_name"]):
                    entry["propertyID"] = iri
            out.append(entry)
    return out


def _array_type(dtype: str) -> str:
    """A numpy dtype's Croissant type (float32 -> sc:Float, int16 -> sc:Integer; strings and others sc:Text)."""
    if dtype.startswith(("float", "bfloat", "complex")):
        return "sc:Float"
    if dtype.startswith(("int", "uint")):
        return "sc:Integer"
    return "sc:Boolean" if dtype == "bool" else "sc:Text"


def _schema_type(dtype: str) -> str:
    """A numpy dtype's schema.org data type IRI (float32 -> https://schema.org/Float)."""
    return "https://schema.org/" + _array_type(dtype).removeprefix("sc:")


def _variable_text(item: dict[str, Any]) -> str:
    dims = ", ".join(f"{d}={n}" for d, n in zip(item.get("dims") or [], item.get("shape") or [], strict=False))
    words = [item.get("long_name") or item["name"], f"{item.get('dtype', '')}[{dims}]"]
    if item.get("coordinate"):
        words.append("coordinate")
    return " ".join(w for w in words if w)


def schema_org(record: Record) -> dict[str, Any]:
    """The plain schema.org record that landing pages embed (what search engines and FAIR checkers read)."""
    meta = record.metadata
    files = [{"@type": "DataDownload", "@id": f.url, "name": f.path, "contentUrl": f.url,
              "encodingFormat": f.media_type, "contentSize": f"{f.size} B", "sha256": f.sha256}
             for f in record.files]
    out: dict[str, Any] = {
        "@context": SCHEMA_CONTEXT,
        "@type": SCHEMA_TYPES[record.kind],
        "@id": record.iri,
        "name": record.title,
        "description": meta.get("description", ""),
        "identifier": [record.pid, record.iri],
        "url": record.iri,
        "creator": [_person(p) for p in record.creators],
        "publisher": {"@type": "Organization", "name": record.publisher},
        "datePublished": record.published.date().isoformat(),
        "isAccessibleForFree": record.files_access == "open",
    }
    # schema.org defines distribution (DataDownload) for datasets. Other works list their files as parts
    # (hasPart, where F-UJI and most harvesters look for a creative work's content) and as media.
    if files and record.kind == "dataset":
        out["distribution"] = files
    elif files:
        out["hasPart"] = files
        out["associatedMedia"] = files
    if record.is_withdrawn:
        out["creativeWorkStatus"] = "Withdrawn"
        out["conditionsOfAccess"] = record.withdrawal
    elif record.public:
        out["conditionsOfAccess"] = "Public: anyone may read and download it."
    else:
        out["conditionsOfAccess"] = "Private: only the owner and collaborators may read it."
    if record.files_conditions and not record.is_withdrawn:
        out["conditionsOfAccess"] = record.files_conditions
    if record.available is not None and record.files_access == "embargoed":
        out["availabilityStarts"] = record.available.date().isoformat()
    if record.label:
        out["version"] = record.label
    if meta.get("keywords"):
        out["keywords"] = meta["keywords"]
    about = [_defined_term(term) for term in fields_of_science(meta)]
    if about:
        out["about"] = about
    if record.license_uri:
        out["license"] = record.license_uri
    if meta.get("contributors"):
        out["contributor"] = [{"@type": "Role", "roleName": agent["role"], "contributor": _person(agent)}
                              for agent in meta["contributors"]]
    if meta.get("funding"):
        out["funding"] = [_grant(grant) for grant in meta["funding"]]
    dates = meta.get("dates") or {}
    if dates.get("created"):  # schema.org's dates are single dates: a range's start, or its end
        out["dateCreated"] = dates["created"].split("/")[0]
    if dates.get("updated") or record.updated:
        out["dateModified"] = (dates.get("updated") or record.updated.date().isoformat()).split("/")[-1]
    works = related_works(meta)
    based_on = [_based_on(link) for link in record.provenance]
    based_on += [_work(w) for w in works if w.relation == "IsDerivedFrom"]
    if based_on:
        out["isBasedOn"] = based_on
    cited = [_work(w) for w in works if w.relation in ("References", "Cites")]
    if cited:
        out["citation"] = cited
    if meta.get("url"):
        if record.kind == "dataset":
            out["subjectOf"] = {"@type": "WebPage", "url": meta["url"]}
        else:
            out["codeRepository"] = meta["url"]
    if record.kind == "dataset" and (meta.get("records") or meta.get("scientific")):
        out["variableMeasured"] = variables(record) + scientific_variables(record)
    if record.concept_iri and record.concept_iri != record.iri:
        out["isPartOf"] = {"@id": record.concept_iri, "identifier": record.concept_pid}
    if record.versions:  # a concept's versions are parts too, after its latest files
        out["hasPart"] = [*out.get("hasPart", []),
                          *({"@id": link.iri, "identifier": link.pid, "name": link.name} for link in record.versions)]
    return out


# --- DataCite ----------------------------------------------------------------------------------------

ROR_SCHEME = {"nameIdentifierScheme": "ROR", "schemeUri": "https://ror.org"}


def _identifier(pid: str) -> dict[str, str]:
    return {"identifier": pid, "identifierType": "ARK"}


def _datacite_agent(agent: dict[str, Any]) -> dict[str, Any]:
    """A creator or contributor in the DataCite 4.6 REST form."""
    organization = agent.get("type") == "organization"
    out: dict[str, Any] = {"name": agent["name"], "nameType": "Organizational" if organization else "Personal"}
    if agent.get("orcid"):
        out["nameIdentifiers"] = [{"nameIdentifier": agent["orcid"], "nameIdentifierScheme": "ORCID",
                                   "schemeUri": "https://orcid.org"}]
    if agent.get("ror"):
        out["nameIdentifiers"] = [{"nameIdentifier": agent["ror"], **ROR_SCHEME}]
    found = affiliations(agent)
    if found:
        out["affiliation"] = [{"name": org["name"], **({"affiliationIdentifier": org["ror"],
                                                        "affiliationIdentifierScheme": "ROR",
                                                        "schemeUri": "https://ror.org"} if org.get("ror") else {})}
                              for org in found]
    if agent.get("role"):
        out["contributorType"] = agent["role"]
    return out


def _funder_type(identifier: str) -> str:
    if identifier.startswith("https://ror.org/"):
        return "ROR"
    return "Crossref Funder ID" if "10.13039/" in identifier else "Other"


def _funding_reference(grant: dict[str, str]) -> dict[str, str]:
    out = {"funderName": grant["funder"]}
    if grant.get("funder_id"):
        out["funderIdentifier"] = grant["funder_id"]
        out["funderIdentifierType"] = _funder_type(grant["funder_id"])
    for key, name in (("award_number", "awardNumber"), ("award_uri", "awardUri"), ("award_title", "awardTitle")):
        if grant.get(key):
            out[name] = grant[key]
    return out


def _related(identifier: str, kind: str, relation: str) -> dict[str, str]:
    return {"relatedIdentifier": identifier, "relatedIdentifierType": kind, "relationType": relation}


def datacite(record: Record) -> dict[str, Any]:
    """DataCite metadata in the kernel 4.6 REST API form (``types``, ``creators[].nameType``, ``titles``,
    ``relatedIdentifiers[].relatedIdentifierType``, ...), the PID under ``identifiers``, its URL as ``id``
    and its registration agency as ``agency``."""
    meta = record.metadata
    general, specific = DATACITE_TYPES[record.kind]
    works = related_works(meta)
    dates = [{"date": record.published.date().isoformat(), "dateType": "Issued"}]
    dates += [{"date": when, "dateType": name.capitalize()} for name, when in (meta.get("dates") or {}).items()]
    if record.updated and "updated" not in (meta.get("dates") or {}):
        dates.append({"date": record.updated.date().isoformat(), "dateType": "Updated"})
    if record.withdrawn:
        dates.append({"date": record.withdrawn.date().isoformat(), "dateType": "Withdrawn",
                      **({"dateInformation": record.withdrawn_reason} if record.withdrawn_reason else {})})
    descriptions = [{"description": meta["description"], "descriptionType": "Abstract"}] \
        if meta.get("description") else []
    descriptions += [{"description": f"Provenance: {link.words}.", "descriptionType": "Other"}
                     for link in record.provenance if link.restricted]
    descriptions += [{"description": f"{w.relation}: {w.text}", "descriptionType": "Other"}
                     for w in works if not w.typed]
    if record.is_withdrawn:
        descriptions.append({"description": record.withdrawal, "descriptionType": "Other"})
    subjects = [{"subject": word} for word in meta.get("keywords", [])]  # free keywords: no scheme
    subjects += [{"subject": meta[name]} for name in ("subject", "discipline") if meta.get(name)]  # as given
    subjects += [{"subject": term.label, "subjectScheme": term.scheme, "schemeUri": term.scheme_uri,
                  "classificationCode": term.code} for term in fields_of_science(meta)]  # and as FOS fields
    related = [_related(link.pid, "ARK", DATACITE_RELATIONS.get(link.relation, "IsDerivedFrom"))
               for link in record.provenance if not link.restricted]
    if record.concept_pid and record.concept_pid != record.pid:
        related.append(_related(record.concept_pid, "ARK", "IsVersionOf"))
    if record.previous:
        related.append(_related(record.previous.pid, "ARK", "IsNewVersionOf"))
    if record.next:
        related.append(_related(record.next.pid, "ARK", "IsPreviousVersionOf"))
    related += [_related(link.pid, "ARK", "HasVersion") for link in record.versions]
    related += [_related(w.identifier, w.identifier_type, w.relation) for w in works if w.typed]
    out: dict[str, Any] = {
        # As DOI resolvers' DataCite JSON has them: the identifier as a URL (``id``, what F-UJI reads) and
        # the agency that registered it (for an ARK the hub minted, the hub).
        "id": record.iri,
        "agency": record.publisher,
        "schemaVersion": DATACITE_NS,
        "identifiers": [_identifier(record.pid)],
        "url": record.iri,
        "types": {"resourceTypeGeneral": general, "resourceType": specific},
        "creators": [_datacite_agent(agent) for agent in record.creators],
        "titles": [{"title": record.title}],
        "publisher": {"name": record.publisher},
        "publicationYear": str(record.year),
        "subjects": _unique(subjects),
        "contributors": [_datacite_agent(agent) for agent in meta.get("contributors") or []],
        "dates": dates,
        "relatedIdentifiers": _unique(related),
        "sizes": [f"{sum(f.size for f in record.files)} bytes"] if record.files else [],
        "formats": sorted({f.media_type for f in record.files}),
        "rightsList": [],
        "descriptions": _unique(descriptions),
        "fundingReferences": _unique([_funding_reference(grant) for grant in meta.get("funding") or []]),
    }
    if record.label:
        out["version"] = record.label
    if meta.get("license"):
        out["rightsList"] = [{"rights": meta["license"], "rightsUri": record.license_uri,
                              "rightsIdentifier": meta["license"], "rightsIdentifierScheme": "SPDX",
                              "schemeUri": "https://spdx.org/licenses/"}]
    if record.files_access != "open":  # OpenAIRE's access right, as Zenodo/InvenioRDM write it
        out["rightsList"].append({"rights": ACCESS_WORDS[record.files_access], "rightsUri": record.access_right})
    if record.available is not None and record.files_access == "embargoed":
        out["dates"].append({"date": record.available.date().isoformat(), "dateType": "Available"})
    return out


def _unique(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The schema wants unique items: the same relation or subject named twice appears once."""
    seen, out = set(), []
    for item in items:
        key = json.dumps(item, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(item)
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

    def agent(parent: ET.Element, tag: str, person: dict[str, Any]) -> None:
        node = sub(parent, tag, contributorType=person.get("contributorType", ""))
        sub(node, f"{tag}Name", person["name"], nameType=person["nameType"])
        for ident in person.get("nameIdentifiers", []):
            sub(node, "nameIdentifier", ident["nameIdentifier"], nameIdentifierScheme=ident["nameIdentifierScheme"],
                schemeURI=ident.get("schemeUri", ""))
        for affiliation in person.get("affiliation", []):
            sub(node, "affiliation", affiliation["name"],
                affiliationIdentifier=affiliation.get("affiliationIdentifier", ""),
                affiliationIdentifierScheme=affiliation.get("affiliationIdentifierScheme", ""),
                schemeURI=affiliation.get("schemeUri", ""))

    root = ET.Element("resource", {"xmlns": DATACITE_NS, f"{{{XSI}}}schemaLocation": DATACITE_SCHEMA})
    sub(root, "identifier", record.pid, identifierType="ARK")
    creators = sub(root, "creators")
    for person in data["creators"]:
        agent(creators, "creator", person)
    sub(sub(root, "titles"), "title", record.title)
    sub(root, "publisher", record.publisher)
    sub(root, "publicationYear", data["publicationYear"])
    sub(root, "resourceType", data["types"]["resourceType"], resourceTypeGeneral=data["types"]["resourceTypeGeneral"])
    if data["subjects"]:
        subjects = sub(root, "subjects")
        for subject in data["subjects"]:
            sub(subjects, "subject", subject["subject"], subjectScheme=subject.get("subjectScheme", ""),
                schemeURI=subject.get("schemeUri", ""), classificationCode=subject.get("classificationCode", ""))
    if data["contributors"]:
        contributors = sub(root, "contributors")
        for person in data["contributors"]:
            agent(contributors, "contributor", person)
    dates = sub(root, "dates")
    for item in data["dates"]:
        sub(dates, "date", item["date"], dateType=item["dateType"], dateInformation=item.get("dateInformation", ""))
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
        rights = sub(root, "rightsList")
        for right in data["rightsList"]:  # a licence's SPDX identifier, or an access right's words alone
            sub(rights, "rights", right["rights"], rightsURI=right["rightsUri"],
                rightsIdentifier=right.get("rightsIdentifier", ""),
                rightsIdentifierScheme=right.get("rightsIdentifierScheme", ""), schemeURI=right.get("schemeUri", ""))
    if data["descriptions"]:
        descriptions = sub(root, "descriptions")
        for item in data["descriptions"]:
            sub(descriptions, "description", item["description"], descriptionType=item["descriptionType"])
    if data["fundingReferences"]:
        funding = sub(root, "fundingReferences")
        for item in data["fundingReferences"]:
            node = sub(funding, "fundingReference")
            sub(node, "funderName", item["funderName"])
            if item.get("funderIdentifier"):
                sub(node, "funderIdentifier", item["funderIdentifier"],
                    funderIdentifierType=item["funderIdentifierType"])
            if item.get("awardNumber"):
                sub(node, "awardNumber", item["awardNumber"], awardURI=item.get("awardUri", ""))
            if item.get("awardTitle"):
                sub(node, "awardTitle", item["awardTitle"])
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
        "citeAs": citations.bibtex(record),
        "distribution": [
            {"@type": "cr:FileObject", "@id": _croissant_id(f.path), "name": _croissant_id(f.path),
             "description": f.path, "contentUrl": f.url, "encodingFormat": f.media_type,
             "contentSize": f"{f.size} B", "sha256": f.sha256}
            for f in record.files
        ],
    }
    if record.label or record.latest_label:  # a concept: the version it resolves to
        out["version"] = _semver(record.label or record.latest_label)
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
                       "dataType": _array_type(item["dtype"]),
                       "source": {"fileObject": {"@id": source}, "extract": {"column": item["name"]}}}
                      for item in meta["records"]],
        }]
    sets = _scientific_record_sets(record)
    if sets:
        out["recordSet"] = [*out.get("recordSet", []), *sets]
    return out


def _scientific_record_sets(record: Record) -> list[dict[str, Any]]:
    """One Croissant ``RecordSet`` per HDF5/NetCDF file or Zarr store: a ``Field`` per variable (its dtype's
    type, units, dims and shape in the description), drawn from the file (a store: its root metadata)."""
    paths = {f.path: _croissant_id(f.path) for f in record.files}
    out = []
    for unit in record.metadata.get("scientific") or []:
        source = paths.get(unit["path"]) or paths.get(f"{unit['path']}/zarr.json") \
            or paths.get(f"{unit['path']}/.zgroup")
        if source is None or not unit.get("variables"):
            continue
        base = "variables_" + _croissant_id(unit["path"])  # apart from the FileObject's @id
        fields = []
        for item in unit["variables"]:
            text = _variable_text(item) + (f" in {item['units']}" if item.get("units") else "") \
                + (f"; CF standard_name {item['standard_name']}" if item.get("standard_name") else "")
            fields.append({"@type": "cr:Field", "@id": f"{base}/{_croissant_id(item['path'].strip('/'))}",
                           "name": _croissant_id(item["path"].strip("/")), "description": text,
                           "dataType": _array_type(item.get("dtype", "")),
                           "source": {"fileObject": {"@id": source}}})
        out.append({"@type": "cr:RecordSet", "@id": base, "name": base,
                    "description": f"The variables of {unit['path']} ({unit.get('format')}).", "field": fields})
    return out


def _semver(label: str) -> str:
    """Croissant wants MAJOR.MINOR.PATCH; hub labels are freer (``1``, ``1.0``, ``1-onnx``)."""
    numbers = re.findall(r"\d+", label)[:3]
    return ".".join((numbers + ["0", "0", "0"])[:3]) if numbers else "0.0.0"


# --- the formats -------------------------------------------------------------------------------------

KINDS = frozenset({"model", "dataset", "project"})


@dataclass(frozen=True)
class OaiFormat:
    """How OAI-PMH disseminates a format: its ``metadataPrefix``, schema location and namespace."""

    prefix: str
    schema_location: str  # "namespace schema-URL", as xsi:schemaLocation writes it
    namespace: str


@dataclass(frozen=True)
class Format:
    """One export format, the only place it is spelled: the API's export and its file name, the PID's content
    negotiation, the landing page's signposting (``describedby``), OAI-PMH and the manual all read it."""

    media_type: str
    suffix: str  # the saved file's ending
    produce: Callable[[Record, str | None], str]  # (record, citation style) -> text
    profile: str = ""  # the profile it conforms to (signposting's and content negotiation's ``profile``)
    kinds: frozenset[str] = KINDS  # the kinds of records it describes
    described_by: bool = True  # a landing page announces it with rel="describedby"
    also: tuple[str, ...] = ()  # media types it answers besides its own (JSON ones also application/json)
    oai: OaiFormat | None = None  # offered by OAI-PMH


def _graph(serializer: str) -> Callable[[Record, str | None], str]:
    if serializer == "json-ld":
        return lambda r, _: to_graph(r).serialize(format="json-ld", context={k: str(v) for k, v in PREFIXES.items()},
                                                  indent=2)
    return lambda r, _: to_graph(r).serialize(format=serializer)


def _text(make: Callable[[Record], str]) -> Callable[[Record, str | None], str]:
    return lambda r, _: make(r)


def _json(make: Callable[[Record], Any]) -> Callable[[Record, str | None], str]:
    return lambda r, _: json.dumps(make(r), indent=2)


_RDF_NS = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
FORMATS: dict[str, Format] = {
    "jsonld": Format("application/ld+json", ".jsonld", _graph("json-ld")),
    "turtle": Format("text/turtle", ".ttl", _graph("turtle")),
    "rdfxml": Format("application/rdf+xml", ".rdf", _graph("xml")),
    "ntriples": Format("application/n-triples", ".nt", _graph("nt")),
    "datacite-json": Format("application/vnd.datacite.datacite+json", ".datacite.json", _json(datacite), DATACITE_NS),
    "datacite-xml": Format("application/vnd.datacite.datacite+xml", ".datacite.xml", _text(datacite_xml), DATACITE_NS,
                           oai=OaiFormat("oai_datacite", "http://schema.datacite.org/oai/oai-1.1/ "
                                         "http://schema.datacite.org/oai/oai-1.1/oai.xsd",
                                         "http://schema.datacite.org/oai/oai-1.1/")),
    "croissant": Format("application/ld+json", ".croissant.json", _json(croissant),
                        "http://mlcommons.org/croissant/1.0", kinds=frozenset({"dataset"})),
    "schemaorg": Format("application/ld+json", ".schemaorg.json", _json(schema_org), "https://schema.org/"),
    "bibtex": Format("application/x-bibtex", ".bib", _text(citations.bibtex)),
    "csl-json": Format("application/vnd.citationstyles.csl+json", ".csl.json", _text(citations.csl_json)),
    "ris": Format("application/x-research-info-systems", ".ris", _text(citations.ris)),
    # A reference in any CSL style (?style=, APA by default); what DOI resolvers answer for text/x-bibliography.
    "citation": Format("text/plain", ".txt", lambda r, style: citations.formatted(r, style), described_by=False,
                       also=("text/x-bibliography",)),
    "dublin-core": Format("application/x-dc+xml", ".dc.xml", _text(crosswalks.dublin_core),
                          oai=OaiFormat("oai_dc", crosswalks.OAI_DC_SCHEMA, crosswalks.OAI_DC)),
    "codemeta": Format("application/vnd.codemeta.ld+json", ".codemeta.json", _text(crosswalks.codemeta_json),
                       "https://w3id.org/codemeta/3.0", kinds=frozenset({"model", "project"})),
    "cff": Format("application/yaml", ".cff", _text(crosswalks.citation_cff),  # CITATION.cff
                  "https://citation-file-format.github.io/1.2.0/"),
    # DCAT-AP (the profile tells it from the metadata graph); RDF/XML has no XML Schema: OAI-PMH names DCAT's own.
    "dcat": Format("application/rdf+xml", ".dcat.rdf", _text(crosswalks.dcat), crosswalks.DCAT_AP,
                   oai=OaiFormat("dcat", f"{_RDF_NS} https://www.w3.org/ns/dcat.rdf", _RDF_NS)),
    # RO-Crate metadata, detached (the zip holds it attached).
    "ro-crate": Format("application/ld+json", ".ro-crate-metadata.json", _text(crosswalks.ro_crate_json),
                       crosswalks.RO_CRATE),
}


def names_for(kind: str) -> list[str]:
    """The formats that describe records of ``kind``, in ``FORMATS``' order."""
    return [name for name, found in FORMATS.items() if kind in found.kinds]

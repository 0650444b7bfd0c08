"""The one mapping from a version's record to an RDF graph: HPC Ontology terms first, the hub's own
terms where the HPC Ontology has none, and schema.org / PROV-O / DCTERMS alongside so that generic
FAIR tools understand the record."""

from __future__ import annotations

import json
import re
from typing import Any

from rdflib import BNode, Graph, Literal, URIRef
from rdflib.term import Node

from ontology.fields import MODEL_FAMILIES
from ontology.record import Record, affiliations
from ontology.related import related_works
from ontology.subjects import fields_of_science
from ontology.vocab import DCAT, DCTERMS, HPC, HUB, PROV, RDF, RDFS, SDO, XSD, bind, cf_standard_name_iri

KIND_CLASSES = {
    "model": [HPC.AIModel, SDO.SoftwareSourceCode],
    "dataset": [HPC.Dataset, SDO.Dataset],
    "project": [HPC.Project, SDO.SoftwareSourceCode],
}
# Simple fields: name -> (predicates, datatype or None for plain strings). The first predicate is the one
# the SHACL shapes check.
LITERALS: dict[str, tuple[list[URIRef], URIRef | None]] = {
    "title": ([SDO.name, HPC.name, DCTERMS.title], None),
    "description": ([SDO.description, HPC.description], None),
    "subject": ([HPC.subject], None),
    "discipline": ([HPC.discipline], None),
    "framework": ([HPC.machineLearningFramework], None),
    "format": ([HPC["format"]], None),
    "task": ([HUB.task], None),
    "opset": ([HUB.onnxOpset], XSD.integer),
    "parameters": ([HPC.params], XSD.integer),
    "learning_type": ([HUB.learningType], None),
    "accuracy": ([HPC.accuracy], XSD.double),
    "is_tunable": ([HPC.isTunable], XSD.boolean),
    "supports_accelerator": ([HPC.supportsAccelerator], XSD.boolean),
    "target_machine": ([HPC.targetMachine], None),
    "target_application": ([HPC.targetApplication], None),
    "container_image": ([HUB.containerImage], None),
    "size": ([HUB.totalSize], XSD.integer),
    "record_count": ([HUB.recordCount], XSD.integer),
    "verified": ([HUB.verified], XSD.boolean),
}
# Provenance relation -> predicates (specific first, then the generic ones).
RELATIONS: dict[str, list[URIRef]] = {
    "derived_from": [HPC.wasDerivedFrom, PROV.wasDerivedFrom, SDO.isBasedOn],
    "converted_from": [HUB.convertedFrom, HPC.wasDerivedFrom, PROV.wasDerivedFrom, SDO.isBasedOn],
    "merged_from": [HUB.mergedFrom, HPC.wasDerivedFrom, PROV.wasDerivedFrom, SDO.isBasedOn],
    "trained_on": [HPC.wasDerivedFromDataset, PROV.wasDerivedFrom, SDO.isBasedOn],
    "revision_of": [HPC.wasRevisionOf, PROV.wasRevisionOf, SDO.isBasedOn],
}
HARDWARE_CLASSES = {"cpu": HPC.CPU, "gpu": HPC.GPU, "accelerator": HPC.Accelerator}
# Related works (``ontology.related``) by DataCite relation -> predicates.
WORK_RELATIONS: dict[str, list[URIRef]] = {
    "References": [SDO.citation, DCTERMS.references],
    "Cites": [SDO.citation],
    "IsDerivedFrom": [DCTERMS.source, PROV.wasDerivedFrom, SDO.isBasedOn],
    "IsSupplementTo": [RDFS.seeAlso],
}
DATE_PREDICATES = {"created": [SDO.dateCreated, DCTERMS.created], "updated": [SDO.dateModified, DCTERMS.modified],
                   "available": [DCTERMS.available], "accepted": [DCTERMS.dateAccepted],
                   "copyrighted": [DCTERMS.dateCopyrighted], "submitted": [DCTERMS.dateSubmitted],
                   "valid": [DCTERMS.valid]}


def date_literal(text: str) -> Literal:
    """An ISO 8601 date as the XSD type its precision names: ``xsd:gYear``, ``xsd:gYearMonth``, ``xsd:date``
    or ``xsd:dateTime`` (seconds added where only minutes are given, as ``xsd:dateTime`` needs them)."""
    text = text.strip().replace(" ", "T", 1)
    for pattern, datatype in ((r"\d{4}", XSD.gYear), (r"\d{4}-\d{2}", XSD.gYearMonth),
                              (r"\d{4}-\d{2}-\d{2}", XSD.date)):
        if re.fullmatch(pattern, text):
            return Literal(text, datatype=datatype)
    match = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2})(:\d{2}(?:\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?", text)
    if match is None:
        return Literal(text)
    zone = match.group(3) or ""
    if len(zone) == 5:  # +0100 -> +01:00
        zone = f"{zone[:3]}:{zone[3:]}"
    return Literal(f"{match.group(1)}{match.group(2) or ':00'}{zone}", datatype=XSD.dateTime)


def date_term(g: Graph, text: str) -> Node:
    """A date as a typed literal; a range (``start/end``) as a ``dcterms:PeriodOfTime`` with DCAT's
    ``startDate`` and ``endDate``."""
    if "/" not in text:
        return date_literal(text)
    start, end = text.split("/", 1)
    period = BNode()
    g.add((period, RDF.type, DCTERMS.PeriodOfTime))
    g.add((period, DCAT.startDate, date_literal(start)))
    g.add((period, DCAT.endDate, date_literal(end)))
    g.add((period, RDFS.label, Literal(text)))
    return period


def _literal(value: Any, datatype: URIRef | None) -> Literal:
    return Literal(value, datatype=datatype) if datatype else Literal(str(value))


def to_graph(record: Record, *, prefixes: bool = True) -> Graph:
    """The record as RDF; the subject is the record's PID URL. ``prefixes=False`` binds none (for N-Triples, which
    has no prefixes: binding them is a sixth of the SPARQL store's render)."""
    g = bind(Graph()) if prefixes else Graph()
    s = URIRef(record.iri)
    meta = record.metadata
    for cls in KIND_CLASSES[record.kind]:
        g.add((s, RDF.type, cls))
    g.add((s, RDF.type, PROV.Entity))
    family = MODEL_FAMILIES.get(meta.get("model_family", ""), "")
    if family:
        g.add((s, RDF.type, HUB[family] if family == "Transformer" else HPC[family]))
    for name, (predicates, datatype) in LITERALS.items():
        if meta.get(name) is not None:
            for predicate in predicates:
                g.add((s, predicate, _literal(meta[name], datatype)))
    g.add((s, SDO.identifier, Literal(record.pid)))
    g.add((s, DCTERMS.identifier, Literal(record.pid)))
    g.add((s, SDO.url, URIRef(record.iri)))
    if record.label:
        g.add((s, SDO.version, Literal(record.label)))
        g.add((s, HPC.version, Literal(record.label)))
    published = Literal(record.published.isoformat(timespec="seconds"), datatype=XSD.dateTime)
    g.add((s, SDO.datePublished, published))
    g.add((s, HPC.submitDate, published))
    g.add((s, HPC.submitter, Literal(record.owner)))
    g.add((s, HPC.isPubliclyAccessible, Literal(record.public)))
    g.add((s, SDO.isAccessibleForFree, Literal(record.files_access == "open")))
    if record.files_conditions:
        g.add((s, SDO.conditionsOfAccess, Literal(record.files_conditions)))
    publisher = BNode()
    g.add((s, SDO.publisher, publisher))
    g.add((publisher, RDF.type, SDO.Organization))
    g.add((publisher, SDO.name, Literal(record.publisher)))
    if record.license_uri:
        for predicate in (SDO.license, HPC.license, DCTERMS.license):
            g.add((s, predicate, URIRef(record.license_uri)))
    for word in meta.get("keywords", []):
        g.add((s, SDO.keywords, Literal(word)))
        g.add((s, HPC.keyword, Literal(word)))
    for term in fields_of_science(meta):  # a subject or discipline that names an OECD FOS field, as that term
        node = BNode()
        g.add((s, SDO.about, node))
        g.add((s, DCTERMS.subject, node))
        g.add((node, RDF.type, SDO.DefinedTerm))
        g.add((node, SDO.name, Literal(term.label)))
        g.add((node, SDO.termCode, Literal(term.code)))
        g.add((node, SDO.inDefinedTermSet, URIRef(term.scheme_uri)))
    for work in related_works(meta):
        target = URIRef(work.iri) if work.typed else Literal(work.text)
        for predicate in WORK_RELATIONS[work.relation]:
            g.add((s, predicate, target))
    if meta.get("url") and record.kind != "dataset":
        g.add((s, SDO.codeRepository, URIRef(meta["url"])))
    for position, person in enumerate(meta.get("creators", [])):
        _creator(g, s, person, position)
    for agent in meta.get("contributors") or []:
        role = BNode()
        g.add((s, SDO.contributor, role))
        g.add((role, RDF.type, SDO.Role))
        g.add((role, SDO.roleName, Literal(agent["role"])))
        node = _agent(g, agent)
        g.add((role, SDO.contributor, node))
        g.add((s, DCTERMS.contributor, node))
    for grant in meta.get("funding") or []:
        _grant(g, s, grant)
    for name, when in (meta.get("dates") or {}).items():
        term = date_term(g, when)
        for predicate in DATE_PREDICATES.get(name, [DCTERMS.date]):
            g.add((s, predicate, term))
    if record.updated:
        g.add((s, SDO.dateModified, Literal(record.updated.isoformat(timespec="seconds"), datatype=XSD.dateTime)))
    if record.withdrawn:
        g.add((s, SDO.creativeWorkStatus, Literal("Withdrawn")))
        g.add((s, SDO.conditionsOfAccess, Literal(record.withdrawal)))
        g.add((s, PROV.invalidatedAtTime, Literal(record.withdrawn.isoformat(timespec="seconds"),
                                                  datatype=XSD.dateTime)))
    for direction in ("inputs", "outputs"):
        for position, spec in enumerate(meta.get(direction) or []):
            _tensor(g, s, HUB.input if direction == "inputs" else HUB.output, spec, position)
    for name, value in (meta.get("hyperparameters") or {}).items():
        _pair(g, s, HUB.hyperParameter, HUB.HyperParameter, name, value)
    for name, value in (meta.get("metrics") or {}).items():
        _pair(g, s, HUB.metric, HUB.Metric, name, value)
    for position, item in enumerate(meta.get("records") or []):
        _record_field(g, s, item, position, measured=record.kind == "dataset")
    for unit in meta.get("scientific") or []:
        for item in unit.get("variables") or []:
            _scientific_variable(g, s, unit["path"], item)
    for item in meta.get("benchmarks") or []:
        _benchmark(g, s, item)
    for entry in record.files:
        _file(g, s, entry, [SDO.distribution] if record.kind == "dataset" else [SDO.hasPart, SDO.associatedMedia])
    job = URIRef(record.activity_iri) if record.activity_iri else None
    if job is not None:  # the hub's job, described here: its IRI is a fragment of this version's own
        g.add((s, PROV.wasGeneratedBy, job))
        g.add((s, HPC.wasGeneratedBy, job))
        g.add((job, RDF.type, PROV.Activity))
        g.add((job, RDF.type, HUB.HubActivity))
        g.add((job, RDFS.label, Literal(activity_label(meta))))
        _execution(g, job, meta.get("execution"))
    training = None
    for link in record.provenance:
        target = _restricted(g, link) if link.restricted else URIRef(link.iri)
        for predicate in RELATIONS.get(link.relation, [PROV.wasDerivedFrom]):
            g.add((s, predicate, target))
        if link.relation == "trained_on":  # prov:used belongs to an activity: the training that made it
            if training is None:
                training = BNode()
                g.add((s, PROV.wasGeneratedBy, training))
                g.add((training, RDF.type, PROV.Activity))
                g.add((training, RDFS.label, Literal("training")))
            g.add((training, PROV.used, target))
        elif job is not None:
            g.add((job, PROV.used, target))
    if record.concept_iri and record.concept_iri != record.iri:
        g.add((s, DCTERMS.isVersionOf, URIRef(record.concept_iri)))
    if record.variant_of:  # made by the hub from that version: a variant of it, not a new version
        g.add((s, HUB.variantOf, URIRef(record.variant_of.iri)))
    if record.previous:
        for predicate in (PROV.wasRevisionOf, HPC.wasRevisionOf, DCTERMS.replaces):
            g.add((s, predicate, URIRef(record.previous.iri)))
    if record.next:
        g.add((s, DCTERMS.isReplacedBy, URIRef(record.next.iri)))
    for link in record.versions:
        g.add((s, DCTERMS.hasVersion, URIRef(link.iri)))
    return g


# What a hub job did, by the metadata it recorded (``conversion``, ``optimization``, ...).
ACTIVITY_LABELS = {"conversion": "conversion by the hub", "optimization": "optimisation by the hub",
                   "generation": "export or generation by the hub", "container": "MLCube build by the hub",
                   "training": "fine-tuning by the hub"}


def activity_label(meta: dict[str, Any]) -> str:
    """What the hub's activity that generated a version did, in words."""
    return next((label for key, label in ACTIVITY_LABELS.items() if meta.get(key)), "a job of the hub")


def _execution(g: Graph, activity: URIRef, execution: Any) -> None:
    """Where and when the generating job ran (a batch job: its partition and nodes, hub.jobs.executors)."""
    if not isinstance(execution, dict):
        return
    for predicate, key in ((PROV.startedAtTime, "started"), (PROV.endedAtTime, "ended")):
        if execution.get(key):
            g.add((activity, predicate, Literal(str(execution[key]), datatype=XSD.dateTime)))
    if execution.get("nodes"):
        place = BNode()
        g.add((activity, PROV.atLocation, place))
        g.add((place, RDF.type, PROV.Location))
        job = execution.get("job") or execution.get("slurm_job", "")  # slurm_job: versions published before 0009
        g.add((place, RDFS.label, Literal(f"{execution.get('executor', '')} job {job} on "
                                          f"node(s) {execution['nodes']}, partition {execution.get('partition', '')}")))


def _restricted(g: Graph, link) -> BNode:
    """A source the reader may not see: a blank node that says only that it exists and is restricted."""
    node = BNode()
    g.add((node, RDF.type, PROV.Entity))
    g.add((node, RDF.type, HUB.RestrictedArtifact))
    g.add((node, RDFS.label, Literal(link.name)))
    g.add((node, HUB.artifactKind, Literal(link.kind)))
    return node


def _organization(g: Graph, org: dict[str, str]) -> Node:
    node: Node = URIRef(org["ror"]) if org.get("ror") else BNode()
    g.add((node, RDF.type, SDO.Organization))
    g.add((node, SDO.name, Literal(org["name"])))
    if org.get("ror"):
        g.add((node, SDO.identifier, Literal(org["ror"])))
    return node


def _agent(g: Graph, agent: dict[str, Any]) -> Node:
    """A person (their ORCID iD as IRI) or an organisation (its ROR id), with affiliations."""
    if agent.get("type") == "organization":
        return _organization(g, agent)
    node: Node = URIRef(agent["orcid"]) if agent.get("orcid") else BNode()
    g.add((node, RDF.type, SDO.Person))
    g.add((node, SDO.name, Literal(agent["name"])))
    if agent.get("orcid"):
        g.add((node, SDO.identifier, Literal(agent["orcid"])))
    for org in affiliations(agent):
        g.add((node, SDO.affiliation, _organization(g, org)))
    return node


def _creator(g: Graph, s: Node, person: dict[str, Any], position: int) -> None:
    node = _agent(g, person)
    g.add((s, SDO.creator, node))
    g.add((s, HPC.creator, node))
    g.add((s, DCTERMS.creator, node))


def _grant(g: Graph, s: Node, grant: dict[str, str]) -> None:
    node = BNode()
    g.add((s, SDO.funding, node))
    g.add((node, RDF.type, SDO.MonetaryGrant))
    funder = _organization(g, {"name": grant["funder"], "ror": grant.get("funder_id", "")})
    g.add((node, SDO.funder, funder))
    for key, predicate in (("award_number", SDO.identifier), ("award_title", SDO.name)):
        if grant.get(key):
            g.add((node, predicate, Literal(grant[key])))
    if grant.get("award_uri"):
        g.add((node, SDO.url, URIRef(grant["award_uri"])))


def _record_field(g: Graph, s: Node, item: dict[str, Any], position: int, *, measured: bool) -> None:
    """A column of a dataset: the hub's record field, and schema.org's ``variableMeasured``."""
    node = BNode()
    g.add((s, HUB.recordField, node))
    g.add((node, RDF.type, HUB.RecordField))
    g.add((node, HUB.fieldName, Literal(item["name"])))
    g.add((node, HUB.dtype, Literal(item["dtype"])))
    g.add((node, HUB.position, Literal(position)))
    if item.get("description"):
        g.add((node, SDO.description, Literal(item["description"])))
    if measured:
        g.add((s, SDO.variableMeasured, node))
        g.add((node, RDF.type, SDO.PropertyValue))
        g.add((node, SDO.name, Literal(item["name"])))
        if item.get("unit"):
            g.add((node, SDO.unitText, Literal(item["unit"])))


def _scientific_variable(g: Graph, s: Node, path: str, item: dict[str, Any]) -> None:
    """An HDF5/NetCDF/Zarr variable as schema.org's ``variableMeasured``: name, unit, the CF standard name."""
    node = BNode()
    g.add((s, SDO.variableMeasured, node))
    g.add((node, RDF.type, SDO.PropertyValue))
    g.add((node, SDO.name, Literal(item["name"])))
    g.add((node, SDO.identifier, Literal(f"{path}:{item['path']}")))
    if item.get("units"):
        g.add((node, SDO.unitText, Literal(item["units"])))
    if item.get("standard_name") and (iri := cf_standard_name_iri(item["standard_name"])):
        g.add((node, SDO.propertyID, URIRef(iri)))


def _tensor(g: Graph, s: Node, predicate: URIRef, spec: dict[str, Any], position: int) -> None:
    node = BNode()
    g.add((s, predicate, node))
    g.add((node, RDF.type, HUB.TensorSpec))
    g.add((node, HUB.tensorName, Literal(spec["name"])))
    g.add((node, HUB.dtype, Literal(spec.get("dtype", "float32"))))
    g.add((node, HUB.position, Literal(position)))
    if spec.get("shape") is not None:
        g.add((node, HUB.shape, Literal(json.dumps(spec["shape"]))))


def _pair(g: Graph, s: Node, predicate: URIRef, cls: URIRef, name: str, value: Any) -> None:
    node = BNode()
    g.add((s, predicate, node))
    g.add((node, RDF.type, cls))
    g.add((node, SDO.name, Literal(str(name))))
    g.add((node, SDO.value, Literal(value) if isinstance(value, (int, float, bool)) else Literal(json.dumps(value))))


def _benchmark(g: Graph, s: Node, item: dict[str, Any]) -> None:
    node, hardware = BNode(), BNode()
    info = item["hardware"]
    g.add((s, HUB.benchmark, node))
    g.add((node, RDF.type, HPC.Benchmark))
    g.add((node, HUB.batchSize, Literal(item["batch_size"])))
    g.add((node, HUB.medianExecutionTime, Literal(float(item["median_ms"]), datatype=XSD.double)))
    g.add((node, HUB.p95ExecutionTime, Literal(float(item["p95_ms"]), datatype=XSD.double)))
    if item.get("provider"):
        g.add((node, HUB.executionProvider, Literal(item["provider"])))
    g.add((node, HUB.onHardware, hardware))
    g.add((hardware, RDF.type, HPC.Hardware))
    g.add((hardware, RDF.type, HARDWARE_CLASSES[info["kind"]]))
    for key, predicate in (("gpu_model", HPC.gpuModel), ("cpu_model", HUB.cpuModel), ("vendor", HPC.vendor)):
        if info.get(key):
            g.add((hardware, predicate, Literal(str(info[key]))))
    if info.get("cores"):
        g.add((hardware, HPC.cpuCoreCount, Literal(int(info["cores"]))))
    if info.get("memory_gb"):
        g.add((hardware, HPC.memorySize, Literal(f"{info['memory_gb']} GB")))


def _file(g: Graph, s: Node, entry, predicates: list[URIRef]) -> None:
    """A file (a DataDownload): a dataset's ``distribution``, another work's ``hasPart`` and ``associatedMedia``."""
    node = BNode()
    for predicate in predicates:
        g.add((s, predicate, node))
    g.add((node, RDF.type, SDO.DataDownload))
    if SDO.associatedMedia in predicates:
        g.add((node, RDF.type, SDO.MediaObject))
    g.add((node, RDF.type, HPC.File))
    g.add((node, SDO.name, Literal(entry.path)))
    g.add((node, SDO.contentUrl, URIRef(entry.url)))
    g.add((node, HPC.url, URIRef(entry.url)))
    g.add((node, SDO.encodingFormat, Literal(entry.media_type)))
    g.add((node, HPC.fileFormat, Literal(entry.media_type)))
    g.add((node, SDO.contentSize, Literal(f"{entry.size} B")))
    g.add((node, HPC.fileSize, Literal(entry.size)))
    g.add((node, HUB.sha256, Literal(entry.sha256)))

"""SHACL shapes, generated from the field table so that they and the field checks never disagree, and
a pyshacl check of a record's graph whose violations name the metadata field."""

from __future__ import annotations

from functools import lru_cache

from rdflib import BNode, Graph, Literal, Namespace, URIRef
from rdflib.namespace import SH

from ontology.fields import ARTIFACT_KINDS, FIELDS, MetadataError
from ontology.graph import KIND_CLASSES, LITERALS
from ontology.vocab import HPC, HUB, LICENSE_REFS, RDF, SDO, SPDX_LICENSES, XSD, bind

SHAPES = Namespace(str(HUB) + "shape-")


def _property(g: Graph, shape: URIRef, name: str, path: URIRef, **constraints) -> BNode:
    node = BNode()
    g.add((shape, SH.property, node))
    g.add((node, SH.path, path))
    g.add((node, SH.name, Literal(name)))
    for key, value in constraints.items():
        g.add((node, SH[key], value))
    return node


@lru_cache(maxsize=1)
def shapes_graph() -> Graph:
    g = bind(Graph())
    g.bind("sh", SH)
    person = SHAPES.Person
    g.add((person, RDF.type, SH.NodeShape))
    _property(g, person, "creators", SDO.name, minCount=Literal(1), datatype=XSD.string,
              message=Literal("Every creator needs a name."))
    for kind in ARTIFACT_KINDS:
        shape = SHAPES[kind.capitalize()]
        g.add((shape, RDF.type, SH.NodeShape))
        g.add((shape, SH.targetClass, KIND_CLASSES[kind][0]))
        for name, spec in FIELDS.items():
            if kind not in spec.kinds or name not in LITERALS:
                continue
            predicate, datatype = LITERALS[name][0][0], LITERALS[name][1] or XSD.string
            constraints = {"datatype": datatype, "maxCount": Literal(1)}
            if kind in spec.required:
                constraints["minCount"] = Literal(1)
                constraints["message"] = Literal(f"Required for a {kind}. {spec.help}")
            _property(g, shape, name, predicate, **constraints)
        license_ = _property(g, shape, "license", SDO.license, nodeKind=SH.IRI, maxCount=Literal(1),
                             pattern=Literal(f"^({SPDX_LICENSES}|{LICENSE_REFS}LicenseRef-)"),
                             message=Literal("The license must be an SPDX license or an SPDX LicenseRef-."))
        if "license" in FIELDS and kind in FIELDS["license"].required:
            g.add((license_, SH.minCount, Literal(1)))
        creators = _property(g, shape, "creators", SDO.creator, node=person,
                             message=Literal("Every creator must be a person or an organization with a name."))
        if kind in FIELDS["creators"].required:
            g.add((creators, SH.minCount, Literal(1)))
        _property(g, shape, "identifier", SDO.identifier, minCount=Literal(1), maxCount=Literal(1))
        _property(g, shape, "datePublished", SDO.datePublished, minCount=Literal(1), datatype=XSD.dateTime)
        files = _property(g, shape, "files", SDO.distribution if kind == "dataset" else SDO.associatedMedia)
        _file_shape(g, files)
    return g


def _file_shape(g: Graph, files: BNode) -> None:
    file_shape = SHAPES.File
    g.add((files, SH.node, file_shape))
    g.add((file_shape, RDF.type, SH.NodeShape))
    for predicate, datatype in ((SDO.name, XSD.string), (HUB.sha256, XSD.string), (HPC.fileSize, XSD.integer)):
        _property(g, file_shape, "files", predicate, minCount=Literal(1), maxCount=Literal(1), datatype=datatype)
    _property(g, file_shape, "files", SDO.contentUrl, minCount=Literal(1), nodeKind=SH.IRI)


def check(data: Graph) -> None:
    """Raise ``MetadataError`` (field -> messages) when the graph violates the shapes."""
    from pyshacl import validate

    conforms, report, _ = validate(data, shacl_graph=shapes_graph(), inference="none", advanced=False,
                                   allow_warnings=True)
    if conforms:
        return
    errors: dict[str, list[str]] = {}
    for result in report.subjects(RDF.type, SH.ValidationResult):
        source = report.value(result, SH.sourceShape)
        name = str(shapes_graph().value(source, SH.name) or "metadata")
        message = str(report.value(result, SH.resultMessage) or "Does not match the HPC Ontology shapes.")
        errors.setdefault(name, [])
        if message not in errors[name]:
            errors[name].append(message)
    raise MetadataError(errors)

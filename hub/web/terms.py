"""``/terms``: the hub's own ontology (``ontology/hub-terms.ttl``, the terms the HPC Ontology lacks) at a stable
address of the hub, so that a landing page's Term links work whether or not ``https://w3id.org/hpcfair-hub/terms``
redirects here. Programs get the Turtle file; browsers get one HTML page with an anchor per term
(``/terms#convertedFrom``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from rdflib import Graph
from rdflib.namespace import OWL, RDF, RDFS

from hub.errors import json_error
from hub.metadata.negotiation import choose
from ontology.vocab import HUB_NAMESPACE, TERMS_FILE

OFFERED = ["text/turtle", "text/html"]  # a program that accepts anything gets the Turtle
KINDS = {OWL.Class: "class", OWL.ObjectProperty: "object property", OWL.DatatypeProperty: "datatype property"}


@dataclass(frozen=True)
class Term:
    name: str  # the local name: convertedFrom
    kind: str  # class, object property, datatype property
    label: str
    comment: str
    parents: list[str]  # what it is a sub-class or sub-property of, compact (prov:wasDerivedFrom)


def term_url(iri: str) -> str:
    """Where the hub describes one of its terms (``hub:convertedFrom`` -> ``/terms#convertedFrom``), or
    ``iri`` itself when it is not the hub's."""
    return "/terms#" + iri[len(HUB_NAMESPACE):] if iri.startswith(HUB_NAMESPACE) else iri


def terms() -> list[Term]:
    """The hub's terms as written in ``hub-terms.ttl``, by name."""
    graph = Graph().parse(TERMS_FILE, format="turtle")
    out = []
    for subject, kind in graph.subject_objects(RDF.type):
        if kind not in KINDS or not str(subject).startswith(HUB_NAMESPACE):
            continue
        parents = [graph.namespace_manager.normalizeUri(p) for p in
                   (*graph.objects(subject, RDFS.subClassOf), *graph.objects(subject, RDFS.subPropertyOf))]
        out.append(Term(str(subject)[len(HUB_NAMESPACE):], KINDS[kind], str(graph.value(subject, RDFS.label) or ""),
                        str(graph.value(subject, RDFS.comment) or ""), sorted(parents)))
    return sorted(out, key=lambda term: term.name.lower())


@require_GET
def view(request: HttpRequest) -> HttpResponse:
    """The terms as Turtle or as HTML, by the ``Accept`` header; 406 ``not_acceptable`` for anything else."""
    chosen = choose(request.headers.get("Accept", ""), OFFERED)
    if chosen is None:
        response = json_error(request, "not_acceptable", "The hub's terms are text/turtle or text/html; ask for "
                                                         "one of them (or */*).")
    elif chosen == "text/turtle":
        response = HttpResponse(TERMS_FILE.read_bytes(), content_type="text/turtle; charset=utf-8")
    else:
        response = render(request, "web/terms.html", {"terms": terms(), "namespace": HUB_NAMESPACE})
    response["Vary"] = "Accept"
    return response

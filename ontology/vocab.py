"""Namespaces: the HPC Ontology, the hub's own terms (what the HPC Ontology lacks), and the generic
vocabularies the records are also mapped to (schema.org, PROV-O, DCTERMS)."""

from __future__ import annotations

import re
from pathlib import Path

from rdflib import Graph, Namespace
from rdflib.namespace import DCAT, DCTERMS, PROV, RDF, RDFS, XSD

HPC_NAMESPACE = "https://hpc-fair.github.io/ontology#"
HUB_NAMESPACE = "https://w3id.org/hpcfair-hub/terms#"

HPC = Namespace(HPC_NAMESPACE)
HUB = Namespace(HUB_NAMESPACE)
SDO = Namespace("https://schema.org/")
SPDX_LICENSES = "https://spdx.org/licenses/"
# SPDX ``LicenseRef-…`` ids (terms outside the SPDX list) are named in the hub's own namespace.
LICENSE_REFS = HUB_NAMESPACE.rstrip("#") + "/license/"
ORCID = "https://orcid.org/"

PREFIXES = {"hpc": HPC, "hub": HUB, "schema": SDO, "prov": PROV, "dcterms": DCTERMS, "dcat": DCAT, "rdf": RDF,
            "rdfs": RDFS, "xsd": XSD}

TERMS_FILE = Path(__file__).with_name("hub-terms.ttl")


def bind(graph: Graph) -> Graph:
    for prefix, namespace in PREFIXES.items():
        graph.bind(prefix, namespace, override=True)
    return graph


def hub_terms() -> Graph:
    """The hub's own vocabulary: each term with a label, a comment and its link to the HPC Ontology."""
    return bind(Graph()).parse(TERMS_FILE, format="turtle")


__all__ = ["DCAT", "DCTERMS", "HPC", "HUB", "ORCID", "PROV", "RDF", "RDFS", "SDO", "SPDX_LICENSES", "XSD", "bind",
           "hub_terms"]


def cf_standard_name_iri(name: str) -> str | None:
    """A CF standard name's IRI in the NERC vocabulary server's table; None for a name that is not one."""
    return f"https://vocab.nerc.ac.uk/standard_name/{name}/" if re.fullmatch(r"[A-Za-z0-9_]{1,200}", name) else None

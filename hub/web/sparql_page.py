"""``/sparql`` in a browser: a query page with examples, and results as a table. Machine clients (anything that
does not prefer HTML) get the SPARQL 1.1 protocol endpoint (``hub.metadata.sparql``) unchanged."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt

from hub.metadata import sparql
from hub.metadata.negotiation import choose
from ontology.vocab import PREFIXES

EXAMPLES = [
    ("Models and their frameworks, as uploaded",  # every version the hub made (hub:HubActivity) left out
     "SELECT ?model ?title ?framework WHERE {\n  ?model a hpc:AIModel ; schema:name ?title .\n"
     "  OPTIONAL { ?model hpc:machineLearningFramework ?framework }\n"
     "  FILTER NOT EXISTS { ?model prov:wasGeneratedBy/a hub:HubActivity }  # made by the hub: conversions, "
     "optimisations, fine-tunes…\n} LIMIT 50"),
    ("Datasets and their licenses",
     "SELECT ?dataset ?title ?license WHERE {\n  ?dataset a hpc:Dataset ; schema:name ?title .\n"
     "  OPTIONAL { ?dataset schema:license ?license }\n} LIMIT 50"),
    ("What was converted from what",  # the hub's format conversions only: not a model's training data, nor an MLCube
     "SELECT ?conversion ?source WHERE {\n  ?conversion hub:convertedFrom ?source .\n} LIMIT 50"),
    ("How many of each type", "SELECT ?type (COUNT(?s) AS ?n) WHERE { ?s a ?type } GROUP BY ?type ORDER BY DESC(?n)"),
    ("Is there any model?", "ASK { ?m a hpc:AIModel }"),
]
RESULTS_ACCEPT = "application/sparql-results+json, text/turtle;q=0.9"


def wants_html(request: HttpRequest) -> bool:
    """A browser: it names text/html and prefers it to every result type the endpoint offers (a wildcard
    alone, or no Accept header, is a program)."""
    offered = [*sparql.RESULT_TYPES, *sparql.GRAPH_TYPES, "text/html"]
    return request.method == "GET" and choose(request.headers.get("Accept", ""), offered) == "text/html"


@csrf_exempt
def dispatch(request: HttpRequest) -> HttpResponse:
    return page(request) if wants_html(request) else sparql.endpoint(request)


def page(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("query", "")
    context: dict[str, Any] = {"query": query or EXAMPLES[0][1], "examples": EXAMPLES,
                               "prefixes": sorted((p, str(ns)) for p, ns in PREFIXES.items())}
    if query.strip():
        answer = sparql.endpoint(request, accept=RESULTS_ACCEPT)  # as a client asking for JSON results
        context.update(_shown(answer))
    return render(request, "web/sparql.html", context)


def _shown(answer: HttpResponse) -> dict[str, Any]:
    """What the page shows of the endpoint's answer: a table, a yes/no, a graph's text, or the error."""
    media = answer.get("Content-Type", "").split(";")[0]
    if answer.status_code != 200:
        try:
            return {"error": json.loads(answer.content).get("detail") or "The query failed."}
        except ValueError:
            return {"error": f"The query failed (HTTP {answer.status_code})."}
    if media == "text/turtle":
        return {"graph": answer.content.decode("utf-8", errors="replace")}
    data = json.loads(answer.content)
    if "boolean" in data:
        return {"boolean": data["boolean"]}
    names = data["head"]["vars"]
    rows = [[(row.get(name) or {}).get("value", "") for name in names] for row in data["results"]["bindings"]]
    return {"columns": names, "rows": rows}

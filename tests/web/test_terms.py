"""The hub's own terms at ``/terms`` (Turtle for programs, HTML with an anchor per term for browsers), and the
landing page's Term links to them: a ``hub:`` term's link works on the hub itself, whether or not its w3id
IRI redirects anywhere."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from rdflib import Graph, URIRef
from rdflib.namespace import RDF, RDFS

from ontology.vocab import HUB, TERMS_FILE

pytestmark = pytest.mark.django_db

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize("accept", ["", "*/*", "text/turtle"])
def test_programs_get_the_terms_as_turtle(accept):
    response = Client().get("/terms", HTTP_ACCEPT=accept)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/turtle")
    assert "Accept" in response["Vary"] and response.content == TERMS_FILE.read_bytes()
    graph = Graph().parse(data=response.content, format="turtle")
    assert (HUB.convertedFrom, RDFS.label, None) in graph and (HUB.HubActivity, RDF.type, None) in graph


def test_browsers_get_one_anchor_per_term_and_others_a_406():
    page = Client().get("/terms", HTTP_ACCEPT=BROWSER)
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    text = page.content.decode()
    defined = {str(s)[len(str(HUB)):] for s in Graph().parse(TERMS_FILE, format="turtle").subjects(RDF.type, None)
               if str(s).startswith(str(HUB))}
    assert defined and defined <= set(re.findall(r'<tr id="([^"]+)">', text))
    assert "<code>hub:variantOf</code>" in text and "<code>prov:wasDerivedFrom</code>" in text
    refused = Client().get("/terms", HTTP_ACCEPT="application/pdf")
    assert refused.status_code == 406 and refused.json()["code"] == "not_acceptable"


def test_the_landing_pages_hub_term_links_lead_to_the_hubs_terms(owner, publish):
    _, version = publish(owner, "termed", {"w.bin": b"w"})
    page = Client().get("/" + version.pid, follow=True).content.decode()
    links = re.findall(r'<a class="term" href="([^"]+)">(hub:[^<]+)</a>', page)
    assert links, "the model's task is a hub: term"
    terms = Client().get("/terms", HTTP_ACCEPT=BROWSER).content.decode()
    for href, term in links:
        assert href == "/terms#" + term[len("hub:"):]
        assert f'<tr id="{term[len("hub:"):]}">' in terms
        assert URIRef(str(HUB) + term[len("hub:"):]) in set(Graph().parse(TERMS_FILE, format="turtle").subjects())

"""Content negotiation on the PID (issue 40, points 3 and 4): every media type and profile the PID offers
answers with exactly that type; JSON-LD profiles (Croissant, schema.org) give those documents; XHTML is
well-formed XML; RFC 9264's text linkset; citations (BibTeX, CSL-JSON, RIS, formatted references with a
style) as DOI resolvers serve them."""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree as ET

import pytest
from rdflib import Graph, Literal, URIRef
from signposting.linkheader import find_signposting_http_link

from hub.metadata.negotiation import Offer, choose_offer, same_profile
from hub.registry.resolver import offers
from ontology.vocab import SDO
from tests.metadata.test_fair import HOST, get

pytestmark = pytest.mark.django_db

CROISSANT = "http://mlcommons.org/croissant/1.0"
XHTML = "{http://www.w3.org/1999/xhtml}"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.fixture
def model(owner, publish):
    return publish(owner, "m")[1]


@pytest.fixture
def table(owner, publish):
    return publish(owner, "t", {"t.csv": b"a,b\n1,2\n"}, kind="dataset")[1]


def accept_of(offer: Offer) -> str:
    return offer.media + (f'; profile="{offer.profile}"' if offer.profile else "")


def test_profiles_and_parameters_are_read():
    offered = [Offer("application/ld+json"), Offer("application/ld+json", CROISSANT),
               Offer("application/ld+json", "https://schema.org/")]
    assert choose_offer("application/ld+json", offered)[0] == offered[0]
    assert choose_offer(f'application/ld+json;profile="{CROISSANT}"', offered)[0] == offered[1]
    assert choose_offer('application/ld+json; profile="http://schema.org"', offered)[0] == offered[2]
    assert choose_offer('application/ld+json;profile="https://example.org/other https://schema.org/"',
                        offered)[0] == offered[2]
    assert choose_offer('application/ld+json;profile="http://www.w3.org/ns/json-ld#compacted"',
                        offered)[0] == offered[0]  # a JSON-LD form, not a metadata profile
    assert choose_offer('application/ld+json;profile="https://example.org/other"', offered) is None
    offer, asked = choose_offer('text/x-bibliography; style="apa"; locale=en-US, */*;q=0.1',
                                [Offer("text/html"), Offer("text/x-bibliography")])
    assert offer.media == "text/x-bibliography" and asked.params == {"style": "apa", "locale": "en-US"}
    assert same_profile("https://schema.org/", "http://schema.org") and not same_profile("", "")


@pytest.mark.slow
@pytest.mark.cpu  # every type and profile: over 1 s on a quiet machine
@pytest.mark.parametrize("which", ["model", "dataset", "project", "concept", "tombstone"])
def test_every_offered_type_and_profile_answers_exactly_that_type(anon, owner, publish, model, table, which):
    from hub.registry import services

    kind = which if which in ("model", "dataset", "project") else "model"
    pid = {"model": model.pid, "dataset": table.pid, "concept": model.artifact.pid}.get(which)
    if which == "project":
        from hub.registry.management.commands.hub_demo import EXAMPLE_PROJECT

        files = {path: (EXAMPLE_PROJECT / path).read_bytes() for path in
                 ("mlcube.yaml", "Containerfile", "requirements.txt", "main.py", "workspace/parameters.yaml")}
        pid = publish(owner, "p", files, kind="project")[1].pid
    elif which == "tombstone":
        _, gone = publish(owner, "gone")
        services.delete_version(gone, reason="withdrawn")
        pid = gone.pid
    for offer, _ in offers(kind):
        if which == "tombstone" and offer.media == "application/json":  # its last JSON record, at the PID
            assert anon.get("/" + pid, HTTP_ACCEPT=offer.media).status_code == 410
            continue
        answer = get(anon, pid, accept_of(offer))
        if which == "tombstone" and offer.media in ("text/html", "application/xhtml+xml"):
            assert answer.status_code == 410 and answer["Content-Type"].split(";")[0] == offer.media, offer
            continue
        assert answer.status_code == 200, (offer, answer.status_code)
        content_type = answer["Content-Type"]
        assert content_type.split(";")[0] == offer.media, (offer, content_type)
        if offer.profile and offer.media == "application/ld+json":
            assert f'profile="{offer.profile}"' in content_type and answer["Content-Profile"] == f"<{offer.profile}>"
    assert (Offer("application/ld+json", CROISSANT), "croissant") in offers("dataset")
    assert all(name != "croissant" for _, name in offers("model"))


def test_json_ld_profiles_give_croissant_and_schema_org(anon, model, table):
    croissant = get(anon, table.pid, f'application/ld+json;profile="{CROISSANT}"').json()
    assert croissant["conformsTo"] == CROISSANT and croissant["@type"] == "sc:Dataset"
    for profile in ("https://schema.org/", "http://schema.org"):
        record = get(anon, model.pid, f'application/ld+json; profile="{profile}"').json()
        assert record["@type"] == "SoftwareSourceCode" and record["@context"]["@vocab"] == "https://schema.org/"
    graph = get(anon, model.pid, "application/ld+json")  # no profile: the metadata graph
    assert (URIRef(f"{HOST}/{model.pid}"), SDO.name, Literal("Title of m")) in \
        Graph().parse(data=graph.content, format="json-ld")
    for pid, accept in ((model.pid, f'application/ld+json;profile="{CROISSANT}"'),
                        (table.pid, 'application/ld+json;profile="https://example.org/unknown"')):
        refused = anon.get("/" + pid, HTTP_ACCEPT=accept)
        assert refused.status_code == 406 and refused["X-Error-Code"] == "not_acceptable"
        assert "application/ld+json" in refused.json()["detail"]
    at_export = anon.get(f"/api/v1/records/jsonld/{table.pid}",
                         HTTP_ACCEPT=f'application/ld+json;profile="{CROISSANT}"')
    assert at_export.status_code == 406 and at_export["X-Error-Code"] == "not_acceptable"


def test_xhtml_is_a_well_formed_xhtml_landing_page(anon, model):
    answer = get(anon, model.pid, "application/xhtml+xml")
    assert answer["Content-Type"] == "application/xhtml+xml; charset=utf-8" and "Accept" in answer["Vary"]
    root = ET.fromstring(answer.content)  # noqa: S314 - our own answer: an XML parser is the check
    assert root.tag == f"{XHTML}html"
    [script] = [s for s in root.iter(f"{XHTML}script") if s.get("type") == "application/ld+json"]
    assert json.loads(script.text)["identifier"][0] == model.pid
    links = {(link.get("rel"), link.get("href")) for link in root.iter(f"{XHTML}link")}
    assert ("cite-as", f"{HOST}/{model.pid}") in links
    assert "Title of m" in "".join(root.itertext())
    assert get(anon, model.pid, BROWSER)["Content-Type"].startswith("text/html")  # browsers prefer HTML


def test_xhtml_of_any_markup():
    from hub.web.xhtml import to_xhtml

    html = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>a &amp; b</title></head>'
            '<body><p>one<p>two &nbsp;<br><input disabled><script>if (a < b && c) {}</script>'
            '<ul><li>x<li>y</ul></div><!-- a -- b --></body></html>')
    root = ET.fromstring(to_xhtml(html).encode())  # noqa: S314 - our own output
    assert root.get("{http://www.w3.org/XML/1998/namespace}lang") == "en"
    assert root.find(f"{XHTML}head/{XHTML}title").text == "a & b"
    assert root.find(f".//{XHTML}script").text == "if (a < b && c) {}"
    assert root.find(f".//{XHTML}input").get("disabled") == "disabled"
    assert [li.text for li in root.iter(f"{XHTML}li")] == ["x", "y"]


def test_linkset_in_json_and_in_rfc_9264_text_form(anon, table):
    json_form = get(anon, table.pid, "application/linkset+json")
    assert json_form["Content-Type"] == "application/linkset+json"
    expected = {(target["href"], rel, context["anchor"]) for context in json_form.json()["linkset"]
                for rel, targets in context.items() if rel != "anchor" for target in targets}
    text_form = get(anon, table.pid, "application/linkset")
    assert text_form["Content-Type"] == "application/linkset"
    text = text_form.content.decode()
    lines = text.rstrip("\n").split(",\n")
    assert all(re.fullmatch(r'<[^>]+> ; rel="[^"]+" ; anchor="[^"]+"( ; (type|profile)="[^"]+")*', line)
               for line in lines), lines
    found = {(href, rel, anchor) for href, rel, anchor in
             (re.match(r'<([^>]+)> ; rel="([^"]+)" ; anchor="([^"]+)"', line).groups() for line in lines)}
    assert found == expected
    parsed = find_signposting_http_link([text.replace("\n", " ")], f"{HOST}/linkset/{table.pid}")
    landing = parsed.for_context(f"{HOST}/landing/{table.pid}")  # the signposting package's own reading
    assert str(landing.citeAs.target) == f"{HOST}/{table.pid}" and len(landing.describedBy) == 15
    assert anon.get(f"/linkset/{table.pid}", HTTP_ACCEPT="image/png")["X-Error-Code"] == "not_acceptable"


CITATION_TYPES = {"application/x-bibtex": "@misc{", "application/vnd.citationstyles.csl+json": '"type": "software"',
                  "application/x-research-info-systems": "TY  - COMP", "text/x-bibliography": "(Version 1)",
                  "text/plain": "[Machine learning model]"}


def test_citations_by_negotiation_and_by_their_own_urls(anon, model):
    for media, start in CITATION_TYPES.items():
        answer = get(anon, model.pid, media)
        assert answer.status_code == 200 and answer["Content-Type"].split(";")[0] == media, media
        assert start in answer.content.decode(), media
    chicago = anon.get("/" + model.pid, HTTP_ACCEPT="text/x-bibliography; style=chicago-author-date; locale=en-US")
    assert chicago.status_code == 303
    assert chicago["Location"] == f"{HOST}/api/v1/records/citation/{model.pid}?style=chicago-author-date"
    chicago = get(anon, model.pid, "text/x-bibliography; style=chicago").content.decode()
    assert f". {model.created.year}. Title of M. Machine learning model. V. 1." in chicago
    nature = get(anon, model.pid, "text/x-bibliography; style=nature")  # any CSL style
    assert nature.status_code == 200 and f"Title of m. HPCFair Hub ({model.created.year})." in nature.content.decode()
    refused = anon.get("/" + model.pid, HTTP_ACCEPT="text/x-bibliography; style=no-such-style")
    assert refused.status_code == 406 and "CSL styles repository" in refused.json()["detail"]
    own = "/api/v1/artifacts/alice/m/versions/1/metadata/"
    ieee = anon.get(own + "citation?style=ieee")
    assert ieee.status_code == 200 and ieee["Content-Type"] == "text/plain; charset=utf-8"
    assert "[Online]. Available:" in ieee.content.decode()
    as_bibliography = anon.get(own + "citation", HTTP_ACCEPT="text/x-bibliography; style=harvard")
    assert as_bibliography["Content-Type"] == "text/x-bibliography; charset=utf-8"
    assert "Available at:" in as_bibliography.content.decode()
    bad = anon.get(own + "citation?style=nonsense")
    assert bad.status_code == 400 and bad.json()["code"] == "unknown_style" and bad["X-Error-Code"] == "unknown_style"
    for name, media in (("csl-json", "application/vnd.citationstyles.csl+json"),
                        ("ris", "application/x-research-info-systems"), ("bibtex", "application/x-bibtex")):
        answer = anon.get(own + name)
        assert answer.status_code == 200 and answer["Content-Type"].startswith(media), name
        assert f"{model.artifact.name}-1." in answer["Content-Disposition"]
        assert anon.get(f"/api/v1/records/{name}/{model.artifact.pid}").status_code == 200  # the concept too
    link = get(anon, model.pid, "text/html")["Link"]
    for media in ("application/x-bibtex", "application/vnd.citationstyles.csl+json",
                  "application/x-research-info-systems"):
        assert f'rel="describedby" ; type="{media}"' in link, media


def test_the_landing_page_cites_in_every_style(anon, model):
    html = get(anon, model.pid, "text/html").content.decode()
    for label in ("APA", "Chicago", "IEEE", "Harvard", "BibTeX", "RIS", "CSL-JSON"):
        assert f"<summary>{label}</summary>" in html, label
    assert "[Machine learning model]" in html and "TY  - COMP" in html


LINK = re.compile(r'<([^>]+)>((?:\s*;\s*[a-z]+="[^"]*")+)')


def advertised(anon, pid: str) -> set[tuple[str, str, str, str]]:
    """(rel, target, type, profile) of every typed link the landing page of ``pid`` advertises, in its ``Link``
    header and in its linkset (which has them all: the header may leave out files)."""
    page = get(anon, pid, "text/html")
    header = set()
    for target, params in LINK.findall(page["Link"]):
        found = dict(re.findall(r'([a-z]+)="([^"]*)"', params))
        if found.get("type"):
            header.add((found["rel"], target, found["type"], found.get("profile", "")))
    linkset = get(anon, pid, "application/linkset+json").json()["linkset"][0]
    listed = {(rel, link["href"], link["type"], link.get("profile", "")) for rel, targets in linkset.items()
              if rel != "anchor" for link in targets if link.get("type")}
    assert header - {t for t in header if t[0] == "linkset"} <= listed
    assert {t for t in listed if t[0] != "item"} <= header
    return header | listed


@pytest.mark.slow
@pytest.mark.cpu  # every type and profile: over 1 s on a quiet machine
@pytest.mark.parametrize("which", ["model", "dataset", "project", "onnx", "concept"])
def test_every_advertised_type_and_profile_answers_exactly_that_type(anon, owner, publish, model, table, which,
                                                                      tmp_path):
    """Issue 40's done-criterion: each type (and profile) a page advertises, walked from its signposting, is
    what its URL answers and what the PID answers when asked for it by content negotiation."""
    from tests.web.test_pages import _converted

    pid = {"model": model.pid, "dataset": table.pid, "concept": model.artifact.pid}.get(which)
    if which == "project":
        from hub.registry.management.commands.hub_demo import EXAMPLE_PROJECT

        pid = publish(owner, "p", {path: (EXAMPLE_PROJECT / path).read_bytes()
                                   for path in ("mlcube.yaml", "Containerfile", "main.py")}, kind="project")[1].pid
    elif which == "onnx":
        pid = _converted(owner, model.artifact, model, tmp_path).pid
    links = advertised(anon, pid)
    rels = {rel for rel, *_ in links}
    assert {"describedby", "item", "linkset"} <= rels, rels
    assert sum(rel == "describedby" for rel, *_ in links) == 15  # every export of the kind (codemeta or croissant)
    for rel, target, media, profile in sorted(links):
        accept = media + (f'; profile="{profile}"' if profile else "")
        answer = anon.get(target.replace(HOST, ""), HTTP_ACCEPT=accept)
        assert answer.status_code == 200, (rel, target, answer.status_code)
        assert answer["Content-Type"].split(";")[0].strip() == media, (rel, target, media, answer["Content-Type"])
        if profile:
            assert answer["Content-Profile"] == f"<{profile}>", (target, profile)
        if rel == "describedby":  # the same document by negotiation on the PID
            negotiated = get(anon, pid, accept)
            assert negotiated.status_code == 200 and negotiated["Content-Type"] == answer["Content-Type"], accept
            if profile:
                assert negotiated["Content-Profile"] == f"<{profile}>", accept


@pytest.mark.slow
@pytest.mark.cpu  # a version of many files: over 1 s on a quiet machine
def test_a_version_of_many_files_keeps_its_link_header_within_a_proxys_buffer(anon, owner, publish):
    """The header names every signpost but the files, and the files as far as its budget goes; the linkset
    lists them all."""
    from hub.metadata.signposting import LINK_HEADER_BUDGET

    files = {f"shards/model-{i:05d}-of-00120.safetensors": bytes([i]) * 3 for i in range(120)}
    _, version = publish(owner, "sharded", files)
    header = get(anon, version.pid, "text/html")["Link"]
    assert len(header.encode()) <= LINK_HEADER_BUDGET < 8192
    assert 0 < header.count('rel="item"') < 120 and header.count('rel="describedby"') == 15
    assert f'<{HOST}/linkset/{version.pid}> ; rel="linkset"' in header and 'rel="cite-as"' in header
    linkset = get(anon, version.pid, "application/linkset+json").json()["linkset"][0]
    assert len(linkset["item"]) == 121  # the shards and the README.md the hub wrote (no card was uploaded)
    _, few = publish(owner, "few", {"a.bin": b"a", "b.bin": b"b"})
    assert get(anon, few.pid, "text/html")["Link"].count('rel="item"') == 3  # nothing left out when it fits

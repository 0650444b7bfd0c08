"""OAI-PMH: every verb, every format (oai_dc, oai_datacite, dcat), sets by kind and owner, paging with
resumption tokens, errors, deleted and private records."""

from __future__ import annotations

import re
from xml.etree import ElementTree as ET

import pytest

from hub.registry import services

pytestmark = pytest.mark.django_db

NS = {"o": "http://www.openarchives.org/OAI/2.0/", "dc": "http://purl.org/dc/elements/1.1/",
      "oai_dc": "http://www.openarchives.org/OAI/2.0/oai_dc/", "d": "http://datacite.org/schema/kernel-4",
      "od": "http://schema.datacite.org/oai/oai-1.1/"}


def oai(client, **params) -> ET.Element:
    response = client.get("/oai", params)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/xml")
    return ET.fromstring(response.content)  # noqa: S314 - parsing our own response is the test


def error_code(root: ET.Element) -> str | None:
    error = root.find("o:error", NS)
    return error.get("code") if error is not None else None


@pytest.fixture
def records(owner, publish, settings):
    settings.HUB_OAI_PAGE_SIZE = 3
    versions = [publish(owner, f"model-{i}", {"w.bin": f"weights {i}".encode()})[1] for i in range(5)]
    publish(owner, "table", {"t.csv": b"a,b\n1,2\n"}, kind="dataset")
    publish(owner, "hidden", {"h.bin": b"secret"}, visibility="private")
    services.delete_version(versions[0], reason="withdrawn")
    return versions


def test_identify_formats_and_sets(anon, records):
    identify = oai(anon, verb="Identify").find("o:Identify", NS)
    assert identify.find("o:protocolVersion", NS).text == "2.0"
    assert identify.find("o:deletedRecord", NS).text == "persistent"
    assert identify.find("o:baseURL", NS).text.endswith("/oai")
    formats = oai(anon, verb="ListMetadataFormats").findall(".//o:metadataPrefix", NS)
    assert [f.text for f in formats] == ["oai_dc", "oai_datacite", "dcat"]
    sets = oai(anon, verb="ListSets").findall(".//o:setSpec", NS)
    assert [s.text for s in sets] == ["kind:model", "kind:dataset", "kind:project", "owner:alice"]


def test_list_records_pages_with_resumption_tokens(anon, records):
    seen, token, pages = [], None, 0
    while True:
        params = {"resumptionToken": token} if token else {"metadataPrefix": "oai_dc"}
        root = oai(anon, verb="ListRecords", **params)
        assert error_code(root) is None, ET.tostring(root)
        listing = root.find("o:ListRecords", NS)
        for record in listing.findall("o:record", NS):
            seen.append(record.find("o:header/o:identifier", NS).text)
        pages += 1
        token_node = listing.find("o:resumptionToken", NS)
        assert token_node is None or token_node.get("completeListSize") == "6"
        token = token_node.text if token_node is not None else None
        if not token:
            break
    assert pages == 2 and len(seen) == len(set(seen)) == 6  # 5 models + 1 dataset; the private one is absent
    assert not any("hidden" in s for s in seen)


def test_records_in_both_formats_and_deleted_headers(anon, records):
    live = records[1]
    identifier = f"oai:h-127-0-0-1.local:{live.pid}"
    dc = oai(anon, verb="GetRecord", identifier=identifier, metadataPrefix="oai_dc")
    assert dc.find(".//dc:title", NS).text == "Title of model-1"
    assert dc.find(".//dc:rights", NS).text == "https://spdx.org/licenses/MIT"
    assert {i.text for i in dc.findall(".//dc:identifier", NS)} >= {live.pid}
    datacite = oai(anon, verb="GetRecord", identifier=identifier, metadataPrefix="oai_datacite")
    resource = datacite.find(".//od:payload/d:resource", NS)
    assert resource.find("d:identifier", NS).text == live.pid
    assert resource.find("d:creators/d:creator/d:creatorName", NS).text == "Alice Example"
    deleted = oai(anon, verb="GetRecord", identifier=f"oai:h-127-0-0-1.local:{records[0].pid}", metadataPrefix="oai_dc")
    header = deleted.find(".//o:header", NS)
    assert header.get("status") == "deleted" and deleted.find(".//o:metadata", NS) is None


def test_sets_per_owner_and_dcat_records(anon, records, other, publish):
    publish(other, "theirs", {"x.bin": b"theirs"})
    sets = [s.text for s in oai(anon, verb="ListSets").findall(".//o:setSpec", NS)]
    assert sets[3:] == sorted(["owner:alice", f"owner:{other.username}"])
    mine = oai(anon, verb="ListIdentifiers", metadataPrefix="oai_dc", set=f"owner:{other.username}")
    [header] = mine.findall(".//o:header", NS)
    assert [s.text for s in header.findall("o:setSpec", NS)] == ["kind:model", f"owner:{other.username}"]
    assert error_code(oai(anon, verb="ListRecords", metadataPrefix="oai_dc", set="owner:nobody")) == "noRecordsMatch"
    from django.contrib.auth import get_user_model

    odd = get_user_model().objects.create_user("odd@example.org", password="x")  # @ is not in a setSpec
    _, odd_version = publish(odd, "odd", {"o.bin": b"odd"})
    specs = [s.text for s in oai(anon, verb="ListSets").findall(".//o:setSpec", NS)]
    assert all(re.fullmatch(r"[A-Za-z0-9\-_.!~*'()]+(:[A-Za-z0-9\-_.!~*'()]+)*", spec) for spec in specs)
    assert "owner:odd@example.org" not in specs
    odd_record = oai(anon, verb="GetRecord", identifier=f"oai:h-127-0-0-1.local:{odd_version.pid}",
                     metadataPrefix="oai_dc")
    assert [s.text for s in odd_record.findall(".//o:header/o:setSpec", NS)] == ["kind:model"]
    from rdflib import Graph, URIRef

    identifier = header.find("o:identifier", NS).text
    found = oai(anon, verb="GetRecord", identifier=identifier, metadataPrefix="dcat")
    rdf = found.find(".//o:metadata/{http://www.w3.org/1999/02/22-rdf-syntax-ns#}RDF", NS)
    graph = Graph().parse(data=ET.tostring(rdf), format="xml")
    [subject] = graph.subjects(None, URIRef("http://www.w3.org/ns/dcat#Dataset"))
    assert str(subject).endswith("/" + identifier.split(":", 2)[2])  # the PID URL of the record's PID


def test_selective_harvesting(anon, records):
    datasets = oai(anon, verb="ListIdentifiers", metadataPrefix="oai_dc", set="kind:dataset")
    assert len(datasets.findall(".//o:header", NS)) == 1
    future = oai(anon, verb="ListIdentifiers", metadataPrefix="oai_dc", **{"from": "2999-01-01"})
    assert error_code(future) == "noRecordsMatch"
    today = oai(anon, verb="ListIdentifiers", metadataPrefix="oai_dc", until="2999-12-31")
    assert len(today.findall(".//o:header", NS)) == 3  # the first page


@pytest.mark.parametrize(("params", "code"), [
    ({"verb": "Explode"}, "badVerb"),
    ({}, "badVerb"),
    ({"verb": "ListRecords"}, "badArgument"),
    ({"verb": "ListRecords", "metadataPrefix": "marc21"}, "cannotDisseminateFormat"),
    ({"verb": "ListRecords", "metadataPrefix": "oai_dc", "from": "yesterday"}, "badArgument"),
    ({"verb": "ListRecords", "resumptionToken": "not-a-token"}, "badResumptionToken"),
    ({"verb": "GetRecord", "identifier": "oai:h-127-0-0-1.local:ark:/99999/fk4nope", "metadataPrefix": "oai_dc"},
     "idDoesNotExist"),
    ({"verb": "Identify", "extra": "1"}, "badArgument"),
    ({"verb": "ListRecords", "metadataPrefix": "oai_dc", "set": "kind:workflow"}, "noRecordsMatch"),
    ({"verb": "ListIdentifiers", "metadataPrefix": "oai_dc", "set": "community:nope"}, "noRecordsMatch"),
])
def test_errors_are_oai_errors(anon, records, params, code):
    assert error_code(oai(anon, **params)) == code


def test_private_records_cannot_be_fetched(anon, owner):
    from hub.registry.models import Version

    hidden = Version.objects.filter(artifact__visibility="private").first()
    assert hidden is None or error_code(oai(anon, verb="GetRecord", identifier=f"oai:h-127-0-0-1.local:{hidden.pid}",
                                            metadataPrefix="oai_dc")) == "idDoesNotExist"

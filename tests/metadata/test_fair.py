"""FAIR completeness through the real pages and exports (issue 23): rich metadata in every format, checked
against DataCite's schema; version relations; the PID as a resolver (303); tombstones that keep their
records; concept PIDs without a version; back-links and an RFC 9264 linkset; the SPARQL service
description; OAI identifiers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest
import xmlschema
from rdflib import Graph, Literal, URIRef
from rdflib.namespace import DCTERMS, PROV, RDF

from hub.registry import services
from ontology.fields import MetadataError, validate
from ontology.vocab import SDO
from tests.conftest import client_for, multipart_file

pytestmark = pytest.mark.django_db

HOST = "http://127.0.0.1:8000"
SCHEMAS = Path(__file__).with_name("schemas")
DATACITE = "{http://datacite.org/schema/kernel-4}"
CSV = b"time,temperature,station\n0,271.5,a\n1,272.0,b\n"
RICH = {
    "title": "Station temperatures", "description": "Hourly temperatures.", "license": "CC-BY-4.0",
    "creators": [{"name": "Oak Ridge National Laboratory", "type": "organization", "ror": "01qz5mb56"},
                 {"name": "Ada Lovelace", "orcid": "0000-0002-1825-0097",
                  "affiliation": [{"name": "ORNL", "ror": "https://ror.org/01qz5mb56"}]}],
    "contributors": [{"name": "Grace Hopper", "role": "data curator"},
                     {"name": "OLCF", "type": "organization", "role": "HostingInstitution"}],
    "funding": [{"funder": "U.S. Department of Energy", "funder_id": "https://ror.org/01bj3aw27",
                 "award_number": "DE-SC0021293", "award_title": "HPC-FAIR"}],
    "dates": {"created": "2024-05-01", "available": "2024-06", "collected": "2020-01-01/2021-06-30",
              "valid": "2024-05-01 12:30+0100"},
    "references": ["Lovelace, A. (2024). Clouds. Nature 1, doi:10.1038/s41586-024-00001-x.",
                   "A paper without an identifier"],
    "sources": ["ark:/12345/x5data", "arXiv:2401.00001"],
    "cites": ["https://doi.org/10.5281/zenodo.1234"],
    "subject": "climate science", "discipline": "earth sciences", "url": "https://example.org/stations",
    "records": [{"name": "temperature", "unit": "K", "description": "Air temperature at 2 m"}],
}


def datacite_schema() -> jsonschema.Draft201909Validator:
    """DataCite 4.6 (tests/metadata/schemas/README.md) plus the REST API's ``identifiers``, which carries the
    ARK, as DataCite's own JSON schema defines it, and the ``id`` and ``agency`` of resolvers' DataCite JSON."""
    schema = json.loads((SCHEMAS / "datacite-v4.6.json").read_text())
    schema["properties"]["identifiers"] = {"type": "array", "uniqueItems": True, "items": {
        "type": "object", "additionalProperties": False, "required": ["identifier", "identifierType"],
        "properties": {"identifier": {"type": "string"}, "identifierType": {"type": "string"}}}}
    # DataCite JSON as DOI resolvers serve it (crosscite's form) also has the identifier as a URL and its agency.
    schema["properties"]["id"] = {"type": "string", "format": "uri"}
    schema["properties"]["agency"] = {"type": "string", "minLength": 1}
    return jsonschema.Draft201909Validator(schema)


def assert_valid_datacite(record: dict) -> None:
    errors = [f"{e.json_path}: {e.message}" for e in datacite_schema().iter_errors(record)]
    assert not errors, errors


def publish_api(api, name: str, files: dict[str, bytes], metadata: dict, kind: str = "dataset") -> dict:
    base = f"/api/v1/artifacts/alice/{name}/"
    if api.get(base).status_code == 404:
        assert api.post("/api/v1/artifacts/", {"kind": kind, "name": name}, format="json").status_code == 201
    response = api.post(base + "versions/", {"files": [multipart_file(n, d) for n, d in files.items()],
                                             "metadata": json.dumps(metadata)}, format="multipart")
    assert response.status_code == 201, response.content
    return response.json()


def get(client, pid: str, accept: str):
    """What a PID answers for ``accept``, following the resolver's 303."""
    first = client.get("/" + pid, HTTP_ACCEPT=accept)
    assert first.status_code == 303, (pid, accept, first.status_code)
    return client.get(first["Location"].replace(HOST, ""), HTTP_ACCEPT=accept)


def embedded(html: str) -> dict:
    [text] = re.findall(r'<script type="application/ld\+json">(.*?)</script>', html, re.S)
    return json.loads(text)


@pytest.fixture
def rich(api):
    return publish_api(api, "stations", {"data.csv": CSV}, RICH)


def test_people_funding_dates_and_related_works_in_datacite(anon, rich):
    record = get(anon, rich["pid"], "application/vnd.datacite.datacite+json").json()
    assert_valid_datacite(record)
    assert record["id"] == rich["pid_url"] and record["agency"] == "HPCFair Hub"  # who registered the ARK
    org, person = record["creators"]
    assert org["nameType"] == "Organizational"
    assert org["nameIdentifiers"] == [{"nameIdentifier": "https://ror.org/01qz5mb56", "nameIdentifierScheme": "ROR",
                                       "schemeUri": "https://ror.org"}]
    assert person["nameType"] == "Personal"
    assert person["affiliation"][0]["affiliationIdentifier"] == "https://ror.org/01qz5mb56"
    assert [(c["name"], c["contributorType"], c["nameType"]) for c in record["contributors"]] == [
        ("Grace Hopper", "DataCurator", "Personal"), ("OLCF", "HostingInstitution", "Organizational")]
    assert record["fundingReferences"] == [{
        "funderName": "U.S. Department of Energy", "funderIdentifier": "https://ror.org/01bj3aw27",
        "funderIdentifierType": "ROR", "awardNumber": "DE-SC0021293", "awardTitle": "HPC-FAIR"}]
    assert {d["dateType"] for d in record["dates"]} == {"Issued", "Created", "Available", "Collected", "Valid"}
    assert {"date": "2020-01-01/2021-06-30", "dateType": "Collected"} in record["dates"]  # a range, as DataCite has
    # Keywords are free subjects; the subject and discipline as given, and the OECD FOS field they name.
    assert record["subjects"] == [
        {"subject": "climate science"}, {"subject": "earth sciences"},
        {"subject": "Earth and related environmental sciences",
         "subjectScheme": "Fields of Science and Technology (FOS)",
         "schemeUri": "http://www.oecd.org/science/inno/38235147.pdf", "classificationCode": "1.5"}]
    related = {(r["relatedIdentifier"], r["relatedIdentifierType"], r["relationType"])
               for r in record["relatedIdentifiers"]}
    assert {("10.1038/s41586-024-00001-x", "DOI", "References"), ("ark:/12345/x5data", "ARK", "IsDerivedFrom"),
            ("arXiv:2401.00001", "arXiv", "IsDerivedFrom"), ("10.5281/zenodo.1234", "DOI", "Cites"),
            ("https://example.org/stations", "URL", "IsSupplementTo")} <= related
    assert {"subject": "climate science"} in record["subjects"] and {"subject": "earth sciences"} in record["subjects"]
    assert {"description": "References: A paper without an identifier", "descriptionType": "Other"} in \
        record["descriptions"]
    oai = anon.get("/oai", {"verb": "GetRecord", "metadataPrefix": "oai_dc",
                            "identifier": f"oai:h-127-0-0-1.local:{rich['pid']}"}).content
    dc: dict[str, list[str]] = {}
    for node in ET.fromstring(oai).iter():  # noqa: S314
        if node.tag.startswith("{http://purl.org/dc/"):
            dc.setdefault(node.tag.split("}")[1], []).append(node.text)
    assert "Grace Hopper" in dc["contributor"] and "climate science" in dc["subject"]
    assert "https://doi.org/10.5281/zenodo.1234" in dc["relation"]
    assert "https://n2t.net/ark:/12345/x5data" in dc["source"]
    xml = ET.fromstring(get(anon, rich["pid"], "application/vnd.datacite.datacite+xml").content)  # noqa: S314
    assert xml.find(f"{DATACITE}creators/{DATACITE}creator/{DATACITE}creatorName").get("nameType") == "Organizational"
    assert xml.find(f"{DATACITE}contributors/{DATACITE}contributor").get("contributorType") == "DataCurator"
    funding = xml.find(f"{DATACITE}fundingReferences/{DATACITE}fundingReference")
    assert funding.find(f"{DATACITE}funderIdentifier").get("funderIdentifierType") == "ROR"
    assert funding.find(f"{DATACITE}awardNumber").text == "DE-SC0021293"


XS = "{http://www.w3.org/2001/XMLSchema}"
VOCABULARIES = {"relationType": "relationType", "relatedIdentifierType": "relatedIdentifierType",
                "dateType": "dateType", "contributorType": "contributorType", "nameType": "nameType",
                "descriptionType": "descriptionType", "funderIdentifierType": "funderIdentifierType",
                "resourceTypeGeneral": "resourceType"}


def test_datacite_xml_uses_only_the_kernel_4_6_elements_and_vocabularies(anon, rich, owner, publish, api):
    """Without an XSD validator here: every element is one the kernel 4.6 schema declares, and every
    controlled attribute value is in the schema's own enumeration."""
    root_xsd = SCHEMAS / "datacite-kernel-4.6"
    def parse(path: Path) -> ET.ElementTree:
        return ET.parse(path)  # noqa: S314 - the vendored official schema

    declared = {node.get("name") for node in parse(root_xsd / "metadata.xsd").iter(f"{XS}element")}
    allowed = {attribute: {v.get("value") for v in parse(root_xsd / "include" / f"datacite-{name}-v4.xsd")
                           .iter(f"{XS}enumeration")} for attribute, name in VOCABULARIES.items()}
    _, version = publish(owner, "gone", {"g.bin": b"gone"})
    api.delete(f"/api/v1/artifacts/alice/gone/versions/{version.label}/")
    for pid in (rich["pid"], version.pid):
        xml = ET.fromstring(get(anon, pid, "application/vnd.datacite.datacite+xml").content)  # noqa: S314
        for node in xml.iter():
            assert node.tag.removeprefix(DATACITE) in declared, node.tag
            for attribute, values in allowed.items():
                if attribute in node.attrib:
                    assert node.get(attribute) in values, (node.tag, attribute, node.get(attribute))


def test_datacite_xml_validates_against_the_kernel_4_6_schema(anon, rich):
    schema = xmlschema.XMLSchema(str(SCHEMAS / "datacite-kernel-4.6" / "metadata.xsd"))
    text = get(anon, rich["pid"], "application/vnd.datacite.datacite+xml").content.decode()
    schema.validate(text)
    fos = [s for s in ET.fromstring(text).iter(f"{DATACITE}subject") if s.get("subjectScheme")]  # noqa: S314
    assert [(s.text, s.get("classificationCode"), s.get("schemeURI")) for s in fos] == [
        ("Earth and related environmental sciences", "1.5", "http://www.oecd.org/science/inno/38235147.pdf")]


def test_schema_org_and_rdf_carry_the_same_relations_as_resolvable_links(anon, rich):
    page = get(anon, rich["pid"], "text/html")
    assert "role: DataCurator; name: OLCF" in page.content.decode()  # the page's table keeps entries apart
    data = embedded(page.content.decode())
    assert data["creator"][0] == {"@type": "Organization", "name": "Oak Ridge National Laboratory",
                                  "@id": "https://ror.org/01qz5mb56", "identifier": "https://ror.org/01qz5mb56"}
    assert data["creator"][1]["affiliation"]["@id"] == "https://ror.org/01qz5mb56"
    assert {"@id": "https://doi.org/10.1038/s41586-024-00001-x", "identifier": "10.1038/s41586-024-00001-x"} in \
        data["citation"]
    assert "A paper without an identifier" in data["citation"]
    assert {"@id": "https://n2t.net/ark:/12345/x5data", "identifier": "ark:/12345/x5data"} in data["isBasedOn"]
    assert data["contributor"][0] == {"@type": "Role", "roleName": "DataCurator",
                                      "contributor": {"@type": "Person", "name": "Grace Hopper"}}
    assert data["funding"][0]["funder"]["@id"] == "https://ror.org/01bj3aw27"
    assert data["dateCreated"] == "2024-05-01" and data["distribution"][0]["@type"] == "DataDownload"
    assert data["about"] == [{"@type": "DefinedTerm", "name": "Earth and related environmental sciences",
                              "termCode": "1.5", "inDefinedTermSet": {
                                  "@type": "DefinedTermSet", "name": "Fields of Science and Technology (FOS)",
                                  "url": "http://www.oecd.org/science/inno/38235147.pdf"}}]
    columns = {v["name"]: v for v in data["variableMeasured"]}
    assert set(columns) == {"time", "temperature", "station"}  # the derived columns, with what was said of them
    assert columns["temperature"]["unitText"] == "K"
    assert columns["temperature"]["additionalType"] == "https://schema.org/Float"
    assert columns["temperature"]["description"] == "Air temperature at 2 m"
    assert columns["station"]["additionalType"] == "https://schema.org/Text" and "unitText" not in columns["station"]

    graph = Graph().parse(data=get(anon, rich["pid"], "text/turtle").content, format="turtle")
    s = URIRef(rich["pid_url"])
    assert (s, SDO.citation, URIRef("https://doi.org/10.1038/s41586-024-00001-x")) in graph
    assert (s, DCTERMS.references, URIRef("https://doi.org/10.1038/s41586-024-00001-x")) in graph
    assert (s, DCTERMS.source, URIRef("https://arxiv.org/abs/2401.00001")) in graph
    assert (s, SDO.citation, URIRef("https://doi.org/10.5281/zenodo.1234")) in graph
    ror = URIRef("https://ror.org/01qz5mb56")
    assert (s, SDO.creator, ror) in graph and (ror, RDF.type, SDO.Organization) in graph
    [temperature] = [v for v in graph.objects(s, SDO.variableMeasured)
                     if graph.value(v, SDO.name) == Literal("temperature")]
    assert graph.value(temperature, SDO.unitText) == Literal("K")
    # Dates are typed literals of their precision; a range is a period with DCAT's start and end.
    from rdflib.namespace import DCAT, XSD  # here: pytest's collection trips over closed namespaces

    assert (s, DCTERMS.created, Literal("2024-05-01", datatype=XSD.date)) in graph
    assert (s, SDO.dateCreated, Literal("2024-05-01", datatype=XSD.date)) in graph
    assert (s, DCTERMS.available, Literal("2024-06", datatype=XSD.gYearMonth)) in graph
    assert (s, DCTERMS.valid, Literal("2024-05-01T12:30:00+01:00", datatype=XSD.dateTime)) in graph
    assert graph.value(s, DCTERMS.valid).toPython().utcoffset().total_seconds() == 3600
    [field] = graph.objects(s, DCTERMS.subject)  # a vocabulary term, not words
    assert (s, SDO.about, field) in graph and (field, RDF.type, SDO.DefinedTerm) in graph
    assert graph.value(field, SDO.termCode) == Literal("1.5")
    assert graph.value(field, SDO.inDefinedTermSet) == URIRef("http://www.oecd.org/science/inno/38235147.pdf")
    [period] = graph.objects(s, DCTERMS.date)  # collected: DCTERMS has no term of its own
    assert (period, RDF.type, DCTERMS.PeriodOfTime) in graph
    assert graph.value(period, DCAT.startDate) == Literal("2020-01-01", datatype=XSD.date)
    assert graph.value(period, DCAT.endDate) == Literal("2021-06-30", datatype=XSD.date)
    assert all(o.datatype is not None for o in graph.objects(s, None)
               if isinstance(o, Literal) and re.fullmatch(r"\d{4}(-\d{2})*", str(o)))


def test_old_metadata_still_validates_and_new_fields_are_checked(api):
    old = {"title": "T", "description": "D", "license": "MIT",
           "creators": [{"name": "Ada", "orcid": "0000-0002-1825-0097", "affiliation": "ORNL"}, "Bob"]}
    for ok in ("2020-01-01/2021-06-30", "2020/2021", "2020-01/2020-01-15", "2020-01-01T10:00Z/2020-01-01T11:00Z"):
        assert validate({**old, "dates": {"collected": ok}}, "project")["dates"] == {"collected": ok}
    for wrong, says in (("2021-06-30/2020-01-01", "ends before it starts"), ("2020/2021/2022", "range of two"),
                        ("2020-01-01/", "range of two"), ("yesterday/today", "range of two")):
        with pytest.raises(MetadataError) as caught:
            validate({**old, "dates": {"collected": wrong}}, "project")
        assert says in caught.value.errors["dates"][0], wrong
    assert validate(old, "project")["creators"] == [
        {"name": "Ada", "orcid": "https://orcid.org/0000-0002-1825-0097", "affiliation": "ORNL"}, {"name": "Bob"}]
    bad = {"creators": [{"name": "X", "type": "organization", "ror": "01qz5mb57"}],  # checksum off by one
           "contributors": [{"name": "Y", "role": "boss"}], "funding": [{"award_number": "1"}],
           "dates": {"issued": "2024-01-01"}}
    with pytest.raises(MetadataError) as caught:
        validate({**old, **bad}, "project")
    errors = caught.value.errors
    assert "checksum" in errors["creators"][0] and "DataCurator" in errors["contributors"][0]
    assert "funder" in errors["funding"][0] and "issued" in errors["dates"][0]
    api.post("/api/v1/artifacts/", {"kind": "dataset", "name": "d"}, format="json")
    response = api.post("/api/v1/artifacts/alice/d/versions/", {
        "files": [multipart_file("a.csv", CSV)], "metadata": json.dumps({**old, **bad})}, format="multipart")
    assert response.status_code == 400 and response["X-Error-Code"] == "invalid_metadata"
    assert set(response.json()["errors"]) == {"creators", "contributors", "funding", "dates"}


def test_version_relations_and_a_concept_that_only_has_versions(owner, anon, publish, tmp_path):
    from tests.conftest import staged

    artifact, first = publish(owner, "m", {"a.bin": b"1"})
    _, second = publish(owner, "m", {"a.bin": b"2"})
    third = services.create_version(artifact, owner, files=[staged(tmp_path, "m.onnx", b"onnx")], label="2-onnx",
                                    metadata={"title": "M", "description": "D", "creators": ["A"],
                                              "license": "MIT", "framework": "onnx", "task": "regression"},
                                    system=True, provenance=[services.ProvenanceRef("converted_from", second)])
    record = get(anon, second.pid, "application/vnd.datacite.datacite+json").json()
    assert_valid_datacite(record)
    related = {(r["relatedIdentifier"], r["relationType"]) for r in record["relatedIdentifiers"]}
    assert related == {(first.pid, "IsNewVersionOf"), (artifact.pid, "IsVersionOf")}  # 2-onnx is no new version
    page = get(anon, second.pid, "text/html")
    assert f'<{HOST}/{first.pid}> ; rel="predecessor-version"' in page["Link"]
    assert "successor-version" not in page["Link"]
    graph = Graph().parse(data=get(anon, second.pid, "text/turtle").content, format="turtle")
    assert (URIRef(f"{HOST}/{second.pid}"), PROV.wasRevisionOf, URIRef(f"{HOST}/{first.pid}")) in graph
    concept = get(anon, artifact.pid, "application/vnd.datacite.datacite+json").json()
    assert_valid_datacite(concept)
    assert sorted((r["relatedIdentifier"], r["relationType"]) for r in concept["relatedIdentifiers"]) == sorted(
        [(v.pid, "HasVersion") for v in (first, second, third)])  # not IsVariantFormOf its own version
    assert "Updated" in {d["dateType"] for d in concept["dates"]}


@pytest.mark.slow
@pytest.mark.cpu  # every representation: over 1 s on a quiet machine
def test_the_pid_is_a_resolver_that_redirects_to_the_chosen_representation(owner, other, anon, publish):
    artifact, version = publish(owner, "m")
    owner_name = f"/api/v1/artifacts/{owner.username}/m/"
    expected = {
        "text/html": f"/landing/{version.pid}", "application/json": f"{owner_name}versions/{version.label}/",
        "text/turtle": f"/api/v1/records/turtle/{version.pid}",
        "application/vnd.datacite.datacite+xml": f"/api/v1/records/datacite-xml/{version.pid}",
    }
    for accept, path in expected.items():
        for prefix in ("/", "/pid/"):
            response = anon.get(prefix + version.pid, HTTP_ACCEPT=accept)
            assert response.status_code == 303 and response["Location"] == HOST + path, (accept, prefix)
            assert "Accept" in response["Vary"]
            answer = anon.get(path, HTTP_ACCEPT=accept)
            assert answer.status_code == 200 and answer["Content-Type"].startswith(accept), accept
    assert anon.get("/" + artifact.pid, HTTP_ACCEPT="application/json")["Location"] == HOST + owner_name
    info = anon.get("/" + version.pid + "?info")
    assert info.status_code == 200 and info.content.decode().startswith("erc:")
    assert anon.get("/" + version.pid, HTTP_ACCEPT="image/png").status_code == 406
    _, hidden = publish(owner, "hidden", visibility="private")
    for client in (anon, client_for(other)):
        for path in ("/" + hidden.pid, f"/landing/{hidden.pid}", f"/api/v1/records/turtle/{hidden.pid}"):
            assert client.get(path, HTTP_ACCEPT="text/turtle").status_code == 404, path
    assert client_for(owner).get(f"/api/v1/records/turtle/{hidden.pid}").status_code == 200


def test_a_tombstone_keeps_its_machine_readable_record_and_cite_as(owner, api, anon, publish):
    artifact, first = publish(owner, "m", {"a.bin": b"1"})
    _, second = publish(owner, "m", {"a.bin": b"2"})
    assert api.delete(f"/api/v1/artifacts/alice/m/versions/{first.label}/?reason=wrong%20data").status_code == 204
    page = get(anon, first.pid, "text/html")
    assert page.status_code == 410 and b"wrong data" in page.content
    assert f'<{HOST}/{first.pid}> ; rel="cite-as"' in page["Link"] and 'rel="describedby"' in page["Link"]
    assert embedded(page.content.decode())["creativeWorkStatus"] == "Withdrawn"
    record = get(anon, first.pid, "application/vnd.datacite.datacite+json")
    assert record.status_code == 200
    data = record.json()
    assert_valid_datacite(data)
    assert [d for d in data["dates"] if d["dateType"] == "Withdrawn"][0]["dateInformation"] == "wrong data"
    assert any(d["description"].startswith("Withdrawn on") for d in data["descriptions"])
    assert data["formats"] == [] and data["identifiers"][0]["identifier"] == first.pid
    graph = Graph().parse(data=get(anon, first.pid, "application/ld+json").content, format="json-ld")
    assert (URIRef(f"{HOST}/{first.pid}"), SDO.creativeWorkStatus, Literal("Withdrawn")) in graph
    assert (URIRef(f"{HOST}/{second.pid}"), SDO.creativeWorkStatus, None) not in \
        Graph().parse(data=get(anon, second.pid, "text/turtle").content, format="turtle")
    assert api.delete("/api/v1/artifacts/alice/m/?reason=superseded").status_code == 204
    concept = get(anon, artifact.pid, "application/vnd.datacite.datacite+json")
    assert concept.status_code == 200 and "Withdrawn" in {d["dateType"] for d in concept.json()["dates"]}
    assert get(anon, artifact.pid, "text/html").status_code == 410


def test_a_concept_pid_without_a_version_answers_200_in_every_format(owner, anon):
    artifact = services.create_artifact(owner, kind="dataset", name="empty", title="Empty for now",
                                        description="Versions come later.")
    assert get(anon, artifact.pid, "text/html").status_code == 200
    for accept in ("text/turtle", "application/ld+json", "application/vnd.datacite.datacite+json",
                   "application/vnd.datacite.datacite+xml", "application/n-triples"):
        assert get(anon, artifact.pid, accept).status_code == 200, accept
    graph = Graph().parse(data=get(anon, artifact.pid, "text/turtle").content, format="turtle")
    assert (URIRef(f"{HOST}/{artifact.pid}"), SDO.name, Literal("Empty for now")) in graph
    assert_valid_datacite(get(anon, artifact.pid, "application/vnd.datacite.datacite+json").json())


def assert_rfc9264(body: dict) -> None:
    """application/linkset+json (RFC 9264 section 4.2): {"linkset": [context objects]}, each with an
    ``anchor`` and relation types mapped to arrays of target objects with an ``href`` and string ``type``."""
    assert set(body) == {"linkset"} and isinstance(body["linkset"], list) and body["linkset"]
    for context in body["linkset"]:
        assert isinstance(context.get("anchor"), str) and context["anchor"].startswith("http")
        for rel, targets in context.items():
            if rel == "anchor":
                continue
            assert re.fullmatch(r"[a-z][a-z0-9.-]*", rel) and isinstance(targets, list) and targets, rel
            for target in targets:
                assert isinstance(target["href"], str) and target["href"].startswith("http"), target
                assert set(target) <= {"href", "type", "profile", "title", "hreflang"}, target
                assert all(isinstance(target[key], str) for key in ("type", "profile") if key in target)


def test_back_links_and_a_linkset_that_lists_every_describedby(anon, rich):
    landing = f"{HOST}/landing/{rich['pid']}"
    page = get(anon, rich["pid"], "text/html")
    response = anon.get(f"/linkset/{rich['pid']}")
    assert response.status_code == 200 and response["Content-Type"] == "application/linkset+json"
    body = response.json()
    assert_rfc9264(body)
    context = body["linkset"][0]
    assert context["anchor"] == landing
    described = {(t["href"], t["type"], t.get("profile", "")) for t in context["describedby"]}
    in_header = set(re.findall(r'<([^>]+)> ; rel="describedby" ; type="([^"]+)"(?: ; profile="([^"]+)")?',
                               page["Link"]))
    # the graph (4), DataCite (2), schema.org, Croissant, citations (3), Dublin Core, CITATION.cff, DCAT-AP, RO-Crate
    assert described == in_header and len(described) == 15
    croissant = [t for t in context["describedby"] if t["href"].endswith("/croissant")]
    assert croissant == [{"href": croissant[0]["href"], "type": "application/ld+json",
                          "profile": "http://mlcommons.org/croissant/1.0"}]
    backs = {c["anchor"]: c for c in body["linkset"][1:]}
    for href, _, _ in described:  # each metadata document links back, in the linkset and in its own answer
        assert backs[href]["describes"] == [{"href": landing, "type": "text/html"}]
        answer = anon.get(href.replace(HOST, ""))
        assert f'<{landing}> ; rel="describes"' in answer["Link"]
        assert f'<{rich["pid_url"]}> ; rel="cite-as"' in answer["Link"]
    [data] = [f for f in rich["files"] if f["path"] == "data.csv"]  # and the README.md the hub wrote
    download = anon.get(data["download_url"].replace(HOST, ""))
    assert download.status_code == 200 and download.getvalue() == CSV
    assert f'<{landing}> ; rel="collection" ; type="text/html"' in download["Link"]
    assert backs[data["download_url"]]["collection"] == [{"href": landing, "type": "text/html"}]


def test_models_list_files_as_media_and_prov_used_belongs_to_activities(owner, anon, publish, tmp_path):
    from tests.conftest import staged

    _, table = publish(owner, "table", {"t.csv": b"a,b\n1,2\n"}, kind="dataset")
    artifact, _ = publish(owner, "m")
    model = services.create_version(artifact, owner, files=[staged(tmp_path, "m.bin", b"trained")],
                                    metadata={"title": "M", "description": "D", "creators": ["A"], "license": "MIT",
                                              "framework": "pytorch", "task": "regression"},
                                    provenance=[services.ProvenanceRef("trained_on", table)])
    graph = Graph().parse(data=get(anon, model.pid, "text/turtle").content, format="turtle")
    s = URIRef(f"{HOST}/{model.pid}")
    assert graph.value(s, SDO.distribution) is None and graph.value(s, SDO.associatedMedia) is not None
    users = set(graph.subjects(PROV.used, None))
    assert users and all((user, RDF.type, PROV.Activity) in graph for user in users)
    assert (s, PROV.used, None) not in graph
    assert (None, PROV.used, URIRef(f"{HOST}/{table.pid}")) in graph
    dataset = Graph().parse(data=get(anon, table.pid, "text/turtle").content, format="turtle")
    assert dataset.value(URIRef(f"{HOST}/{table.pid}"), SDO.distribution) is not None


def test_sparql_without_a_query_describes_the_service(anon):
    for accept in ("", "text/turtle", "*/*"):
        response = anon.get("/sparql", HTTP_ACCEPT=accept) if accept else anon.get("/sparql")
        assert response.status_code == 200 and response["Content-Type"].startswith("text/turtle"), accept
        graph = Graph().parse(data=response.content, format="turtle")
        sd = "http://www.w3.org/ns/sparql-service-description#"
        service = URIRef(f"{HOST}/sparql")
        assert (service, RDF.type, URIRef(sd + "Service")) in graph
        assert (service, URIRef(sd + "endpoint"), service) in graph
        assert (service, URIRef(sd + "resultFormat"), URIRef("http://www.w3.org/ns/formats/SPARQL_Results_TSV")) \
            in graph
    as_jsonld = anon.get("/sparql", HTTP_ACCEPT="application/ld+json")
    assert as_jsonld["Content-Type"] == "application/ld+json"
    browser = anon.get("/sparql", HTTP_ACCEPT="text/html,application/xhtml+xml;q=0.9,*/*;q=0.8")
    assert browser["Content-Type"].startswith("text/html") and b"<form" in browser.content


OAI_IDENTIFIER = re.compile(r"^oai:[a-zA-Z][a-zA-Z0-9-]*(\.[a-zA-Z][a-zA-Z0-9-]*)+:"
                            r"[a-zA-Z0-9\-_.!~*'();/?:@&=+$,%]+$")


@pytest.mark.parametrize(("configured", "repository"), [("", "h-127-0-0-1.local"),
                                                         ("hub.example.org", "hub.example.org")])
def test_oai_identifiers_follow_the_oai_identifier_syntax(owner, anon, publish, settings, configured, repository):
    settings.HUB_OAI_REPOSITORY_ID = configured  # the public URL's host is an IP address (127.0.0.1)
    _, version = publish(owner, "m")
    ns = {"o": "http://www.openarchives.org/OAI/2.0/", "i": "http://www.openarchives.org/OAI/2.0/oai-identifier"}
    listed = ET.fromstring(anon.get("/oai", {"verb": "ListIdentifiers", "metadataPrefix": "oai_dc"}).content)  # noqa: S314
    identifiers = [node.text for node in listed.findall(".//o:header/o:identifier", ns)]
    assert identifiers == [f"oai:{repository}:{version.pid}"]
    assert all(OAI_IDENTIFIER.match(identifier) for identifier in identifiers)
    record = ET.fromstring(anon.get("/oai", {"verb": "GetRecord", "identifier": identifiers[0],  # noqa: S314
                                             "metadataPrefix": "oai_dc"}).content)
    assert record.find("o:error", ns) is None
    identify = ET.fromstring(anon.get("/oai", {"verb": "Identify"}).content)  # noqa: S314
    description = identify.find("o:Identify/o:description/i:oai-identifier", ns)
    assert description.find("i:repositoryIdentifier", ns).text == repository
    assert description.find("i:sampleIdentifier", ns).text == identifiers[0]


@pytest.mark.parametrize(("text", "kind", "identifier", "iri"), [
    ("Smith (2020). Clouds. doi:10.1000/XYZ-1.", "DOI", "10.1000/XYZ-1", "https://doi.org/10.1000/XYZ-1"),
    ("https://dx.doi.org/10.5281/zenodo.42", "DOI", "10.5281/zenodo.42", "https://doi.org/10.5281/zenodo.42"),
    ("https://n2t.net/ark:/13030/tf5p30086k", "ARK", "ark:/13030/tf5p30086k", "https://n2t.net/ark:/13030/tf5p30086k"),
    ("ark:13030/tf5p30086k", "ARK", "ark:/13030/tf5p30086k", "https://n2t.net/ark:/13030/tf5p30086k"),
    ("Vaswani et al., arXiv:1706.03762v7", "arXiv", "arXiv:1706.03762v7", "https://arxiv.org/abs/1706.03762v7"),
    ("https://arxiv.org/abs/2101.00001", "arXiv", "arXiv:2101.00001", "https://arxiv.org/abs/2101.00001"),
    ("(see https://example.org/data.)", "URL", "https://example.org/data", "https://example.org/data"),
    ("A book without an identifier", "", "", ""),
])
def test_the_identifier_in_a_related_work(text, kind, identifier, iri):
    from ontology.related import identify

    work = identify(text, "References")
    assert (work.identifier_type, work.identifier, work.iri, work.typed) == (kind, identifier, iri, bool(kind))


@pytest.mark.slow
@pytest.mark.cpu  # every representation: over 1 s on a quiet machine
def test_a_concept_pages_files_lead_back_to_it_and_its_croissant_has_a_version(anon, api):
    """Issue 40, point 5: what a concept's linkset says of its files (collection: the concept's page) is what
    the files' own Link headers say; a version's files lead back to the version's page."""
    import mlcroissant as mlc

    first = publish_api(api, "series", {"data.csv": CSV}, RICH)
    response = api.post("/api/v1/artifacts/alice/series/versions/", {
        "files": [multipart_file("data.csv", CSV + b"2,273.0,c\n")], "metadata": json.dumps(RICH), "version": "2.1"},
        format="multipart")
    assert response.status_code == 201, response.content
    latest = response.json()
    concept = services.get_artifact(None, "alice", "series").pid
    for pid, other in ((concept, latest["pid"]), (latest["pid"], concept), (first["pid"], concept)):
        landing = f"{HOST}/landing/{pid}"
        context, *backs = anon.get(f"/linkset/{pid}").json()["linkset"]
        items = [t["href"] for t in context["item"]]
        assert items and {b["anchor"] for b in backs if "collection" in b} == set(items)
        for back in backs:
            if "collection" in back:
                assert back["collection"] == [{"href": landing, "type": "text/html"}]
                header = anon.get(back["anchor"].replace(HOST, ""))["Link"]
                assert f'<{landing}> ; rel="collection" ; type="text/html"' in header, (pid, header)
                assert f'<{HOST}/{pid}> ; rel="cite-as"' in header
                assert f"/landing/{other}>" not in header
    download = anon.get("/api/v1/artifacts/alice/series/versions/latest/files/data.csv")
    assert download.getvalue().endswith(b"2,273.0,c\n")  # the concept's file is the latest's
    croissant = get(anon, concept, 'application/ld+json; profile="http://mlcommons.org/croissant/1.0"').json()
    assert croissant["version"] == "2.1.0"
    dataset = mlc.Dataset(jsonld=croissant)
    assert not dataset.metadata.ctx.issues.errors, dataset.metadata.ctx.issues.report()

"""An export format is one entry of ``ontology.exports.FORMATS`` (issue 60, point 3): an entry added there and
nowhere else is exported by the API under its own file name, offered by the PID's content negotiation,
announced by the landing page's signposting and linkset, disseminated by OAI-PMH and listed by the manual."""

from __future__ import annotations

import pytest

from hub.manual import reference
from hub.metadata.oai import oai_identifier
from ontology import exports
from tests.metadata.test_fair import get
from tests.metadata.test_oai import NS, oai

TOY = "https://example.org/toy"


@pytest.fixture
def toy(monkeypatch) -> exports.Format:
    found = exports.Format("application/x-toy+xml", ".toy.xml",
                           lambda record, _style: f"<toy xmlns='{TOY}'><title>{record.title}</title></toy>",
                           profile=TOY, kinds=frozenset({"model"}),
                           oai=exports.OaiFormat("toy", f"{TOY} {TOY}.xsd", TOY))
    monkeypatch.setitem(exports.FORMATS, "toy", found)
    return found


@pytest.mark.django_db
def test_a_format_added_in_one_entry_is_offered_on_every_surface(anon, owner, publish, toy):
    _, model = publish(owner, "m")
    _, table = publish(owner, "t", {"t.csv": b"a\n1\n"}, kind="dataset")
    answer = anon.get("/api/v1/artifacts/alice/m/versions/1/metadata/toy")
    assert answer.status_code == 200 and answer["Content-Type"].startswith("application/x-toy+xml")
    assert f'profile="{TOY}"' in answer["Content-Type"] and answer["Content-Profile"] == f"<{TOY}>"
    assert answer["Content-Disposition"] == 'inline; filename="m-1.toy.xml"'
    assert b"<title>Title of m</title>" in answer.content
    refused = anon.get("/api/v1/artifacts/alice/t/versions/1/metadata/toy")
    assert refused.status_code == 400 and refused["X-Error-Code"] == "unsupported_format"
    assert "describes models" in refused.json()["detail"]

    negotiated = get(anon, model.pid, f'application/x-toy+xml; profile="{TOY}"')
    assert negotiated.status_code == 200 and b"Title of m" in negotiated.content

    page = anon.get(f"/landing/{model.pid}")
    assert f'rel="describedby" ; type="application/x-toy+xml" ; profile="{TOY}"' in page["Link"]
    assert "application/x-toy+xml" not in anon.get(f"/landing/{table.pid}")["Link"]
    linkset = anon.get(f"/linkset/{model.pid}").json()["linkset"][0]
    assert {"type": "application/x-toy+xml", "profile": TOY} in [
        {k: v for k, v in link.items() if k != "href"} for link in linkset["describedby"]]

    prefixes = [f.text for f in oai(anon, verb="ListMetadataFormats").findall(".//o:metadataPrefix", NS)]
    assert prefixes[0] == "oai_dc" and "toy" in prefixes
    record = oai(anon, verb="GetRecord", metadataPrefix="toy", identifier=oai_identifier(model))
    assert record.find(f".//{{{TOY}}}toy/{{{TOY}}}title").text == "Title of m"

    assert "| `toy` | `application/x-toy+xml` | `https://example.org/toy` | model |" in reference.export_formats()


def test_every_format_states_what_each_surface_needs():
    """The table's entries are whole: a media type, a file suffix, a producer; OAI formats say their schema."""
    assert not [name for name, found in exports.FORMATS.items()
                if "/" not in found.media_type or not found.suffix.startswith(".") or not callable(found.produce)]
    for name, found in exports.FORMATS.items():
        if found.oai:
            namespace, schema = found.oai.schema_location.split()
            assert namespace == found.oai.namespace and schema.startswith("http"), name


def test_the_api_description_lists_every_format_of_the_table():
    """The OpenAPI schema's description of the export path is the table's, kinds included (no list of its own)."""
    from drf_spectacular.generators import SchemaGenerator

    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    text = paths["/api/v1/artifacts/{owner}/{name}/versions/{version}/metadata/{export}"]["get"]["description"]
    assert [name for name in exports.FORMATS if name not in text] == []
    assert "croissant (dataset)" in text and "codemeta (model and project)" in text


def test_the_clients_export_names_are_the_tables():
    """``hpcfair cite NAME`` asks for an export by name when NAME is one (the client cannot import the hub's table):
    a format added to the table and not to the client's list would be asked for as a citation style."""
    from hpcfair.client import EXPORT_NAMES

    assert list(EXPORT_NAMES) == list(exports.FORMATS)

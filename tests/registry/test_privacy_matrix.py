"""Private stays private, as a matrix: every surface that can name another artifact x every media type x
{anonymous, other user, collaborator, owner}, through the real HTTP stack on PostgreSQL.

The world: alice's private dataset ``secret-data`` (bob collaborates on it) is the source of her public
model ``open-model`` (trained on it) and of her public dataset ``open-table`` (derived from it); her private
``secret-outputs`` (bob collaborates) was derived from the public model. Whoever may read the private
artifacts sees their names and PIDs wherever the surface names relations; everyone else sees the relation
as "a restricted dataset" and no name, PID or IRI, on every surface. OAI-PMH and SPARQL are the public's
views of the hub, so there the private names are absent for every viewer, the owner included.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote
from xml.etree import ElementTree as ET

import pytest
from rdflib import BNode, Graph, Literal, URIRef
from rdflib.namespace import RDF

from hub.metadata.oai import oai_identifier
from hub.registry import services
from hub.registry.models import Version
from ontology.vocab import HPC, HUB, SDO
from tests.conftest import client_for, staged, valid_metadata

pytestmark = pytest.mark.django_db

CSV = b"sepal_length,species\n5.1,setosa\n4.9,virginica\n"
RESTRICTED = "a restricted dataset"


@dataclass
class World:
    secret: Version  # private source
    outputs: Version  # private derivative of the public model
    model: Version  # public, trained on the secret
    table: Version  # public dataset, derived from the secret
    seen: Version  # public source of the model (a relation everyone sees)

    def secrets(self) -> list[str]:
        """Strings that identify the private artifacts: names, and the unique tail of every PID (which
        also catches PID URLs, i.e. their RDF IRIs, and URL-encoded forms)."""
        out = ["secret-data", "secret-outputs"]
        for version in (self.secret, self.outputs):
            out += [version.pid.rsplit("/", 1)[-1], version.artifact.pid.rsplit("/", 1)[-1]]
        return out


def _version(user, name: str, files: dict[str, bytes], *, kind: str, visibility: str = "public",
             collaborators=(), provenance=(), tmp_path) -> Version:
    artifact = services.create_artifact(user, kind=kind, name=name, visibility=visibility,
                                        collaborators=collaborators, title=f"Title of {name}")
    return services.create_version(
        artifact, user, files=[staged(tmp_path, p, d) for p, d in files.items()],
        metadata=valid_metadata(kind, title=f"Title of {name}"),
        provenance=[services.ProvenanceRef(relation, target) for relation, target in provenance])


@pytest.fixture
def world(owner, collaborator, tmp_path) -> World:
    secret = _version(owner, "secret-data", {"s.csv": b"x,y\n1,2\n"}, kind="dataset", visibility="private",
                      collaborators=[collaborator], tmp_path=tmp_path)
    seen = _version(owner, "seen-data", {"d.csv": b"x,y\n3,4\n"}, kind="dataset", tmp_path=tmp_path)
    model = _version(owner, "open-model", {"m.bin": b"weights"}, kind="model", tmp_path=tmp_path,
                     provenance=[("trained_on", secret), ("derived_from", seen)])
    table = _version(owner, "open-table", {"t.csv": CSV}, kind="dataset", tmp_path=tmp_path,
                     provenance=[("derived_from", secret)])
    outputs = _version(owner, "secret-outputs", {"o.csv": b"x,y\n5,6\n"}, kind="dataset", visibility="private",
                       collaborators=[collaborator], provenance=[("derived_from", model)], tmp_path=tmp_path)
    return World(secret, outputs, model, table, seen)


# --- surfaces --------------------------------------------------------------------------------------------
# Each: name -> (fetch(client, world) -> response, what it names: "sources", "derivatives", both or neither,
# whether it is the public's view (OAI-PMH, SPARQL) whatever the viewer).


@dataclass
class Surface:
    fetch: Callable
    names: frozenset[str] = frozenset()  # "sources" and/or "derivatives": the relations it shows
    public_view: bool = False  # OAI-PMH and SPARQL: the public's view, whoever asks
    marker: Callable[[bytes], bool] | None = None  # for a viewer who may not see: is the relation still there?
    about: str = "model"  # which public version it describes: the model (its public source is seen-data)


def _api(path: str) -> Callable:
    return lambda client, w: client.get(path.format(model=w.model, table=w.table))


def _negotiated(pid_of: Callable, accept: str, prefix: str = "/") -> Callable:
    return lambda client, w: client.get(prefix + pid_of(w), follow=True, HTTP_ACCEPT=accept)


def _json_marker(body: bytes) -> bool:
    data = json.loads(body)
    versions = data if isinstance(data, list) else [data]
    return any(link["restricted"] and link["target"] is None and link["target_pid"] is None
               and link["description"] == RESTRICTED for v in versions for link in v["provenance"])


def _rdf_marker(rdflib_format: str) -> Callable[[bytes], bool]:
    def check(body: bytes) -> bool:
        graph = Graph().parse(data=body, format=rdflib_format)
        nodes = set(graph.subjects(RDF.type, HUB.RestrictedArtifact))
        return bool(nodes) and all(isinstance(n, BNode) and (n, HUB.artifactKind, Literal("dataset")) in graph
                                   for n in nodes) and any((None, HPC.wasDerivedFromDataset, n) in graph
                                                           or (None, HPC.wasDerivedFrom, n) in graph for n in nodes)
    return check


def _datacite_json_marker(body: bytes) -> bool:
    data = json.loads(body)
    return any(d["descriptionType"] == "Other" and RESTRICTED in d["description"] for d in data["descriptions"])


def _datacite_xml_marker(body: bytes) -> bool:
    root = ET.fromstring(body)  # noqa: S314 - parsing our own answer is the test
    ns = {"d": "http://datacite.org/schema/kernel-4"}
    found = root.findall("d:descriptions/d:description[@descriptionType='Other']", ns)
    return any(RESTRICTED in (d.text or "") for d in found)


def _schema_marker(body: bytes) -> bool:
    return any(item.get("name") == RESTRICTED and "@id" not in item for item in json.loads(body).get("isBasedOn", []))


def _html_marker(body: bytes) -> bool:
    return RESTRICTED in body.decode()


RDF_TYPES = {"application/ld+json": "json-ld", "text/turtle": "turtle", "application/rdf+xml": "xml",
             "application/n-triples": "nt"}
EXPORT_MARKERS = {"jsonld": _rdf_marker("json-ld"), "turtle": _rdf_marker("turtle"), "rdfxml": _rdf_marker("xml"),
                  "ntriples": _rdf_marker("nt"), "datacite-json": _datacite_json_marker,
                  "datacite-xml": _datacite_xml_marker, "schemaorg": _schema_marker}
NEGOTIATED_MARKERS = {"application/ld+json": _rdf_marker("json-ld"), "text/turtle": _rdf_marker("turtle"),
                      "application/rdf+xml": _rdf_marker("xml"), "application/n-triples": _rdf_marker("nt"),
                      "application/vnd.datacite.datacite+json": _datacite_json_marker,
                      "application/vnd.datacite.datacite+xml": _datacite_xml_marker,
                      "text/html": _html_marker, "application/xhtml+xml": _html_marker,
                      "application/json": _json_marker}
SOURCES, DERIVATIVES = frozenset({"sources"}), frozenset({"derivatives"})
BOTH = SOURCES | DERIVATIVES


def surfaces() -> dict[str, Surface]:
    out: dict[str, Surface] = {
        "api version latest": Surface(_api("/api/v1/artifacts/alice/open-model/versions/latest/"), BOTH,
                                      marker=_json_marker),
        "api version 1": Surface(_api("/api/v1/artifacts/alice/open-model/versions/1/"), BOTH, marker=_json_marker),
        "api version list": Surface(_api("/api/v1/artifacts/alice/open-model/versions/"), BOTH, marker=_json_marker),
        "api artifact": Surface(_api("/api/v1/artifacts/alice/open-model/")),
        "api artifact list": Surface(_api("/api/v1/artifacts/?q=open")),
        "api dataset version": Surface(_api("/api/v1/artifacts/alice/open-table/versions/1/"), SOURCES,
                                       marker=_json_marker, about="table"),
        "api resolve name": Surface(_api("/api/v1/resolve?ref=alice/open-model"), BOTH, marker=_json_marker),
        "api resolve pid": Surface(lambda c, w: c.get("/api/v1/resolve", {"ref": w.model.pid}), BOTH,
                                   marker=_json_marker),
        "api resolve concept": Surface(lambda c, w: c.get("/api/v1/resolve", {"ref": w.model.artifact.pid}), BOTH,
                                       marker=_json_marker),
    }
    for name in ("jsonld", "turtle", "rdfxml", "ntriples", "datacite-json", "datacite-xml", "schemaorg", "bibtex",
                 "citation"):
        out[f"export {name}"] = Surface(_api(f"/api/v1/artifacts/alice/open-model/versions/1/metadata/{name}"),
                                        SOURCES if name in EXPORT_MARKERS else frozenset(),
                                        marker=EXPORT_MARKERS.get(name))
    for name in ("croissant", "jsonld", "datacite-xml", "schemaorg"):
        out[f"dataset export {name}"] = Surface(_api(f"/api/v1/artifacts/alice/open-table/versions/1/metadata/{name}"),
                                                SOURCES if name in EXPORT_MARKERS else frozenset(),
                                                marker=EXPORT_MARKERS.get(name), about="table")
    pids = {"version": lambda w: w.model.pid, "concept": lambda w: w.model.artifact.pid}
    for which, pid_of in pids.items():
        for accept, marker in NEGOTIATED_MARKERS.items():
            names = BOTH if accept in ("text/html", "application/xhtml+xml", "application/json") else SOURCES
            if which == "concept" and accept == "application/json":
                names, marker = frozenset(), None  # the concept's JSON is the artifact's: no relations
            out[f"pid {which} {accept}"] = Surface(_negotiated(pid_of, accept), names, marker=marker)
        out[f"pid {which} /pid/ form turtle"] = Surface(_negotiated(pid_of, "text/turtle", "/pid/"), SOURCES,
                                                        marker=_rdf_marker("turtle"))
        out[f"pid {which} ?info"] = Surface(lambda c, w, p=pid_of: c.get(f"/{p(w)}?info"))
        out[f"linkset {which}"] = Surface(lambda c, w, p=pid_of: c.get(f"/linkset/{p(w)}"))
    out["dataset pid datacite-xml"] = Surface(
        _negotiated(lambda w: w.table.pid, "application/vnd.datacite.datacite+xml"), SOURCES,
        marker=_datacite_xml_marker, about="table")
    # The Hugging Face Hub protocol (hub.hfhub): the public model and dataset as repositories
    for name, path in (("info", "/api/models/alice/open-model"), ("info revision", "/api/models/alice/open-model/"
                       "revision/1?blobs=true"), ("tree", "/api/models/alice/open-model/tree/main?recursive=true"
                       "&expand=true"), ("refs", "/api/models/alice/open-model/refs"),
                       ("commits", "/api/models/alice/open-model/commits/main"),
                       ("dataset info", "/api/datasets/alice/open-table")):  # (resolve gives bytes, no names)
        out[f"hf {name}"] = Surface(lambda c, w, p=path: c.get(p))
    out["hf paths-info"] = Surface(lambda c, w: c.post("/api/models/alice/open-model/paths-info/main",
                                                       {"paths": ["m.bin"], "expand": "true"}))
    # The OCI registry (hub.oci): the public model's version as an ORAS artifact (manifest, config, tags)
    out["oci manifest"] = Surface(lambda c, w: c.get("/v2/alice/open-model/manifests/1"))
    out["oci config"] = Surface(lambda c, w: c.get("/v2/alice/open-model/blobs/" + json.loads(
        c.get("/v2/alice/open-model/manifests/1").content)["config"]["digest"]))
    out["oci tags"] = Surface(lambda c, w: c.get("/v2/alice/open-model/tags/list"))
    out["home page"] = Surface(lambda c, w: c.get("/"))
    out["browse page"] = Surface(lambda c, w: c.get("/browse/"))
    out["api artifact list, derived listed"] = Surface(_api("/api/v1/artifacts/?derived=include"))
    out["owner page"] = Surface(lambda c, w: c.get("/owners/alice/"))
    out["sparql query page"] = Surface(
        lambda c, w: c.get("/sparql", {"query": "SELECT * WHERE { ?s ?p ?o }"}, HTTP_ACCEPT="text/html"),
        SOURCES, public_view=True)
    for prefix in ("oai_dc", "oai_datacite"):
        out[f"oai GetRecord {prefix}"] = Surface(
            lambda c, w, p=prefix: c.get("/oai", {"verb": "GetRecord", "metadataPrefix": p,
                                                  "identifier": oai_identifier(w.model)}),
            SOURCES, public_view=True, marker=_oai_marker)
        out[f"oai ListRecords {prefix}"] = Surface(
            lambda c, w, p=prefix: c.get("/oai", {"verb": "ListRecords", "metadataPrefix": p}), SOURCES,
            public_view=True, marker=_oai_marker)
    out["oai ListIdentifiers"] = Surface(lambda c, w: c.get("/oai", {"verb": "ListIdentifiers",
                                                                      "metadataPrefix": "oai_dc"}), public_view=True)
    everything = "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }"
    for accept, rdflib_format in RDF_TYPES.items():
        out[f"sparql construct {accept}"] = Surface(
            lambda c, w, a=accept: c.get("/sparql", {"query": everything}, HTTP_ACCEPT=a), SOURCES,
            public_view=True, marker=_rdf_marker(rdflib_format))
    for accept in ("application/sparql-results+json", "text/csv", "application/sparql-results+xml"):
        out[f"sparql select {accept}"] = Surface(
            lambda c, w, a=accept: c.get("/sparql", {"query": "SELECT * WHERE { ?s ?p ?o }"}, HTTP_ACCEPT=a),
            SOURCES, public_view=True)
    return out


def _oai_marker(body: bytes) -> bool:
    text = body.decode()
    return f"trained on {RESTRICTED}" in text


def _holds(marker: Callable[[bytes], bool], body: bytes) -> bool:
    try:
        return marker(body)
    except (KeyError, ValueError, TypeError, SyntaxError, ET.ParseError):
        return False


VIEWERS = ["anonymous", "other user", "collaborator", "owner"]


@pytest.fixture
def clients(owner, collaborator, other):
    return {"anonymous": client_for(None), "other user": client_for(other, scope="read"),
            "collaborator": client_for(collaborator, scope="read"), "owner": client_for(owner)}


def test_the_matrix_covers_every_surface_and_media_type():
    names = set(surfaces())
    assert len(names) >= 60
    for accept in NEGOTIATED_MARKERS:
        assert f"pid version {accept}" in names and f"pid concept {accept}" in names
    assert {f"export {n}" for n in ("jsonld", "turtle", "rdfxml", "ntriples", "datacite-json", "datacite-xml",
                                    "schemaorg", "bibtex", "citation")} <= names
    assert "dataset export croissant" in names


@pytest.mark.slow
@pytest.mark.cpu
@pytest.mark.parametrize("viewer", VIEWERS)
def test_private_names_and_pids_reach_only_those_who_may_read_them(world, clients, viewer):
    client, secrets = clients[viewer], world.secrets()
    hidden_from_viewer = viewer in ("anonymous", "other user")
    problems = []
    for name, surface in surfaces().items():
        response = surface.fetch(client, world)
        if response.status_code != 200:
            problems.append(f"{name}: status {response.status_code}")
            continue
        text = response.content.decode("utf-8", errors="replace")
        if hidden_from_viewer or surface.public_view:
            leaked = [s for s in secrets if s in text]
            if leaked:
                problems.append(f"{name}: names {leaked}")
            if surface.marker is not None and not _holds(surface.marker, response.content):
                problems.append(f"{name}: the relation to the restricted source is gone (no restricted marker)")
        else:
            if "sources" in surface.names and not (world.secret.pid in text and RESTRICTED not in text):
                problems.append(f"{name}: the source's PID is missing for someone who may read it")
            if "derivatives" in surface.names and not (world.outputs.pid in text and "secret-outputs" in text):
                problems.append(f"{name}: the derivative is missing for someone who may read it")
        if "sources" in surface.names and surface.about == "model" and world.seen.pid not in text:
            problems.append(f"{name}: the public source's PID is missing")  # what everyone sees stays
    assert not problems, f"{viewer}:\n" + "\n".join(problems)


HF_PRIVATE_ROUTES = {  # every route of the Hugging Face Hub protocol, on the private dataset secret-data
    "info": ("get", "/api/datasets/alice/secret-data"),
    "info revision": ("get", "/api/datasets/alice/secret-data/revision/1"),
    "info by pid": ("get", "/api/datasets/alice/secret-data/revision/{pid}"),
    "tree": ("get", "/api/datasets/alice/secret-data/tree/main"),
    "tree recursive": ("get", "/api/datasets/alice/secret-data/tree/1?recursive=true&expand=true"),
    "paths-info": ("post", "/api/datasets/alice/secret-data/paths-info/main"),
    "refs": ("get", "/api/datasets/alice/secret-data/refs"),
    "commits": ("get", "/api/datasets/alice/secret-data/commits/main"),
    "resolve": ("get", "/datasets/alice/secret-data/resolve/main/s.csv"),
    "resolve head": ("head", "/datasets/alice/secret-data/resolve/1/s.csv"),
}


@pytest.mark.parametrize("viewer", VIEWERS)
def test_the_hugging_face_routes_refuse_a_private_artifact_as_the_hub_refuses_a_missing_repository(
        world, clients, viewer):
    """Those who may not read it get what a repository that does not exist gets (RepoNotFound: 401 without a
    token, 404 with one), on every route; its name and PID are in none of those answers."""
    client, problems = clients[viewer], []
    for name, (method, path) in HF_PRIVATE_ROUTES.items():
        path = path.format(pid=world.secret.pid)
        data = {"paths": ["s.csv"]} if method == "post" else None
        response = getattr(client, method)(path, data) if data else getattr(client, method)(path)
        missing = getattr(client, method)(path.replace("secret-data", "never-was"), data) if data else \
            getattr(client, method)(path.replace("secret-data", "never-was"))
        if viewer in ("collaborator", "owner"):
            if response.status_code != 200:
                problems.append(f"{name}: {response.status_code} for a reader")
            continue
        status = 401 if viewer == "anonymous" else 404
        body = response.content if method == "head" else json.dumps(response.json()).encode()
        if (response.status_code, response.get("X-Error-Code")) != (status, "RepoNotFound"):
            problems.append(f"{name}: {response.status_code} {response.get('X-Error-Code')}")
        if (missing.status_code, missing.get("X-Error-Code")) != (response.status_code, response.get("X-Error-Code")):
            problems.append(f"{name}: a private repository answers otherwise than a missing one")
        if response.has_header("X-Repo-Commit") or world.secret.pid.encode() in body:
            problems.append(f"{name}: names the version")
    assert not problems, f"{viewer}:\n" + "\n".join(problems)


def _oci_private_routes(world) -> dict[str, tuple[str, str]]:
    """Every read route of the OCI registry, on the private dataset secret-data."""
    from hub.oci.artifacts import build

    generated = build(world.secret.artifact, world.secret)
    blob = world.secret.files.exclude(path="README.md").get().blob_id
    return {"manifest by tag": ("get", "manifests/1"), "manifest head": ("head", "manifests/1"),
            "manifest by digest": ("get", f"manifests/sha256:{generated.digest}"),
            "config": ("get", f"blobs/sha256:{generated.config_digest}"), "layer": ("get", f"blobs/sha256:{blob}"),
            "layer head": ("head", f"blobs/sha256:{blob}"), "tags": ("get", "tags/list"),
            "referrers": ("get", f"referrers/sha256:{generated.digest}")}


@pytest.mark.parametrize("viewer", VIEWERS)
def test_the_oci_routes_refuse_a_private_artifact_as_a_missing_repository(world, clients, viewer):
    """Those who may not read it get what a repository that does not exist gets: 401 with the Bearer challenge
    without a token, NAME_UNKNOWN with one; readers get it. Its name and PID are in none of the refusals."""
    client, problems = clients[viewer], []
    for name, (method, tail) in _oci_private_routes(world).items():
        response = getattr(client, method)(f"/v2/alice/secret-data/{tail}")
        missing = getattr(client, method)(f"/v2/alice/never-was/{tail}")
        if viewer in ("collaborator", "owner"):
            if response.status_code != 200:
                problems.append(f"{name}: {response.status_code} for a reader")
            continue
        expected = (401, "UNAUTHORIZED") if viewer == "anonymous" else (404, "NAME_UNKNOWN")
        if (response.status_code, response.get("X-Error-Code")) != expected:
            problems.append(f"{name}: {response.status_code} {response.get('X-Error-Code')}")
        if (missing.status_code, missing.get("X-Error-Code")) != (response.status_code, response.get("X-Error-Code")):
            problems.append(f"{name}: a private repository answers otherwise than a missing one")
        if world.secret.pid.encode() in response.content or response.has_header("Docker-Content-Digest"):
            problems.append(f"{name}: names the version")
    assert not problems, f"{viewer}:\n" + "\n".join(problems)


def test_a_session_login_sees_what_its_token_would(world, collaborator, client):
    """The landing page read with a browser session (cookie), not a token."""
    client.force_login(collaborator)
    html = client.get("/" + world.model.pid, follow=True, HTTP_ACCEPT="text/html").content.decode()
    assert world.secret.pid in html and "secret-outputs" in html and RESTRICTED not in html
    assert "Cookie" in client.get("/" + world.model.pid, follow=True, HTTP_ACCEPT="text/turtle")["Vary"]


def test_pid_answers_vary_on_who_asks(world, anon):
    response = anon.get("/" + world.model.pid, follow=True, HTTP_ACCEPT="text/turtle")
    assert {"Accept", "Authorization", "Cookie"} <= {v.strip() for v in response["Vary"].split(",")}


def test_the_rdf_of_a_restricted_source_is_a_typed_blank_node(world, anon):
    turtle = anon.get(f"/{world.model.pid}", follow=True, HTTP_ACCEPT="text/turtle").content
    graph = Graph().parse(data=turtle, format="turtle")
    model = URIRef(f"http://127.0.0.1:8000/{world.model.pid}")
    [hidden] = list(graph.objects(model, HPC.wasDerivedFromDataset))
    assert isinstance(hidden, BNode)
    assert set(graph.objects(hidden, RDF.type)) == {HUB.RestrictedArtifact, URIRef("http://www.w3.org/ns/prov#Entity")}
    assert set(graph.predicate_objects(hidden)) >= {(HUB.artifactKind, Literal("dataset"))}
    assert (model, SDO.isBasedOn, URIRef(f"http://127.0.0.1:8000/{world.seen.pid}")) in graph
    assert (model, SDO.isBasedOn, hidden) in graph  # the relation stays, its target does not
    from ontology.vocab import hub_terms

    assert (HUB.RestrictedArtifact, None, None) in hub_terms() and (HUB.artifactKind, None, None) in hub_terms()


@pytest.mark.slow
@pytest.mark.cpu  # every export of a chain: over 1 s on a quiet machine
def test_exports_with_a_restricted_source_stay_valid(world, anon):
    import mlcroissant as mlc

    croissant = anon.get("/api/v1/artifacts/alice/open-table/versions/1/metadata/croissant").json()
    dataset = mlc.Dataset(jsonld=croissant)
    assert not dataset.metadata.ctx.issues.errors, dataset.metadata.ctx.issues.report()
    datacite = anon.get(f"/{world.table.pid}", follow=True, HTTP_ACCEPT="application/vnd.datacite.datacite+json").json()
    assert [r["relatedIdentifier"] for r in datacite["relatedIdentifiers"]] == [world.table.artifact.pid]
    assert {"description": f"Provenance: derived from {RESTRICTED}.", "descriptionType": "Other"} in \
        datacite["descriptions"]
    xml = anon.get(f"/{world.table.pid}", follow=True, HTTP_ACCEPT="application/vnd.datacite.datacite+xml").content
    root = ET.fromstring(xml)  # noqa: S314
    ns = {"d": "http://datacite.org/schema/kernel-4"}
    related = root.findall("d:relatedIdentifiers/d:relatedIdentifier", ns)
    assert [r.text for r in related] == [world.table.artifact.pid]
    assert all(r.get("relatedIdentifierType") == "ARK" and r.get("relationType") for r in related)
    types = [d.get("descriptionType") for d in root.findall("d:descriptions/d:description", ns)]
    assert types == ["Abstract", "Other"]
    from ontology.shapes import check  # the public record still passes the hub's SHACL shapes
    turtle = anon.get(f"/{world.model.pid}", follow=True, HTTP_ACCEPT="text/turtle").content
    check(Graph().parse(data=turtle, format="turtle"))


@pytest.mark.slow
@pytest.mark.cpu  # every surface: over 1 s on a quiet machine
def test_another_users_private_derivative_is_hidden_from_the_public_artifacts_owner(world, other, owner, tmp_path):
    """The issue's case: mallory makes a private dataset derived from alice's public model."""
    mine = _version(other, "mallory-private", {"p.csv": b"q,r\n7,8\n"}, kind="dataset", visibility="private",
                    provenance=[("derived_from", world.model)], tmp_path=tmp_path)
    for viewer, sees in ((client_for(owner), False), (client_for(None), False), (client_for(other), True)):
        for path in ("/api/v1/artifacts/alice/open-model/versions/latest/", f"/api/v1/resolve?ref={world.model.pid}"):
            data = viewer.get(path).json()
            assert (mine.pid in [d["version_pid"] for d in data["derivatives"]]) is sees, path
        for accept in ("application/json", "text/html"):
            body = viewer.get("/" + world.model.pid, follow=True, HTTP_ACCEPT=accept).content.decode()
            assert (mine.pid in body) is sees and ("mallory-private" in body) is sees, accept
    listed = client_for(None).get("/api/v1/artifacts/alice/open-model/versions/").json()
    assert mine.pid not in json.dumps(listed)


@pytest.mark.slow
@pytest.mark.cpu  # every surface: over 1 s on a quiet machine
def test_a_source_made_private_later_turns_restricted_everywhere(owner, collaborator, anon, tmp_path):
    """Visibility is checked when a record is read, not when it was published."""
    source = _version(collaborator, "bobs-data", {"b.csv": b"b,c\n1,1\n"}, kind="dataset", tmp_path=tmp_path)
    model = _version(owner, "uses-bobs", {"u.bin": b"u"}, kind="model", provenance=[("trained_on", source)],
                     tmp_path=tmp_path)
    query = {"query": "SELECT ?o WHERE { ?s hpc:wasDerivedFromDataset ?o }"}
    assert anon.get("/sparql", query).json()["results"]["bindings"][0]["o"]["type"] == "uri"
    assert source.pid in anon.get(f"/{model.pid}", follow=True, HTTP_ACCEPT="text/turtle").content.decode()
    bob = client_for(collaborator)
    assert bob.patch("/api/v1/artifacts/bob/bobs-data/", {"visibility": "private"}, format="json").status_code == 200
    for accept in ("text/turtle", "text/html", "application/json", "application/vnd.datacite.datacite+json"):
        body = anon.get(f"/{model.pid}", follow=True, HTTP_ACCEPT=accept).content.decode()
        assert source.pid not in body and "bobs-data" not in body and RESTRICTED in body, accept
    [row] = anon.get("/sparql", query).json()["results"]["bindings"]
    assert row["o"]["type"] == "bnode"
    # bob still may
    assert source.pid in bob.get(f"/{model.pid}", follow=True, HTTP_ACCEPT="text/turtle").content.decode()


# --- the publish answer warns -------------------------------------------------------------------------


def _publish_over_api(client, name: str, data: bytes, provenance: list[dict[str, str]]):
    from tests.conftest import multipart_file

    return client.post(f"/api/v1/artifacts/{name}/versions/", {
        "files": [multipart_file("w.bin", data)], "metadata": json.dumps(valid_metadata()),
        "provenance": json.dumps(provenance)}, format="multipart")


@pytest.mark.slow
@pytest.mark.cpu  # every surface: over 1 s on a quiet machine
def test_publishing_a_public_version_of_a_private_source_warns_the_owner(world, owner, collaborator, other):
    api = client_for(owner)
    api.post("/api/v1/artifacts/", {"kind": "model", "name": "public-next"}, format="json")
    response = _publish_over_api(api, "alice/public-next", b"next", [
        {"relation": "trained_on", "target": world.secret.pid}, {"relation": "derived_from", "target": world.seen.pid}])
    assert response.status_code == 201, response.content
    body = response.json()
    [warning] = body["warnings"]
    assert "alice/secret-data@1" in warning and "trained on" in warning and RESTRICTED in warning
    assert "public" in warning
    assert body["provenance"][0]["target_pid"] == world.secret.pid  # the owner sees it
    quiet = _publish_over_api(api, "alice/public-next", b"quiet", [{"relation": "derived_from",
                                                                      "target": world.seen.pid}])
    assert quiet.status_code == 201 and quiet.json()["warnings"] == []
    # Private to private: a reader of the new version who may not read the source is named.
    api.post("/api/v1/artifacts/", {"kind": "model", "name": "shared-more", "visibility": "private",
                                    "collaborators": ["bob", "mallory"]}, format="json")
    shared = _publish_over_api(api, "alice/shared-more", b"shared", [{"relation": "trained_on",
                                                                      "target": world.secret.pid}])
    [warning] = shared.json()["warnings"]
    assert warning.startswith("mallory may read alice/shared-more@1 but not its source alice/secret-data@1")
    api.post("/api/v1/artifacts/", {"kind": "model", "name": "shared-same", "visibility": "private",
                                    "collaborators": ["bob"]}, format="json")
    same = _publish_over_api(api, "alice/shared-same", b"same", [{"relation": "trained_on",
                                                                  "target": world.secret.pid}])
    assert same.status_code == 201 and same.json()["warnings"] == []


def test_a_claimed_conversion_in_someone_elses_artifact_never_stands_in_for_the_model(owner, other, tmp_path):
    """mallory's private ONNX version that says it was converted from alice's public model is not the
    model's conversion: the gateway does not run it, the container is not made of it, alice's page does
    not show it. The hub's own conversion (in the model's artifact) is all of those."""
    from hub.containers.services import cube_source
    from hub.errors import HubError
    from hub.gateway.services import resolve_model

    source = _version(owner, "torch-model", {"m.pt": b"not really torch"}, kind="model", tmp_path=tmp_path)
    claim = _version(other, "stolen", {"m.onnx": b"claimed onnx"}, kind="model", visibility="private",
                     provenance=[("converted_from", source)], tmp_path=tmp_path)
    for use in (resolve_model, cube_source):
        with pytest.raises(HubError) as refused:
            use(source)
        assert refused.value.error_code in ("not_ready", "not_converted"), use  # its own conversion is queued
    html = client_for(owner).get("/" + source.pid, follow=True, HTTP_ACCEPT="text/html").content.decode()
    assert claim.pid not in html and "stolen" not in html
    own = services.create_version(source.artifact, owner, files=[staged(tmp_path, "m.onnx", b"hub onnx")],
                                  label="1-onnx", metadata=valid_metadata(), system=True,
                                  provenance=[services.ProvenanceRef("converted_from", source)])
    assert resolve_model(source).pid == own.pid and cube_source(source) == own
    page = client_for(owner).get("/" + source.pid, follow=True, HTTP_ACCEPT="text/html")
    assert claim.pid not in page.content.decode()


def test_the_json_of_a_restricted_source_quotes_nothing_else(world, anon):
    [restricted, seen] = anon.get(f"/api/v1/resolve?ref={quote(world.model.pid)}").json()["provenance"]
    assert restricted == {"relation": "trained_on", "target": None, "target_pid": None, "target_kind": "dataset",
                          "restricted": True, "description": RESTRICTED}
    assert seen == {"relation": "derived_from", "target": "alice/seen-data@1", "target_pid": world.seen.pid,
                    "target_kind": "dataset", "restricted": False, "description": "alice/seen-data@1"}
    assert re.search(r"fk4", json.dumps(restricted)) is None


def test_other_peoples_inference_runs_are_not_on_the_model_owners_page(world, owner, other):
    """mallory's runs of alice's public model are mallory's: alice's page lists the model's upkeep and her
    own runs only (a run's outputs become a private dataset of its requester)."""
    from hub.jobs.services import create_job

    theirs = create_job("infer", other, version=world.model, params={"dataset": "mallory/private-inputs"})
    mine = create_job("infer", owner, version=world.model)
    upkeep = create_job("fixity", owner, version=world.model)
    html = client_for(owner).get("/" + world.model.pid, follow=True, HTTP_ACCEPT="text/html").content.decode()
    assert str(mine.pk) in html and str(upkeep.pk) in html and str(theirs.pk) not in html


def test_changing_who_may_read_warns_about_relations_that_turn_restricted(world, owner, other, tmp_path):
    api = client_for(owner)
    theirs = _version(other, "their-derived", {"t.csv": b"t,u\n1,2\n"}, kind="dataset", visibility="private",
                      provenance=[("derived_from", world.seen)], tmp_path=tmp_path)
    hidden = api.patch("/api/v1/artifacts/alice/seen-data/", {"visibility": "private"}, format="json")
    assert hidden.status_code == 200 and hidden.json()["visibility"] == "private"
    [warning] = hidden.json()["warnings"]  # open-model@1, public, derived from it
    assert warning.startswith("alice/open-model@1 is public") and "alice/seen-data@1 (derived from)" in warning
    assert theirs.pid not in json.dumps(hidden.json()) and "their-derived" not in json.dumps(hidden.json())
    shown = api.patch("/api/v1/artifacts/alice/secret-data/", {"visibility": "public"}, format="json")
    assert shown.status_code == 200 and shown.json()["warnings"] == []  # nothing refers to a hidden one now
    retitled = api.patch("/api/v1/artifacts/alice/seen-data/", {"title": "New title"}, format="json")
    assert retitled.json()["warnings"] == []
    shared = api.patch("/api/v1/artifacts/alice/seen-data/", {"collaborators": ["mallory"]}, format="json")
    assert shared.json()["warnings"] == [warning]


@pytest.mark.django_db(transaction=True)
def test_the_cli_shows_a_restricted_source_as_such(live_server, owner, collaborator, tmp_path, monkeypatch):
    from hpcfair.cli import app
    from typer.testing import CliRunner

    from hub.accounts.models import ApiToken

    secret = _version(owner, "secret-data", {"s.csv": b"x,y\n1,2\n"}, kind="dataset", visibility="private",
                      tmp_path=tmp_path)
    model = _version(owner, "open-model", {"m.bin": b"weights"}, kind="model", tmp_path=tmp_path,
                     provenance=[("trained_on", secret)])
    monkeypatch.setenv("HPCFAIR_ENDPOINT", live_server.url)
    shown = {}
    for user in (collaborator, owner):
        monkeypatch.setenv("HPCFAIR_TOKEN", ApiToken.issue(user, scope="read")[1])
        result = CliRunner().invoke(app, ["show", model.pid])
        assert result.exit_code == 0, result.output
        shown[user.username] = result.output
    assert f"trained_on: {RESTRICTED} (you may not see it)" in shown["bob"] and secret.pid not in shown["bob"]
    assert f"trained_on: alice/secret-data@1 ({secret.pid})" in shown["alice"]

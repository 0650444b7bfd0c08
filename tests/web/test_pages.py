"""The pages through Django's test client: who sees what, form handling, CSRF, safe Markdown, snippets."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from hub.accounts.models import ApiToken
from hub.registry import rule
from hub.registry.management.commands.hub_demo import EXAMPLE_PROJECT
from hub.registry.models import Artifact, Upload
from hub.web import markdown, snippets
from tests.conftest import valid_metadata

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_pages_answer_and_private_things_stay_hidden(owner, other, publish):
    publish(owner, "open-model")
    hidden, _ = publish(owner, "hidden-model", visibility="private")
    anon = Client()
    for url in ("/", "/browse/", "/browse/?q=model&kind=model&sort=name", "/accounts/login/"):
        response = anon.get(url)
        assert response.status_code == 200, url
    listing = anon.get("/browse/?q=model").content.decode()
    assert "open-model" in listing and "hidden-model" not in listing
    assert anon.get("/" + hidden.pid, follow=True).status_code == 404
    assert signed_in(other).get("/" + hidden.pid, follow=True).status_code == 404
    assert "hidden-model" in signed_in(owner).get("/browse/?q=model").content.decode()
    for url in ("/publish/", "/jobs/", "/account/"):  # pages of a signed-in user
        assert anon.get(url)["Location"].startswith("/accounts/login/?next=")
        assert signed_in(owner).get(url).status_code == 200


def test_browse_counts_facets_and_explains_a_bad_facet(owner, publish):
    publish(owner, "m1")
    publish(owner, "d1", kind="dataset")
    page = Client().get("/browse/?kind=dataset")
    text = page.content.decode()
    assert page.context["total"] == 1 and "d1" in text and "Title of m1" not in text
    kinds = {v["value"]: v for f in page.context["facets"] if f["name"] == "kind" for v in f["values"]}
    assert kinds["dataset"]["on"] and kinds["dataset"]["count"] == 1
    assert Client().get("/browse/?kind=dataset&kind=model").context["total"] == 2
    bad = Client().get("/browse/?colour=red")
    assert bad.status_code == 200 and bad.context["total"] == 2  # unknown query keys are ignored
    assert Client().get("/browse/?page=999").status_code == 200


def test_home_counts_and_lists_downloads_as_popular(owner, publish):
    artifact, version = publish(owner, "popular-one", {"w.bin": b"abc"})
    publish(owner, "quiet-one")
    anon = Client()
    url = f"/api/v1/artifacts/{owner.username}/popular-one/versions/{version.label}/files/w.bin"
    assert anon.get(url).status_code == 200
    assert anon.get(url, HTTP_RANGE="bytes=1-").status_code == 206  # a resumed read is not a new download
    artifact.refresh_from_db()
    assert artifact.downloads == 1
    publish(owner, "one-table", {"t.csv": b"a\n1\n"}, kind="dataset")
    home = anon.get("/")
    assert home.context["counts"]["model"] == 2
    assert [a.name for a in home.context["popular"]] == ["popular-one"]
    page = home.content.decode()  # counted words agree with their numbers (issue 41: "1 datasets")
    assert "<strong>2</strong> models</a>" in page and "<strong>1</strong> dataset</a>" in page
    assert "<strong>0</strong> projects</a>" in page


def test_publish_creates_artifact_and_version_together_or_nothing(owner, tmp_path, settings):
    settings.HUB_UPLOAD_DIR = tmp_path / "uploads"
    client = signed_in(owner)
    opened = client.post("/api/v1/uploads/", {"size": 5, "filename": "w.bin"}, content_type="application/json")
    upload_id = opened.json()["id"]
    assert client.put(f"/api/v1/uploads/{upload_id}", b"hello", content_type="application/octet-stream") \
        .status_code == 200
    assert client.post(f"/api/v1/uploads/{upload_id}/complete", {}, content_type="application/json").status_code \
        == 200
    body = {"artifact": {"kind": "model", "name": "formed", "visibility": "private"},
            "metadata": {**valid_metadata(), "license": "not-a-license"},
            "files": [{"path": "w.bin", "upload": upload_id}]}
    refused = client.post("/publish/", json.dumps(body), content_type="application/json")
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_metadata"
    assert "license" in refused.json()["errors"]
    assert not Artifact.objects.filter(name="formed").exists()  # no artifact without its version
    assert Upload.objects.get(pk=upload_id).state == Upload.State.COMPLETED  # the upload can be used again
    body["metadata"]["license"] = "MIT"
    body["more"] = "accuracy: 0.9\nhyperparameters: {lr: 0.01}"
    made = client.post("/publish/", json.dumps(body), content_type="application/json")
    assert made.status_code == 201, made.content
    artifact = Artifact.objects.get(name="formed")
    version = artifact.versions.get()
    assert artifact.visibility == "private" and made.json()["url"] == "/" + version.pid
    assert version.metadata["accuracy"] == 0.9 and version.metadata["hyperparameters"] == {"lr": 0.01}


def test_a_missing_creator_is_explained_in_the_words_of_the_form_s_box(owner, tmp_path, settings):
    """Issue 41, point 12: under the "Name, ORCID" box the form showed the API's Python-repr example."""
    settings.HUB_UPLOAD_DIR = tmp_path / "uploads"
    client = signed_in(owner)
    upload_id = client.post("/api/v1/uploads/", {"size": 5, "filename": "w.bin"},
                            content_type="application/json").json()["id"]
    client.put(f"/api/v1/uploads/{upload_id}", b"hello", content_type="application/octet-stream")
    client.post(f"/api/v1/uploads/{upload_id}/complete", {}, content_type="application/json")
    metadata = {key: value for key, value in valid_metadata().items() if key != "creators"}
    body = {"artifact": {"kind": "model", "name": "nobody-made-it"}, "metadata": metadata,
            "files": [{"path": "w.bin", "upload": upload_id}]}
    refused = client.post("/publish/", json.dumps(body), content_type="application/json").json()
    message = " ".join(refused["errors"]["creators"])
    assert "one per line" in message and "Ada Lovelace, 0000-0002-1825-0097" in message
    assert "{'name'" not in message and "Example:" not in message


@pytest.mark.parametrize("body, field", [
    ({"artifact": {"kind": "robot", "name": "x"}}, "kind"),
    ({"artifact": {"kind": "model", "name": "no spaces"}}, "name"),
    ({"artifact": {"kind": "model", "name": "ok", "collaborators": "nobody-here"}}, "collaborators"),
    ({"artifact": {"kind": "model", "name": "ok"}, "more": "a: [unclosed"}, "more"),
    ({"artifact": {"kind": "model", "name": "ok"}, "files": "w.bin"}, "files"),
])
def test_publish_names_the_field_that_needs_fixing(owner, body, field):
    response = signed_in(owner).post("/publish/", json.dumps(body), content_type="application/json")
    assert response.status_code == 400 and field in response.json()["errors"], response.content
    assert not Artifact.objects.filter(owner=owner).exists()


def test_forms_need_csrf_tokens(owner, publish):
    artifact, _ = publish(owner, "guarded")
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.post("/publish/", "{}", content_type="application/json").status_code == 403
    assert client.post("/account/", {"action": "create", "scope": "write"}).status_code == 403
    assert client.post(f"/sharing/{owner.username}/guarded", {"visibility": "private"}).status_code == 403
    artifact.refresh_from_db()
    assert artifact.visibility == "public" and not ApiToken.objects.filter(user=owner).exists()


def test_an_unknown_level_is_refused_naming_every_level_of_the_rule(owner, publish):
    publish(owner, "levels")
    answer = signed_in(owner).post(f"/sharing/{owner.username}/levels", {"visibility": "secret"}, follow=True)
    said = " ".join(str(message) for message in answer.context["messages"])
    assert f"Visibility is {', '.join(rule.NAMES[:-1])} or {rule.NAMES[-1]}; nothing was changed." in said
    assert Artifact.objects.get(name="levels").visibility == "public"


def test_sharing_is_for_the_owner_only(owner, other, collaborator, publish):
    artifact, _ = publish(owner, "shared", collaborators=[collaborator])
    assert signed_in(collaborator).post(f"/sharing/{owner.username}/shared", {"visibility": "private"}) \
        .status_code == 302
    artifact.refresh_from_db()
    assert artifact.visibility == "public"  # a collaborator may not change who sees it
    response = signed_in(owner).post(f"/sharing/{owner.username}/shared",
                                     {"visibility": "private", "collaborators": f"{other.username}, ghost"})
    artifact.refresh_from_db()
    assert response.status_code == 302 and artifact.visibility == "public"  # an unknown name changes nothing
    signed_in(owner).post(f"/sharing/{owner.username}/shared",
                          {"visibility": "private", "collaborators": other.username, "next": "https://evil.test/"})
    artifact.refresh_from_db()
    assert artifact.visibility == "private" and list(artifact.collaborators.all()) == [other]
    assert signed_in(other).get("/" + artifact.pid, follow=True).status_code == 200
    assert signed_in(collaborator).get("/" + artifact.pid, follow=True).status_code == 404


def test_account_page_issues_and_revokes_tokens(owner):
    """Post, redirect, get: reloading never makes a second token; revoking asks first."""
    client = signed_in(owner)
    made = client.post("/account/", {"action": "create", "scope": "write", "name": "cluster"})
    assert made.status_code == 302 and made["Location"] == "/account/"
    page = client.get("/account/")
    raw = page.context["new_token"]
    assert page["Cache-Control"] == "no-store"
    token = ApiToken.objects.get(user=owner)
    assert raw.startswith("hpcf_") and token.scope == "write" and token.name == "cluster"
    again = client.get("/account/")  # the reload
    assert raw not in again.content.decode() and ApiToken.objects.filter(user=owner).count() == 1
    asked = client.post("/account/", {"action": "revoke", "token": str(token.pk)})
    assert asked.status_code == 200 and "Revoke token" in asked.content.decode()
    token.refresh_from_db()
    assert token.revoked is None  # not before the confirmation
    done = client.post("/account/", {"action": "revoke", "token": str(token.pk), "confirm": "yes"})
    assert done.status_code == 302
    token.refresh_from_db()
    assert token.revoked is not None
    assert "was revoked" in client.get("/account/").content.decode()


def test_owner_pages_metadata_descriptions_times_and_export_names(owner, other, publish):
    artifact, version = publish(owner, "owned-model")
    publish(owner, "owned-secret", visibility="private")
    anon = Client()
    page = anon.get(f"/owners/{owner.username}/").content.decode()
    assert "owned-model" in page and "owned-secret" not in page and "1 model" in page
    assert "owned-secret" in signed_in(owner).get(f"/owners/{owner.username}/").content.decode()
    assert anon.get(f"/owners/{other.username}/").status_code == 404  # nothing of theirs to show
    assert anon.get("/owners/nobody-at-all/").status_code == 404
    landing = anon.get("/" + version.pid, follow=True).content.decode()
    assert f'href="/owners/{owner.username}/"' in landing
    assert f'<meta name="description" content="{version.metadata["description"]}">' in landing
    assert '<meta name="description" content="HPCFair Hub: find' in anon.get("/").content.decode()
    bib = anon.get(f"/api/v1/artifacts/{owner.username}/owned-model/versions/{version.label}/metadata/bibtex")
    assert bib["Content-Disposition"] == f'inline; filename="owned-model-{version.label}.bib"'
    docs = anon.get("/api/docs/").content.decode()
    assert '<a class="brand" href="/">← HPCFair Hub</a>' in docs and 'id="swagger-ui"' in docs


def test_landing_page_shows_the_parts_of_a_model(owner, publish):
    artifact, version = publish(owner, "shown")
    page = signed_in(owner).get("/" + version.pid, follow=True)
    text = page.content.decode()
    for part in ('id="metadata"', 'id="files"', 'id="versions"', 'id="cite"', 'id="use"', 'id="sharing"'):
        assert part in text, part
    assert "@misc{" in text and "hpc:machineLearningFramework" in text
    assert 'id="sharing"' not in Client().get("/" + version.pid, follow=True).content.decode()


def test_markdown_is_rendered_without_scripts_or_outside_requests():
    html = str(markdown.render("# Title\n\n<script>alert(1)</script>\n\n<b onclick=x>bold</b> **strong**\n\n"
                               "[ok](https://example.org) [bad](javascript:alert(1)) ![pic](https://example.org/x.png)"
                               "\n\n| a |\n|---|\n| 1 |\n"))
    assert "<h1>Title</h1>" in html and "<strong>strong</strong>" in html and "<table>" in html
    assert "&lt;script&gt;" in html and "<script" not in html and "<b " not in html and 'href="javascript' not in html
    assert "<img" not in html and 'href="https://example.org"' in html


@pytest.mark.parametrize("kind, task, key", [("model", "inference", "model_file"),
                                               ("dataset", "download", "model_file"),
                                               ("project", "container", "work_dir")])
def test_use_it_snippets_are_valid_client_configs(owner, publish, kind, task, key, tmp_path):
    from hpcfair.config import load

    files = None
    if kind == "project":
        files = {path: (EXAMPLE_PROJECT / path).read_bytes() for path in
                 ("mlcube.yaml", "Containerfile", "requirements.txt", "main.py", "workspace/parameters.yaml")}
    artifact, version = publish(owner, f"snip-{kind}", files, kind=kind)
    use = snippets.for_version(artifact, version)
    path = tmp_path / use.config_name
    path.write_text(use.yaml)
    config = load(path)  # the client's own schema: unknown keys or wrong types would raise ConfigError
    ref = f"{owner.username}/snip-{kind}@{version.label}"
    assert config.args.general_args.task == task and config.names(key) == [ref]
    assert ref in use.cli if kind != "project" else use.config_name in use.cli
    assert (use.config_name if kind != "dataset" else ref) in use.python


BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.slow
@pytest.mark.cpu  # SPARQL in a child: over 1 s on a quiet machine
def test_sparql_in_a_browser_is_a_query_page_with_results(owner, publish):
    publish(owner, "queried-model")
    anon = Client()
    page = anon.get("/sparql", HTTP_ACCEPT=BROWSER_ACCEPT)
    assert page.status_code == 200 and "text/html" in page["Content-Type"]
    text = page.content.decode()
    assert '<textarea id="sparql-query" name="query"' in text and "Models and their frameworks" in text
    table = anon.get("/sparql", {"query": "SELECT ?t WHERE { ?m a hpc:AIModel ; schema:name ?t }"},
                     HTTP_ACCEPT="text/html").content.decode()  # no wildcard: the page still gets results
    assert '<table id="sparql-results">' in table and "<td>Title of queried-model</td>" in table
    ask = anon.get("/sparql", {"query": "ASK { ?m a hpc:AIModel }"}, HTTP_ACCEPT=BROWSER_ACCEPT).content.decode()
    assert '<p id="sparql-answer"><strong>Yes</strong></p>' in ask
    bad = anon.get("/sparql", {"query": "SELEC nothing"}, HTTP_ACCEPT=BROWSER_ACCEPT)
    assert bad.status_code == 200 and 'id="sparql-error"' in bad.content.decode()
    assert "does not parse" in bad.content.decode()
    machine = anon.get("/sparql")  # a program without a query gets the service description
    assert machine.status_code == 200 and machine["Content-Type"].startswith("text/turtle")
    empty = anon.get("/sparql", {"query": ""})  # an empty query is still the protocol's coded 400
    assert empty.status_code == 400 and empty.json()["code"] == "malformed_query"
    for example in ("Models and their frameworks, as uploaded", "What was converted from what",
                    "How many of each type"):
        query = next(text for label, text in __import__("hub.web.sparql_page", fromlist=["EXAMPLES"]).EXAMPLES
                     if label == example)
        shown = anon.get("/sparql", {"query": query}, HTTP_ACCEPT=BROWSER_ACCEPT).content.decode()
        assert 'id="sparql-error"' not in shown, example


def test_dataset_and_project_pages_show_what_they_hold(owner, publish):
    csv_data = b"age,height,species\n3,1.5,setosa\n4,1.7,virginica\n"
    card = b"---\ntitle: Heights\n---\n# Heights\nMeasured by hand.\n"
    _, dataset = publish(owner, "heights", {"heights.csv": csv_data, "README.md": card}, kind="dataset")
    page = Client().get("/" + dataset.pid, follow=True).content.decode()
    assert '<p class="card-label small muted">Dataset card</p>' in page and "Model card" not in page
    assert '<section id="schema">' in page and "2 rows" in page
    for column, dtype in (("age", "int64"), ("height", "float64"), ("species", "string")):
        assert f"<td><code>{column}</code></td><td>{dtype}</td>" in page
    files = {path: (EXAMPLE_PROJECT / path).read_bytes() for path in
             ("mlcube.yaml", "Containerfile", "requirements.txt", "main.py", "workspace/parameters.yaml")}
    _, project = publish(owner, "regression-project", files, kind="project")
    page = Client().get("/" + project.pid, follow=True).content.decode()
    assert '<section id="mlcube">' in page
    assert page.index("<code>prepare</code>") < page.index("<code>train</code>")  # in run order


def test_version_pages_name_the_concept_pid_and_a_newer_version(owner, publish):
    artifact, first = publish(owner, "evolving", label="1")
    _, second = publish(owner, "evolving", label="2")
    old = Client().get("/" + first.pid, follow=True).content.decode()
    assert f'a newer version exists: <a href="/{second.pid}">2</a>' in old
    assert f'<a class="pid small" href="/{artifact.pid}">{artifact.pid}</a>' in old
    assert "a newer version exists" not in Client().get("/" + second.pid, follow=True).content.decode()


def test_a_failed_conversion_says_what_to_do_and_offers_no_inference(owner, publish):
    from hub.jobs.models import Job

    artifact, version = publish(owner, "unconvertible", {"model.pt": b"not torchscript"})
    Job.objects.create(kind="convert", requester=owner, version=version, state=Job.State.FAILED,
                       error_code="signature_required", error_detail="model.pt: TorchScript needs input shapes.")
    anon = Client().get("/" + version.pid, follow=True).content.decode()
    assert "its conversion to ONNX failed" in anon and "<strong>signature_required</strong>" in anon
    assert "Give the model&#x27;s inputs" in anon and 'id="use"' not in anon and 'id="try"' not in anon
    assert "TorchScript needs input shapes" not in anon  # the job's own message is for those who may write
    mine = signed_in(owner).get("/" + version.pid, follow=True).content.decode()
    assert "TorchScript needs input shapes" in mine and "The conversion job and its log" in mine


def test_the_verification_table_shows_relative_differences_and_inputs(owner, publish, tmp_path):
    from hub.registry import services
    from hub.registry.models import ProvenanceLink
    from hub.registry.services import ProvenanceRef
    from tests.conftest import staged

    artifact, source = publish(owner, "verified", {"model.pt": b"torchscript"})
    report = {"passed": True, "atol": 1e-4, "rtol": 1e-3, "max_abs_diff": 2e-7, "runs": [
        {"inputs": {"x": {"shape": [2, 4], "dtype": "float32", "source": "generated"}},
         "outputs": [{"name": "y", "max_abs_diff": 2e-7, "max_rel_diff": 3e-6, "passed": True}]},
        {"inputs": {"x": {"shape": [5, 4], "dtype": "float32", "source": "generated, other sizes"}},
         "outputs": [{"name": "y", "max_abs_diff": 1e-7, "max_rel_diff": 7e-6, "passed": True}]}]}
    services.create_version(artifact, owner, label="1-onnx", files=[staged(tmp_path, "model.onnx", b"onnx")],
                            metadata=valid_metadata("model", job="1", verification={"model.onnx": report}),
                            provenance=[ProvenanceRef(ProvenanceLink.Relation.CONVERTED_FROM, source)], system=True)
    page = Client().get("/" + source.pid, follow=True).content.decode()
    row = page[page.index('<tr class="report">'):]
    row = row[:row.index("</tr>")]
    assert "<td>7e-06</td>" in row  # the largest over both runs, not "–"
    assert "<code>x [2, 4] float32 (generated)</code>" in row
    assert "<code>x [5, 4] float32 (generated, other sizes)</code>" in row
    # issue 55: the differences as a small plot, the bar (2e-7) short of its tolerance's tick (1e-4)
    plot = page[page.index('<svg class="plot"'):]
    plot = plot[:plot.index("</svg>")]
    bar = int(re.search(r'<rect x="(\d+)" y="\d+" width="(\d+)"', plot).group(2))
    tick = int(re.search(r'<line x1="(\d+)" x2="\1"', plot).group(1))
    assert 'class="bar-ok"' in plot and "model.onnx: 2e-07" in plot
    assert 170 + bar < tick  # the difference lies under the tolerance on the log axis


def test_previews_download_all_and_counts(owner, publish):
    import hashlib
    import io
    import zipfile

    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
    files = {"table.csv": b"a,b\n" + b"".join(b"%d,%d\n" % (i, i * i) for i in range(30)),
             "notes.txt": b"first line\nsecond line\n", "plot.png": png,
             "shape.svg": b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>",
             "weights.pt": b"\x80\x02not read here"}
    artifact, version = publish(owner, "previewed", files, kind="dataset")
    anon = Client()
    page = anon.get("/" + version.pid, follow=True).content.decode()
    assert '<table class="preview-table">' in page and "<td>9</td><td>81</td>" in page
    assert "<td>10</td><td>100</td>" not in page  # the first ten rows only
    assert "first line\nsecond line" in page
    base = f"/api/v1/artifacts/{owner.username}/previewed/versions/{version.label}"
    assert f'<img src="{base}/files/plot.png?inline=1"' in page
    assert "Preview of shape.svg" not in page and "Preview of weights.pt" not in page
    assert '<dd id="downloads">0</dd>' in page
    image = anon.get(f"{base}/files/plot.png", {"inline": "1"})
    assert image["Content-Disposition"].startswith("inline") and b"".join(image.streaming_content) == png
    svg = anon.get(f"{base}/files/shape.svg", {"inline": "1"})
    assert svg["Content-Disposition"].startswith("attachment")  # never shown inline: it could run script
    artifact.refresh_from_db()
    assert artifact.downloads == 1  # the SVG was a download; the shown image was not
    archive = anon.get(f"{base}/archive")
    assert archive["Content-Disposition"] == f'attachment; filename="previewed-{version.label}.zip"'
    with zipfile.ZipFile(io.BytesIO(b"".join(archive.streaming_content))) as held:
        assert sorted(held.namelist()) == sorted([*files, "README.md", "ro-crate-metadata.json"])  # an RO-Crate
        for name, data in files.items():
            assert hashlib.sha256(held.read(name)).digest() == hashlib.sha256(data).digest()
    artifact.refresh_from_db()
    assert artifact.downloads == 2
    assert anon.get(f"/api/v1/artifacts/{owner.username}/previewed/versions/nope/archive").status_code == 404


def test_a_signature_shows_shapes_as_people_write_them(owner, tmp_path):
    from hub.registry import services
    from tests.conftest import staged

    artifact = services.create_artifact(owner, kind="model", name="shapes")
    metadata = valid_metadata("model", inputs=[{"name": "x", "shape": [None, 4], "dtype": "float32"},
                                               {"name": "m", "shape": ["measurements_dim0", 4], "dtype": "float32"}])
    version = services.create_version(artifact, owner, files=[staged(tmp_path, "w.bin", b"w")], metadata=metadata)
    text = Client().get("/" + version.pid, follow=True).content.decode()
    assert "<code>[?, 4]</code>" in text and "<code>[measurements_dim0, 4]</code>" in text
    assert "[None, 4]" not in text and "'measurements_dim0'" not in text


def _converted(owner, artifact, source, tmp_path, verified=True):
    """An ONNX version of ``source`` as the hub's conversion publishes it (issue 41)."""
    from hub.registry import services
    from hub.registry.models import ProvenanceLink
    from hub.registry.services import ProvenanceRef
    from tests.conftest import staged

    return services.create_version(
        artifact, owner, label=f"{source.label}-onnx", files=[staged(tmp_path, "model.onnx", b"onnx bytes")],
        metadata=valid_metadata("model", title=f"Title of {artifact.name}", verified=verified, framework="onnx",
                                format="onnx", job="00000000-0000-4000-8000-000000000041"),
        provenance=[ProvenanceRef(ProvenanceLink.Relation.CONVERTED_FROM, source)], system=True)


@pytest.mark.slow
@pytest.mark.cpu  # converts: over 1 s on a quiet machine
def test_a_model_page_leads_with_the_upload_and_offers_its_onnx_conversion(owner, publish, tmp_path):
    """Issue 41, point 1: the artifact's page opens on what was uploaded (its files, card, provenance), not on
    the hub's ONNX version; the conversion is offered beside it, and is not "a newer version" of it."""
    card = b"---\ntitle: Uploaded MLP\n---\n# Uploaded MLP\nThe original TorchScript file.\n"
    artifact, source = publish(owner, "lead-upload", {"model.pt": b"torchscript bytes", "README.md": card})
    onnx = _converted(owner, artifact, source, tmp_path)
    assert artifact.latest_version() == onnx  # the concept PID still resolves to the newest version
    page = Client().get("/" + artifact.pid, follow=True)
    text = page.content.decode()
    assert page.context["version"] == source
    files = text[text.index('<section id="files">'):text.index('<section id="versions">')]
    assert "model.pt" in files and "model.onnx" not in files
    assert '<section id="card"' in text and "The original TorchScript file." in text
    offer = text[text.index('<dd id="onnx-conversion">'):]
    offer = offer[:offer.index("</dd>")]
    assert f'<a href="/{onnx.pid}">{onnx.label}</a>' in offer and "<code>model.onnx</code>" in offer
    assert "✓ verified" in offer
    assert "a newer version exists" not in text
    own = Client().get("/" + source.pid, follow=True).content.decode()
    assert "a newer version exists" not in own and 'id="onnx-conversion"' in own
    converted = Client().get("/" + onnx.pid, follow=True).content.decode()
    assert f'<dt>Converted from</dt><dd id="converted-from"><a href="/{source.pid}">' in converted
    assert "a newer version exists" not in converted
    _, second = publish(owner, "lead-upload", {"model.pt": b"torchscript, retrained"}, label="2")
    assert Client().get("/" + artifact.pid, follow=True).context["version"] == second  # newest upload leads
    assert f'a newer version exists: <a href="/{second.pid}">2</a>' in \
        Client().get("/" + onnx.pid, follow=True).content.decode()


def test_a_model_page_snippets_write_every_output_and_load_the_model(owner, publish, tmp_path):
    """Issue 41, point 3: outputs go to an .npz (a model may have several; .npy holds one), the input file the
    config and the command read is shown with an example of the right shape, and api.load_model has a
    snippet; the page shows them all."""
    from hpcfair.config import load

    signature = [{"name": "X", "shape": [None, 4], "dtype": "float32"}]
    artifact, version = publish(owner, "two-outputs", {"model.pt": b"torchscript bytes"})
    use = snippets.for_version(artifact, version, signature)
    assert "output.npy" not in use.yaml + use.python + use.cli
    (tmp_path / use.config_name).write_text(use.yaml)
    config = load(tmp_path / use.config_name)
    assert config.names("export_file") == ["outputs.npz"] and config.task.input == use.input_name == "input.json"
    assert json.loads(use.input_text) == {"X": [[0.0, 0.0, 0.0, 0.0]]}
    assert use.cli.endswith(f"{use.input_name} --output outputs.npz")
    assert f'api.load_model("{artifact.full_name}@{version.label}")' in use.load_python
    assert '"X": np.zeros((1, 4), dtype="float32")' in use.load_python
    compile(use.load_python, "load", "exec")
    compile(use.python, "python", "exec")
    big = snippets.for_version(artifact, version, [{"name": "image", "shape": [None, 3, 224, 224], "dtype": "float32"}])
    assert big.input_name == "input.npy" and big.input_text == "" and "np.zeros((1, 3, 224, 224)" in big.load_python
    version.metadata["inputs"] = signature
    version.save(update_fields=["metadata"])
    page = Client().get("/" + version.pid, follow=True).content.decode()
    for block in ('id="use-input"', 'id="use-yaml"', 'id="use-python"', 'id="use-load"', 'id="use-cli"'):
        assert block in page, block


HF_CARD = ("---\nlicense: apache-2.0\npipeline_tag: text-classification\ntags: [wine, tabular]\nlibrary_name: sklearn\n"
           "---\n# Wine quality classifier\n\nTells good wines from bad ones by eleven measurements.\n\n## Training\n")


def test_the_publish_form_reads_a_card_and_the_artifact_takes_its_title(owner, tmp_path):
    """Issue 41, point 2: the form asks the hub what a README.md gives (a Hugging Face card's keys read as the
    hub's) and shows it; published without a title or description, the artifact takes the card's, so its
    heading and search show them, not the slug."""
    from hub.registry import services
    from tests.conftest import staged

    client = signed_in(owner)
    read = client.post("/publish/card", {"text": HF_CARD, "kind": "model"}, content_type="application/json")
    assert read.status_code == 200, read.content
    fields = read.json()["fields"]
    assert fields["title"] == "Wine quality classifier" and fields["license"] == "apache-2.0"
    assert fields["description"] == "Tells good wines from bad ones by eleven measurements."
    assert fields["task"] == "text-classification" and fields["keywords"] == ["wine", "tabular"]
    assert "extra" not in fields  # only what the form has fields for
    bad = client.post("/publish/card", {"text": "---\n: [\n---\n"}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_metadata"
    typo = client.post("/publish/card", {"text": HF_CARD, "knd": "model"}, content_type="application/json")
    assert typo.status_code == 400 and "kind" in typo.json()["detail"]
    assert Client().post("/publish/card", {"text": HF_CARD}, content_type="application/json").status_code == 302
    assert 'id="card-note"' in client.get("/publish/").content.decode()

    artifact = services.create_artifact(owner, kind="model", name="wine-1795625527")  # no title: the slug
    services.create_version(artifact, owner, files=[staged(tmp_path, "README.md", HF_CARD.encode()),
                                                    staged(tmp_path, "weights.bin", b"w" * 32)],
                            metadata={"creators": [{"name": "Ada Lovelace"}], "framework": "scikit-learn"})
    artifact.refresh_from_db()
    assert artifact.title == "Wine quality classifier"
    assert artifact.description == "Tells good wines from bad ones by eleven measurements."
    page = Client().get("/" + artifact.pid, follow=True).content.decode()
    assert "<h1>Wine quality classifier</h1>" in page and "<title>Wine quality classifier" in page
    listed = Client().get("/api/v1/artifacts/", {"q": "wine"}).json()
    results = listed["results"] if isinstance(listed, dict) else listed
    assert [r["title"] for r in results] == ["Wine quality classifier"]
    titled = services.create_artifact(owner, kind="model", name="own-title", title="My own title")
    services.create_version(titled, owner, files=[staged(tmp_path, "README.md", HF_CARD.encode() + b"\n")],
                            metadata={"creators": [{"name": "Ada Lovelace"}], "framework": "scikit-learn"})
    titled.refresh_from_db()
    assert titled.title == "My own title"  # a title of its own stays


@pytest.mark.slow
@pytest.mark.cpu  # SPARQL in a child: over 1 s on a quiet machine
def test_the_sparql_examples_list_each_model_once(owner, publish, tmp_path):
    """Issue 41, point 5: the page's first example and the tour's list a model as uploaded, not again as the
    hub's ONNX conversion of it; the query box spans the page (a browser test measures it)."""
    import re
    from pathlib import Path

    from hub.web.sparql_page import EXAMPLES

    artifact, source = publish(owner, "listed-once", {"model.pt": b"torchscript bytes"})
    _converted(owner, artifact, source, tmp_path)
    readme = (Path(__file__).resolve().parents[2] / "docs" / "getting-started" / "tour.md").read_text()
    from_readme = re.search(r"--data-urlencode 'query=(.*?)' \\", readme, re.S).group(1)
    for query in (EXAMPLES[0][1], from_readme):
        page = Client().get("/sparql", {"query": query}, HTTP_ACCEPT=BROWSER_ACCEPT).content.decode()
        assert 'id="sparql-error"' not in page
        assert page.count("<td>Title of listed-once</td>") == 1, query
    everything = "SELECT ?t WHERE { ?s a hpc:AIModel ; schema:name ?t }"
    assert Client().get("/sparql", {"query": everything}, HTTP_ACCEPT=BROWSER_ACCEPT).content.decode() \
        .count("<td>Title of listed-once</td>") == 2  # what the filter leaves out


def test_a_page_lists_builds_under_their_version_and_jobs_only_while_they_run(owner, publish, client):
    """Issue 55: ``2-onnx`` is listed under ``2``, not above it as if newer; a finished job leaves the page
    (it is on the jobs page); the card does not repeat the page's title."""
    from hub.jobs.models import Job
    from hub.web.landing import versions_listed

    artifact, first = publish(owner, "listed", {"README.md": b"# Title of listed\n\nThe card's own words.\n"},
                              label="1")
    _, second = publish(owner, "listed", label="2")
    _, built = publish(owner, "listed", label="2-onnx")
    assert [v.label for v in versions_listed(artifact)] == ["2", "2-onnx", "1"]
    job = Job.objects.create(kind="convert", version=first, requester=owner, state=Job.State.RUNNING)
    client.force_login(owner)
    page = client.get("/" + first.pid, follow=True).content.decode()
    assert f'data-job="{job.pk}"' in page and "Running on this version" in page
    assert "Title of listed</h" not in page.split('<section id="card"')[1]  # only the page's own h1
    assert "The card&#x27;s own words." in page or "The card's own words." in page
    Job.objects.filter(pk=job.pk).update(state=Job.State.SUCCEEDED)
    assert f'data-job="{job.pk}"' not in client.get("/" + first.pid, follow=True).content.decode()


def test_the_card_file_is_not_previewed_again_under_the_rendered_card(owner, publish):
    """Issue 55: the Files list previewed the card's file as raw text, front matter and all, under the card the
    page renders; whatever the card's name (README.md, MODEL_CARD.md), it is listed, not previewed. Without an
    uploaded card a README.md is previewed as any text file."""
    card = b"---\nlicense: MIT\n---\n# Carded\n\nThe card's words.\n"
    for name in ("README.md", "MODEL_CARD.md"):
        files = {name: card, "notes.txt": f"notes of {name}\n".encode()}
        _, version = publish(owner, f"carded-{name[:5].lower()}", files)
        page = Client().get("/" + version.pid, follow=True).content.decode()
        assert f"Preview of {name}" not in page and "license: MIT" not in page, name
        assert "Preview of notes.txt" in page and f">{name}</a>" in page, name


def test_human_addresses_open_the_pages_and_reserved_names_are_refused(owner, publish):
    from django.core.exceptions import ValidationError
    from django.urls import get_resolver

    from hub.registry.links import pid_url
    from hub.web.human import RESERVED_OWNERS

    artifact, version = publish(owner, "typed", label="1.0")
    concept = Client().get(f"/{owner.username}/typed")
    assert concept.status_code == 200  # the PID stays the canonical, citable address
    assert f'<link rel="canonical" href="{pid_url(artifact.pid)}">' in concept.content.decode()
    assert 'rel="cite-as"' in concept["Link"]
    page = Client().get(f"/{owner.username}/typed/1.0").content.decode()
    assert version.pid in page and f"/{owner.username}/typed/1.0" in page
    for missing in (f"/{owner.username}/typed/9", f"/{owner.username}/nothing", "/nobody/typed"):
        answer = Client().get(missing)
        assert answer.status_code == 404 and answer["X-Error-Code"] == "not_found", missing
    # every literal first segment of the hub's routes is a reserved owner name
    firsts = {str(p.pattern).lstrip("^").split("/")[0] for p in get_resolver().url_patterns}
    for include in get_resolver().url_patterns:
        firsts |= {str(p.pattern).lstrip("^").split("/")[0] for p in getattr(include, "url_patterns", [])
                   if str(include.pattern) == ""}
    literal = {first for first in firsts if first and "<" not in first and "(" not in first}
    assert literal <= RESERVED_OWNERS, literal - RESERVED_OWNERS
    with pytest.raises(ValidationError):
        type(owner).objects.create_user("docs", password="pw-docs-1")


def test_a_version_without_a_card_shows_one_written_from_its_metadata(owner, publish):
    """Issue 55, point 3 (its page): a version published with metadata only leads with a card the hub wrote
    from it (title, description, creators, the main fields), said to be written by the hub."""
    _, version = publish(owner, "no-card", {"weights.bin": b"w" * 16})
    page = Client().get("/" + version.pid, follow=True).content.decode()
    card = page[page.index('<section id="card"'):]
    card = card[:card.index("</section>")]
    assert "written by the hub from the metadata" in card
    assert "Made by the test suite." in card and "Alice Example" in card and "<td>Framework</td>" in card
    assert "none was uploaded with this version" in card

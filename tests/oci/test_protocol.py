"""The registry's own conformance run, through Django's test client (the whole HTTP stack but the socket), over
every endpoint of the OCI Distribution specification's pull, push, content-discovery and management workflows
(the Go conformance suite's cases, named in each test's docstring), and the token protocol."""

from __future__ import annotations

import base64
import hashlib
import json
import os

import pytest

from hub.oci.artifacts import CONFIG_TYPE, OCI_MANIFEST, TITLE
from hub.oci.models import BlobUpload, RepoBlob
from hub.registry.gc import collect
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

FILES = {"README.md": b"# Tiny\n",  # a card: the hub would write one
         "config.json": b'{"hidden": 4}\n', "weights.bin": os.urandom(4000), "sub/notes.txt": b"notes\n"}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def error_code(response) -> str:
    body = response.json()
    assert body["errors"][0]["message"] and body["code"] == body["errors"][0]["code"] == response["X-Error-Code"]
    return body["errors"][0]["code"]


@pytest.fixture
def model(owner, publish):
    publish(owner, "tiny", FILES, label="1.0")
    return publish(owner, "tiny", {**FILES, "weights.bin": os.urandom(10)}, label="2.0")


@pytest.fixture
def pusher(owner):
    return client_for(owner, scope="write")


def test_base_challenges_anonymous_and_answers_a_token(client, owner):
    """Pull: /v2/ (the suite's 'GET /v2/'): 401 with the Bearer challenge, 200 with credentials."""
    response = client.get("/v2/")
    assert response.status_code == 401 and error_code(response) == "UNAUTHORIZED"
    assert response["WWW-Authenticate"] == 'Bearer realm="http://testserver/v2/token",service="testserver"'
    assert response["Docker-Distribution-API-Version"] == "registry/2.0"
    assert client_for(owner, scope="read").get("/v2/").status_code == 200


def test_pull_a_version_as_an_oras_artifact(client, model):
    """Pull: manifest by tag and by digest (GET, HEAD), config and layer blobs (GET, HEAD, Range), deterministic
    digests; anonymous pull of a public artifact through the token endpoint."""
    token = client.get("/v2/token", {"service": "testserver", "scope": "repository:alice/tiny:pull"}).json()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token['token']}"}
    assert token["expires_in"] == 300 and token["access_token"] == token["token"]
    response = client.get("/v2/alice/tiny/manifests/1.0", **auth)
    assert response.status_code == 200 and response["Content-Type"] == OCI_MANIFEST
    body = response.content
    digest = f"sha256:{sha(body)}"
    assert response["Docker-Content-Digest"] == digest and int(response["Content-Length"]) == len(body)
    manifest = json.loads(body)
    assert manifest["artifactType"] == "application/vnd.hpcfair.model.v1"
    assert manifest["config"]["mediaType"] == CONFIG_TYPE
    assert {layer["annotations"][TITLE]: layer["digest"] for layer in manifest["layers"]} == {
        path: f"sha256:{sha(data)}" for path, data in FILES.items()}
    assert client.get("/v2/alice/tiny/manifests/1.0", **auth).content == body  # the same bytes each time
    by_digest = client.get(f"/v2/alice/tiny/manifests/{digest}", **auth)
    assert by_digest.content == body and by_digest["Docker-Content-Digest"] == digest
    head = client.head(f"/v2/alice/tiny/manifests/{digest}", **auth)
    assert head.status_code == 200 and head["Content-Length"] == str(len(body)) and not head.content

    config = client.get(f"/v2/alice/tiny/blobs/{manifest['config']['digest']}", **auth)
    assert config.status_code == 200 and sha(config.content) == manifest["config"]["digest"][7:]
    assert json.loads(config.content)["version"] == "1.0"
    weights = f"sha256:{sha(FILES['weights.bin'])}"
    blob = client.get(f"/v2/alice/tiny/blobs/{weights}", **auth)
    assert b"".join(blob.streaming_content) == FILES["weights.bin"] and blob["Docker-Content-Digest"] == weights
    ranged = client.get(f"/v2/alice/tiny/blobs/{weights}", HTTP_RANGE="bytes=100-199", **auth)
    assert ranged.status_code == 206 and b"".join(ranged.streaming_content) == FILES["weights.bin"][100:200]
    assert ranged["Content-Range"] == "bytes 100-199/4000"
    assert client.head(f"/v2/alice/tiny/blobs/{weights}", **auth)["Content-Length"] == "4000"


def test_tags_list_with_pagination(client, model, pusher):
    """Content discovery: tags list, with n and last and the Link header (the suite's 'tags list')."""
    assert client.get("/v2/alice/tiny/tags/list").json() == {"name": "alice/tiny", "tags": ["1.0", "2.0"]}
    first = client.get("/v2/alice/tiny/tags/list", {"n": 1})
    assert first.json()["tags"] == ["1.0"] and first["Link"] == '</v2/alice/tiny/tags/list?n=1&last=1.0>; rel="next"'
    assert client.get("/v2/alice/tiny/tags/list", {"n": 1, "last": "1.0"}).json()["tags"] == ["2.0"]
    assert client.get("/v2/alice/tiny/tags/list", {"n": 0}).json()["tags"] == []
    assert error_code(client.get("/v2/alice/tiny/tags/list", {"n": "many"})) == "invalid"


def test_missing_things_answer_the_specifications_codes(client, model):
    """Pull: a missing manifest, blob and repository; malformed digests and names."""
    assert error_code(client.get("/v2/alice/tiny/manifests/9.9")) == "MANIFEST_UNKNOWN"
    assert error_code(client.get(f"/v2/alice/tiny/manifests/sha256:{'0' * 64}")) == "MANIFEST_UNKNOWN"
    assert error_code(client.get(f"/v2/alice/tiny/blobs/sha256:{'0' * 64}")) == "BLOB_UNKNOWN"
    assert error_code(client.get("/v2/alice/tiny/blobs/md5:abc")) == "DIGEST_INVALID"
    assert error_code(client.get("/v2/alice/-bad-/tags/list")) == "NAME_INVALID"
    response = client.get("/v2/alice/never/tags/list")
    assert response.status_code == 401 and "scope=\"repository:alice/never:pull\"" in response["WWW-Authenticate"]
    assert error_code(client.delete("/v2/alice/tiny/manifests/1.0")) == "UNAUTHORIZED"
    assert client.put("/v2/").status_code == 405
    catalog = client.get("/v2/_catalog")  # optional in the specification: refused in its shape, in words
    assert catalog.status_code == 405 and error_code(catalog) == "UNSUPPORTED" and "/api/v1/artifacts/" in (
        catalog.json()["detail"])


def _push_blob_chunked(client, repo: str, data: bytes, pieces: int = 3) -> str:
    start = client.post(f"/v2/{repo}/blobs/uploads/")
    assert start.status_code == 202 and start["Range"] == "0-0", start.content
    location = start["Location"]
    size = -(-len(data) // pieces)
    for offset in range(0, len(data), size):
        chunk = data[offset:offset + size]
        answer = client.patch(location, chunk, content_type="application/octet-stream",
                              HTTP_CONTENT_RANGE=f"{offset}-{offset + len(chunk) - 1}")
        assert answer.status_code == 202 and answer["Range"] == f"0-{offset + len(chunk) - 1}"
        location = answer["Location"]
    assert client.get(location).status_code == 204
    done = client.put(f"{location}?digest=sha256:{sha(data)}")
    assert done.status_code == 201 and done["Docker-Content-Digest"] == f"sha256:{sha(data)}"
    return done["Location"]


def test_push_blobs_monolithic_chunked_and_mounted(pusher, model):
    """Push: POST+PUT, POST with ?digest= (monolithic), POST+PATCH+PUT (chunked, with out-of-order refusal),
    GET of an upload's status, DELETE of an upload, cross-repository mount from a pushed and a version's blob."""
    whole = os.urandom(5000)
    mono = pusher.post(f"/v2/alice/img/blobs/uploads/?digest=sha256:{sha(whole)}", whole,
                       content_type="application/octet-stream")
    assert mono.status_code == 201 and mono["Location"] == f"/v2/alice/img/blobs/sha256:{sha(whole)}"
    assert b"".join(pusher.get(mono["Location"]).streaming_content) == whole

    chunked = os.urandom(7001)
    location = _push_blob_chunked(pusher, "alice/img", chunked)
    assert b"".join(pusher.get(location).streaming_content) == chunked

    session = pusher.post("/v2/alice/img/blobs/uploads/")["Location"]
    pusher.patch(session, b"abc", content_type="application/octet-stream", HTTP_CONTENT_RANGE="0-2")
    skipped = pusher.patch(session, b"def", content_type="application/octet-stream", HTTP_CONTENT_RANGE="10-12")
    assert skipped.status_code == 416 and error_code(skipped) == "BLOB_UPLOAD_RANGE"
    wrong = pusher.put(f"{session}?digest=sha256:{'1' * 64}")
    assert error_code(wrong) == "DIGEST_INVALID"
    again = pusher.post("/v2/alice/img/blobs/uploads/")["Location"]
    assert pusher.delete(again).status_code == 204
    assert error_code(pusher.get(again)) == "BLOB_UPLOAD_UNKNOWN"
    assert error_code(pusher.get("/v2/alice/img/blobs/uploads/" + "-" * 36)) == "BLOB_UPLOAD_UNKNOWN"

    mounted = pusher.post(f"/v2/alice/other/blobs/uploads/?mount=sha256:{sha(whole)}&from=alice/img")
    assert mounted.status_code == 201 and mounted["Docker-Content-Digest"] == f"sha256:{sha(whole)}"
    layer = sha(FILES["config.json"])
    from_version = pusher.post(f"/v2/alice/other/blobs/uploads/?mount=sha256:{layer}&from=alice/tiny")
    assert from_version.status_code == 201
    assert pusher.get(f"/v2/alice/other/blobs/sha256:{layer}").status_code == 200
    unknown = pusher.post(f"/v2/alice/other/blobs/uploads/?mount=sha256:{'2' * 64}&from=alice/img")
    assert unknown.status_code == 202  # not mountable: an upload session instead, as the spec says


def _image(pusher, repo: str, layer: bytes) -> tuple[bytes, str]:
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers",
                                                                            "diff_ids": [f"sha256:{sha(layer)}"]}})
    for data in (layer, config.encode()):
        assert pusher.post(f"/v2/{repo}/blobs/uploads/?digest=sha256:{sha(data)}", data,
                           content_type="application/octet-stream").status_code == 201
    manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": f"sha256:{sha(config.encode())}", "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                                       "digest": f"sha256:{sha(layer)}", "size": len(layer)}]}).encode()
    return manifest, f"sha256:{sha(manifest)}"


def test_push_and_pull_manifests_by_tag_and_digest_an_index_and_referrers(pusher, client, owner):
    """Push: manifest PUT by tag and by digest, refused with an unknown blob or a wrong digest; an image index
    over pushed manifests; a manifest with a subject and the referrers API (content discovery)."""
    manifest, digest = _image(pusher, "alice/img", os.urandom(300))
    put = pusher.put("/v2/alice/img/manifests/v1", manifest, content_type=OCI_MANIFEST)
    assert put.status_code == 201 and put["Docker-Content-Digest"] == digest
    assert put["Location"] == f"/v2/alice/img/manifests/{digest}"
    got = pusher.get("/v2/alice/img/manifests/v1")
    assert got.content == manifest and got["Content-Type"] == OCI_MANIFEST
    assert pusher.get("/v2/alice/img/tags/list").json()["tags"] == ["v1"]
    assert pusher.put(f"/v2/alice/img/manifests/{digest}", manifest, content_type=OCI_MANIFEST).status_code == 201
    assert error_code(pusher.put(f"/v2/alice/img/manifests/sha256:{'3' * 64}", manifest,
                                 content_type=OCI_MANIFEST)) == "DIGEST_INVALID"
    lacking = json.loads(manifest)
    lacking["layers"][0]["digest"] = f"sha256:{'4' * 64}"
    assert error_code(pusher.put("/v2/alice/img/manifests/v2", json.dumps(lacking),
                                 content_type=OCI_MANIFEST)) == "MANIFEST_BLOB_UNKNOWN"
    assert error_code(pusher.put("/v2/alice/img/manifests/v2", b"{not json",
                                 content_type=OCI_MANIFEST)) == "MANIFEST_INVALID"

    index = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                        "manifests": [{"mediaType": OCI_MANIFEST, "digest": digest, "size": len(manifest),
                                       "platform": {"architecture": "amd64", "os": "linux"}}]}).encode()
    assert pusher.put("/v2/alice/img/manifests/multi", index,
                      content_type="application/vnd.oci.image.index.v1+json").status_code == 201
    assert pusher.get("/v2/alice/img/manifests/multi")["Content-Type"] == "application/vnd.oci.image.index.v1+json"

    empty = b"{}"
    pusher.post(f"/v2/alice/img/blobs/uploads/?digest=sha256:{sha(empty)}", empty,
                content_type="application/octet-stream")
    signature = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/x-sig",
                            "config": {"mediaType": "application/vnd.oci.empty.v1+json",
                                       "digest": f"sha256:{sha(empty)}", "size": 2},
                            "layers": [{"mediaType": "application/vnd.oci.empty.v1+json",
                                        "digest": f"sha256:{sha(empty)}", "size": 2}],
                            "subject": {"mediaType": OCI_MANIFEST, "digest": digest, "size": len(manifest)}})
    referrer = pusher.put(f"/v2/alice/img/manifests/sha256:{sha(signature.encode())}", signature,
                          content_type=OCI_MANIFEST)
    assert referrer.status_code == 201 and referrer["OCI-Subject"] == digest
    found = pusher.get(f"/v2/alice/img/referrers/{digest}").json()["manifests"]
    assert [(m["digest"], m["artifactType"]) for m in found] == [(f"sha256:{sha(signature.encode())}",
                                                                  "application/x-sig")]
    assert pusher.get(f"/v2/alice/img/referrers/{digest}", {"artifactType": "other"}).json()["manifests"] == []

    # a repository that is no artifact is its namespace owner's: nobody else reads it
    assert client.get("/v2/alice/img/manifests/v1").status_code == 401
    assert error_code(pusher.delete("/v2/alice/img/manifests/v1")) == "UNSUPPORTED"


def test_push_needs_a_write_token_for_ones_own_namespace(owner, other, model):
    """Push refusals: a read token (DENIED), another person's namespace (NAME_UNKNOWN), no token (401)."""
    reader = client_for(owner, scope="read")
    assert error_code(reader.post("/v2/alice/tiny/blobs/uploads/")) == "DENIED"
    assert error_code(client_for(other).post("/v2/alice/img/blobs/uploads/")) == "NAME_UNKNOWN"
    assert error_code(client_for(other).post("/v2/alice/tiny/blobs/uploads/")) == "DENIED"
    assert client_for(None).post("/v2/alice/tiny/blobs/uploads/").status_code == 401
    assert client_for(other).post("/v2/mallory/img/blobs/uploads/").status_code == 202


def test_the_token_endpoint(client, owner, other, model):
    """Token protocol: Basic with the hub token as password, scopes granted as allowed (push only with write and
    only where the person may push), a registry token valid only for its scopes; bad credentials refused."""
    _, write = __import__("hub.accounts.models", fromlist=["ApiToken"]).ApiToken.issue(owner, scope="write")
    basic = "Basic " + base64.b64encode(f"anyone:{write}".encode()).decode()
    response = client.get("/v2/token", {"service": "testserver",
                                        "scope": ["repository:alice/img:pull,push", "repository:alice/tiny:pull"]},
                          HTTP_AUTHORIZATION=basic)
    assert response.status_code == 200
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {response.json()['token']}"}
    assert client.post("/v2/alice/img/blobs/uploads/", **bearer).status_code == 202
    outside = client.get("/v2/alice/elsewhere/tags/list", **bearer)  # a scope the token lacks: ask again
    assert outside.status_code == 403 and error_code(outside) == "DENIED"
    assert outside["WWW-Authenticate"].endswith('scope="repository:alice/elsewhere:pull",error="insufficient_scope"')
    pull_only = client.post("/v2/alice/tiny/blobs/uploads/", **bearer)
    assert pull_only.status_code == 403 and "repository:alice/tiny:pull,push" in pull_only["WWW-Authenticate"]

    form = client.post("/v2/token", {"grant_type": "password", "username": "x", "password": write,
                                     "scope": "repository:alice/img:push", "service": "testserver"})
    assert form.status_code == 200 and client.post("/v2/alice/img/blobs/uploads/", HTTP_AUTHORIZATION=(
        f"Bearer {form.json()['token']}")).status_code == 202
    assert error_code(client.get("/v2/token", HTTP_AUTHORIZATION="Basic " + base64.b64encode(
        b"x:hpcf_wrong").decode())) == "UNAUTHORIZED"
    assert error_code(client.get("/v2/token", HTTP_AUTHORIZATION="Basic " + base64.b64encode(
        b"alice:alice-pw-12345").decode())) == "UNAUTHORIZED"
    assert error_code(client.get("/v2/alice/tiny/tags/list", HTTP_AUTHORIZATION="Bearer forged")) == "UNAUTHORIZED"
    assert error_code(client.post("/v2/token", {"grant_type": "refresh_token"})) == "invalid"


def test_private_artifacts(owner, other, collaborator, publish, client):
    """A private artifact: 401 with the challenge to the anonymous (as for a missing one), NAME_UNKNOWN to another
    person (as for a missing one), its manifest to owner and collaborators."""
    publish(owner, "hidden", FILES, label="1.0", visibility="private", collaborators=[collaborator])
    weights = f"sha256:{sha(FILES['weights.bin'])}"
    for path in ("manifests/1.0", f"blobs/{weights}", "tags/list"):
        anonymous, missing = client.get(f"/v2/alice/hidden/{path}"), client.get(f"/v2/alice/nothing/{path}")
        assert anonymous.status_code == missing.status_code == 401
        stranger = client_for(other, scope="read")
        assert error_code(stranger.get(f"/v2/alice/hidden/{path}")) == "NAME_UNKNOWN"
        assert error_code(stranger.get(f"/v2/alice/nothing/{path}")) == "NAME_UNKNOWN"
        assert client_for(collaborator, scope="read").get(f"/v2/alice/hidden/{path}").status_code == 200
    anonymous_token = client.get("/v2/token", {"scope": "repository:alice/hidden:pull"}).json()["token"]
    refused = client.get("/v2/alice/hidden/manifests/1.0", HTTP_AUTHORIZATION=f"Bearer {anonymous_token}")
    assert refused.status_code == 401 and b"hidden" not in refused.content.replace(b"alice/hidden", b"")


def test_the_collector_keeps_pushed_blobs_and_open_uploads(pusher, settings):
    """Management: what the registry holds survives the collector; an abandoned upload does not."""
    data = os.urandom(100)
    pusher.post(f"/v2/alice/img/blobs/uploads/?digest=sha256:{sha(data)}", data,
                content_type="application/octet-stream")
    session = pusher.post("/v2/alice/img/blobs/uploads/")["Location"]
    pusher.patch(session, b"abc", content_type="application/octet-stream")
    collect(grace_hours=-1)
    assert pusher.get(f"/v2/alice/img/blobs/sha256:{sha(data)}").status_code == 200
    assert pusher.get(session).status_code == 204
    upload = BlobUpload.objects.get()
    assert pusher.put(f"{session}?digest=sha256:{sha(b'abcdef')}", b"def",
                      content_type="application/octet-stream").status_code == 201
    assert not BlobUpload.objects.filter(pk=upload.pk).exists() and RepoBlob.objects.count() == 2


def _bytes(response) -> bytes:
    """A blob answer's bytes: streamed from the store, or fetched from the presigned URL it redirects to (S3)."""
    if response.status_code in (302, 307):
        import requests

        fetched = requests.get(response["Location"], timeout=30)
        assert fetched.status_code == 200
        return fetched.content
    assert response.status_code == 200, response.content[:300]
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_push_and_pull_on_every_backend(backend, pusher, owner, publish):
    """The chunked upload's parts are staged objects of the store and the blob a blob of it, on the folder store
    and on S3 (where a blob answers with a redirect to a presigned URL, as file downloads do)."""
    publish(owner, "tiny", FILES, label="1.0")
    data = os.urandom(20_000)
    location = _push_blob_chunked(pusher, "alice/img", data)
    answer = pusher.get(location)
    assert answer["Docker-Content-Digest"] == f"sha256:{sha(data)}" and _bytes(answer) == data
    manifest, digest = _image(pusher, "alice/img", data)
    assert pusher.put("/v2/alice/img/manifests/v1", manifest, content_type=OCI_MANIFEST).status_code == 201
    assert pusher.get(f"/v2/alice/img/manifests/{digest}").content == manifest
    layer = pusher.get(f"/v2/alice/tiny/blobs/sha256:{sha(FILES['weights.bin'])}")
    assert _bytes(layer) == FILES["weights.bin"]
    if backend == "s3":
        assert answer.status_code == layer.status_code == 302


def test_a_chunked_body_is_read_where_the_server_decoded_it(rf):
    """containers/image sends compressed layers chunked, without Content-Length: read from a server that decoded
    it (wsgi.input_terminated, as granian says), refused with a coded 411 by one that cannot."""
    import io

    from hub.oci.body import reader
    from hub.oci.errors import OciError

    request = rf.patch("/v2/alice/img/blobs/uploads/x", b"", content_type="application/octet-stream")
    request.META.pop("CONTENT_LENGTH", None)
    request.META["HTTP_TRANSFER_ENCODING"] = "chunked"
    with pytest.raises(OciError) as refused:
        reader(request)
    assert refused.value.code == "LENGTH_REQUIRED" and refused.value.status_code == 411
    request.META.update({"wsgi.input_terminated": True, "wsgi.input": io.BytesIO(b"layer bytes")})
    read = reader(request)
    assert read(5) + read(100) == b"layer bytes" and read(10) == b""


def test_docker_schema_2_manifests_keep_their_media_type(pusher):
    """Push/pull of a Docker image manifest v2 schema 2 and a manifest list: stored and answered as sent."""
    layer = os.urandom(100)
    manifest, _ = _image(pusher, "alice/docker", layer)
    data = json.loads(manifest)
    data["mediaType"] = "application/vnd.docker.distribution.manifest.v2+json"
    data["config"]["mediaType"] = "application/vnd.docker.container.image.v1+json"
    data["layers"][0]["mediaType"] = "application/vnd.docker.image.rootfs.diff.tar.gzip"
    body = json.dumps(data).encode()
    put = pusher.put("/v2/alice/docker/manifests/v2s2", body, content_type=data["mediaType"])
    assert put.status_code == 201
    got = pusher.get("/v2/alice/docker/manifests/v2s2")
    assert got.content == body and got["Content-Type"] == data["mediaType"]
    listed = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
                         "manifests": [{"mediaType": data["mediaType"], "digest": f"sha256:{sha(body)}",
                                        "size": len(body), "platform": {"architecture": "amd64", "os": "linux"}}]})
    assert pusher.put("/v2/alice/docker/manifests/list", listed,
                      content_type="application/vnd.docker.distribution.manifest.list.v2+json").status_code == 201
    head = pusher.head("/v2/alice/docker/manifests/list")
    assert head["Content-Type"] == "application/vnd.docker.distribution.manifest.list.v2+json"
    assert error_code(pusher.put("/v2/alice/docker/manifests/other", body,
                                 content_type=OCI_MANIFEST)) == "MANIFEST_INVALID"  # header and body disagree
    unknown_type = json.dumps({**data, "mediaType": "application/x-mine"})
    assert error_code(pusher.put("/v2/alice/docker/manifests/x", unknown_type,
                                 content_type="application/x-mine")) == "MANIFEST_INVALID"


def test_a_restricted_versions_files_are_neither_pulled_nor_mounted_without_a_grant(owner, other, publish):
    """Restricted files (issue 54) over the registry: its metadata and manifest stay readable, its file blobs are
    a coded 403 to a stranger's registry token, and a mount into their own repository copies nothing."""
    secret = os.urandom(3000)
    _, version = publish(owner, "held", {"weights.bin": secret, "config.json": b"{}"}, label="1.0")
    version.files_access = version.FilesAccess.RESTRICTED
    version.save(update_fields=["files_access"])
    stranger, mine = client_for(other, scope="write"), client_for(owner, scope="read")
    layer = f"sha256:{sha(secret)}"
    assert stranger.get("/v2/alice/held/manifests/1.0").status_code == 200
    refused = stranger.get(f"/v2/alice/held/blobs/{layer}")
    assert refused.status_code == 403 and refused["X-Error-Code"] == "access_restricted"
    assert secret not in refused.content
    assert mine.get(f"/v2/alice/held/blobs/{layer}").getvalue() == secret  # its owner reads it
    mounted = stranger.post(f"/v2/{other.username}/copy/blobs/uploads/?mount={layer}&from=alice/held")
    assert mounted.status_code == 202, mounted.content  # an upload to fill, not a mount
    assert stranger.get(f"/v2/{other.username}/copy/blobs/{layer}").status_code == 404


def test_a_token_limited_to_one_artifact_reaches_no_other_over_the_registry(owner, publish, client):
    """A hub token limited to one artifact (directly, as Basic, or exchanged at the token endpoint) pulls and pushes
    that artifact only: another private artifact of the same person is NAME_UNKNOWN, as it is in the API, and the
    person's own namespace takes no push from it."""
    from hub.accounts.models import ApiToken

    secret = os.urandom(2000)
    mine, _ = publish(owner, "mine", FILES, label="1.0", visibility="private")
    publish(owner, "hidden", {"weights.bin": secret}, label="1.0", visibility="private")
    publish(owner, "open", {"weights.bin": os.urandom(10)}, label="1.0")
    _, raw = ApiToken.issue(owner, scope="publish", artifact=mine)
    direct = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    basic = {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(f"x:{raw}".encode()).decode()}
    scopes = [f"repository:alice/{name}:pull,push" for name in ("mine", "hidden", "img")]
    exchanged = client.get("/v2/token", {"service": "testserver", "scope": scopes}, **basic).json()["token"]
    for auth in (direct, basic, {"HTTP_AUTHORIZATION": f"Bearer {exchanged}"}):
        assert client.get("/v2/alice/mine/manifests/1.0", **auth).status_code == 200
        assert client.get("/v2/alice/open/tags/list", **auth).status_code in (200, 403)  # public: readable
        for path in ("manifests/1.0", "tags/list", f"blobs/sha256:{sha(secret)}"):
            refused = client.get(f"/v2/alice/hidden/{path}", **auth)
            assert refused.status_code in (403, 404) and error_code(refused) in ("NAME_UNKNOWN", "DENIED"), path
            assert secret not in refused.content
        for repo in ("hidden", "img"):
            pushed = client.post(f"/v2/alice/{repo}/blobs/uploads/", **auth)
            assert pushed.status_code in (403, 404) and error_code(pushed) in ("NAME_UNKNOWN", "DENIED"), repo
        assert client.post("/v2/alice/mine/blobs/uploads/", **auth).status_code == 202

"""Hostile input through the real hub (APIClient on PostgreSQL): every attack is a coded 4xx, answered fast
and within bounded memory, and leaves no staged bytes and no half-published version behind."""

from __future__ import annotations

import base64
import io
import json
import time
import tracemalloc
import zipfile

import numpy as np
import pytest

from hub.gateway.protocol import parse_body
from hub.registry.models import Upload, Version
from hub.storage import get_blob_store
from tests.conftest import multipart_file, valid_metadata
from tests.gateway import models
from tests.test_errors import assert_coded

pytestmark = pytest.mark.django_db

ALIAS_BOMB = "\n".join(  # 9 levels of 9 aliases each: 9**9 = 387 million strings once expanded
    ["a: &a [" + ", ".join(['"lol"'] * 9) + "]"]
    + [f"{c}: &{c} [" + ", ".join([f"*{p}"] * 9) + "]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)]
)

# Refused without being read or expanded: a bomb that got through would take minutes or exhaust memory, so this
# bound catches it and still leaves room for a loaded CI machine.
QUICK_S = 10


def versions_url(name: str = "m") -> str:
    return f"/api/v1/artifacts/alice/{name}/versions/"


@pytest.fixture
def model(api):
    assert api.post("/api/v1/artifacts/", {"kind": "model", "name": "m"}, format="json").status_code == 201
    return "m"


def staged_files(settings) -> list:
    return sorted(settings.HUB_UPLOAD_DIR.glob("*")) if settings.HUB_UPLOAD_DIR.exists() else []


# --- nested and oversized JSON ------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [65, 1500, 100_000])
def test_deeply_nested_json_is_a_400_everywhere(api, model, depth):
    deep = b"[" * depth + b"]" * depth
    for method, url in [("POST", "/api/v1/artifacts/"), ("PATCH", "/api/v1/artifacts/alice/m/"),
                        ("POST", "/api/v1/uploads/"), ("POST", versions_url())]:
        response = api.generic(method, url, deep, content_type="application/json")
        assert_coded(response, 400, "malformed_request")
        assert "depth limit exceeded" in response.json()["detail"]
    # the Hugging Face protocol's JSON and NDJSON bodies, and the OCI registry's manifests, read them the same way
    for url, media_type in [("/api/repos/create", "application/json"), ("/api/validate-yaml", "application/json"),
                            ("/alice/m.git/info/lfs/objects/batch", "application/vnd.git-lfs+json"),
                            ("/api/models/alice/m/commit/main", "application/x-ndjson")]:
        response = api.generic("POST", url, deep, content_type=media_type)
        assert_coded(response, 400, "malformed_request")
        assert "depth limit exceeded" in response.json()["error"], url
    response = api.generic("PUT", "/v2/alice/img/manifests/1", deep,
                           content_type="application/vnd.oci.image.manifest.v1+json")
    assert_coded(response, 400, "MANIFEST_INVALID")
    assert "depth limit exceeded" in response.json()["errors"][0]["message"]


def test_an_uploaded_config_json_nested_past_the_limit_is_data_not_a_500(api, model):
    """A Hugging Face ``config.json`` is read in the web process for its class names (and a generation folder's
    model type): one nested 100,000 deep names none, and the version publishes as any file's would."""
    deep = b"[" * 100_000 + b"]" * 100_000
    response = api.post(versions_url(), {"metadata": json.dumps(valid_metadata()),
                                         "config.json": multipart_file("config.json", deep),
                                         "model.safetensors": multipart_file("model.safetensors", b"x" * 64)},
                        format="multipart")
    assert response.status_code == 201, response.content
    assert "labels" not in response.json()["metadata"]


def test_nesting_within_the_limit_is_still_read(api, model):
    nested: object = "leaf"
    for _ in range(20):
        nested = {"k": nested}
    response = api.patch("/api/v1/artifacts/alice/m/", {"title": "T", "extra": nested}, format="json")
    assert response.status_code in (200, 400)  # read: the serializer judges the fields, not the parser
    assert response.json().get("code") != "malformed_request"


def test_a_40_mb_json_body_is_a_413_before_it_is_read(api, settings):
    body = b'{"kind": "model", "name": "big", "title": "' + b"x" * (40 * 2**20) + b'"}'
    started = time.perf_counter()
    response = api.generic("POST", "/api/v1/artifacts/", body, content_type="application/json")
    assert_coded(response, 413, "request_too_large")
    assert time.perf_counter() - started < QUICK_S


def test_oversized_form_fields_are_a_413(api, model, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = api.post(versions_url(), {"metadata": json.dumps(valid_metadata(description="d" * 5000))},
                        format="multipart")
    assert_coded(response, 413, "request_too_large")
    assert not Version.objects.exists()


# --- YAML in a publish's metadata -----------------------------------------------------------------


def publish_form(api, metadata: str, **fields):
    return api.post(versions_url(), {"weights.bin": multipart_file("weights.bin", b"w" * 1000), **fields,
                                     "metadata": metadata}, format="multipart")


@pytest.mark.parametrize("text, fragment", [
    ("a: " + "[" * 5000 + "]" * 5000, "depth limit exceeded"),
    ("a:\n" + "".join("  " * i + "- \n" for i in range(1, 200)), "depth limit exceeded"),
    ("[" * 80 + "]" * 80, "depth limit exceeded"),  # JSON, within orjson's limit, past the hub's
    (ALIAS_BOMB, "aliases expand"),
    ("title: &a [x, *a]", "refers to a node that holds it"),  # a list that contains itself
    ("creators: &a {name: *a}", "refers to a node that holds it"),
    ("title: " + "9" * 10_000, "cannot be read"),
    ("title: .nan", "NaN"),
    ("title: !!binary aGVsbG8=", "cannot store"),
    ("title: [unclosed", "does not parse"),
])
def test_bad_yaml_metadata_is_a_400_that_leaves_nothing(api, model, settings, text, fragment):
    started = time.perf_counter()
    response = publish_form(api, text)
    elapsed = time.perf_counter() - started
    assert_coded(response, 400, "invalid")
    assert fragment in response.json()["detail"] and "metadata" in response.json()["errors"]
    assert elapsed < QUICK_S, f"refusing took {elapsed:.2f} s"
    assert not Version.objects.exists()
    assert staged_files(settings) == []  # the file streamed before the field was read is gone too


def test_alias_bomb_is_refused_in_milliseconds(api, model):
    timings = []
    for _ in range(5):
        started = time.perf_counter()
        assert publish_form(api, ALIAS_BOMB).status_code == 400
        timings.append(time.perf_counter() - started)
    print(f"\nalias bomb ({len(ALIAS_BOMB)} bytes): refused in median {sorted(timings)[2] * 1000:.1f} ms")
    assert sorted(timings)[2] < 0.25


def test_bad_provenance_and_a_good_yaml_with_aliases_and_dates(api, model, settings):
    response = publish_form(api, json.dumps(valid_metadata()), provenance="- relation: [")
    assert_coded(response, 400, "invalid")
    assert "provenance" in response.json()["errors"] and staged_files(settings) == []

    good = ("title: A test artifact\ndescription: Made by the test suite.\nlicense: MIT\nframework: pytorch\n"
            "task: regression\ncreators: &people [{name: Alice Example}]\nextra: {authors: *people, day: 2024-05-01}\n")
    response = publish_form(api, good, version="v1")
    assert response.status_code == 201, response.content
    metadata = response.json()["metadata"]
    assert metadata["creators"] == metadata["extra"]["authors"] == [{"name": "Alice Example"}]
    assert metadata["extra"]["day"] == "2024-05-01"  # a YAML date, stored as JSON text
    assert staged_files(settings) == []


def test_model_card_front_matter_is_bounded_too(api, model, settings):
    card = ("---\n" + ALIAS_BOMB + "\n---\n# A card\n").encode()
    started = time.perf_counter()
    response = api.post(versions_url(), {"README.md": multipart_file("README.md", card),
                                         "metadata": json.dumps(valid_metadata())}, format="multipart")
    assert response.status_code == 400, response.content
    assert "aliases expand" in response.content.decode() and time.perf_counter() - started < QUICK_S
    assert staged_files(settings) == []


# --- multipart files past the size limit ----------------------------------------------------------------


def test_a_file_over_the_limit_is_a_413_and_publishes_nothing(api, model, settings):
    settings.HUB_UPLOAD_MAX_SIZE = 10_000
    response = api.post(versions_url(), {
        "small.bin": multipart_file("small.bin", b"s" * 100),
        "big.bin": multipart_file("big.bin", b"b" * 20_000),
        "version": "v7", "metadata": json.dumps(valid_metadata()),
    }, format="multipart")
    assert_coded(response, 413, "upload_too_large")
    assert "big.bin" in response.json()["detail"]
    assert not Version.objects.exists()
    assert staged_files(settings) == []


# --- resumable uploads ----------------------------------------------------------------------------


def open_upload(api, size: int) -> str:
    response = api.post("/api/v1/uploads/", {"size": size}, format="json")
    assert response.status_code == 201
    return response.json()["id"]


def held(upload: str) -> int:
    """The bytes the hub holds of an upload: its offset, and the parts staged in the object store agree."""
    row = Upload.objects.get(pk=upload)
    staged = [key for key, _ in get_blob_store().iter_staged() if key.startswith(f"uploads/{upload}/")]
    assert len(staged) == len(row.parts)
    return row.received


def test_a_put_without_content_range_must_be_the_declared_size(api, settings):
    upload = open_upload(api, 10)
    url = f"/api/v1/uploads/{upload}"
    started = time.perf_counter()
    response = api.generic("PUT", url, b"x" * (40 * 2**20), content_type="application/octet-stream")
    assert_coded(response, 413, "upload_too_large")
    assert time.perf_counter() - started < QUICK_S
    assert held(upload) == 0  # nothing kept
    assert_coded(api.generic("PUT", url, b"x" * 4, content_type="application/octet-stream"), 400,
                 "upload_size_mismatch")
    assert held(upload) == 0
    response = api.generic("PUT", url, b"x" * 10, content_type="application/octet-stream")
    assert response.status_code == 200 and response["Upload-Offset"] == "10"
    assert api.post(f"{url}/complete", {}, format="json").json()["state"] == Upload.State.COMPLETED


def test_a_chunk_past_the_declared_size_is_refused(api, settings):
    upload = open_upload(api, 10)
    response = api.generic("PUT", f"/api/v1/uploads/{upload}", b"x" * 20, content_type="application/octet-stream",
                           HTTP_CONTENT_RANGE="bytes 0-19/10")
    assert response.status_code in (400, 416) and response.json()["code"] in ("upload_size_mismatch", "invalid_range")
    assert held(upload) == 0


# --- OAI-PMH resumption tokens --------------------------------------------------------------------


def forged(state) -> str:
    return base64.urlsafe_b64encode(json.dumps(state).encode()).decode().rstrip("=")


@pytest.mark.parametrize("token", [
    forged({"prefix": "oai_dc", "from": "", "until": "", "set": "", "after": "x", "cursor": 0}),
    forged({"prefix": "oai_dc", "from": "", "until": "", "set": "", "after": None, "cursor": 0}),
    forged({"prefix": "oai_dc", "from": "", "until": "", "set": "", "after": [1], "cursor": 0}),
    forged({"prefix": "evil", "from": "", "until": "", "set": "", "after": 0, "cursor": 0}),
    forged([1, 2]), "", "....", "a" * 5000,
])
def test_forged_resumption_tokens_are_bad_resumption_tokens(anon, token):
    response = anon.get("/oai", {"verb": "ListRecords", "resumptionToken": token})
    assert response.status_code == 200
    assert b'code="badResumptionToken"' in response.content, response.content[:500]


def test_issued_tokens_work_and_cannot_be_altered(anon, owner, publish, settings):
    from hub.metadata import oai

    settings.HUB_OAI_PAGE_SIZE = 1
    for name in ("one", "two"):
        publish(owner, name)
    first = anon.get("/oai", {"verb": "ListIdentifiers", "metadataPrefix": "oai_dc"}).content.decode()
    token = first.split("<resumptionToken", 1)[1].split(">", 1)[1].split("<", 1)[0]
    assert token and "badResumptionToken" not in first
    page = anon.get("/oai", {"verb": "ListIdentifiers", "resumptionToken": token})
    assert b"<identifier>" in page.content and b"badResumptionToken" not in page.content
    state = oai._decode_token(token)
    evil = oai._encode_token({**state, "prefix": "evil"})  # signed, but not a prefix the hub offers
    tampered = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    for bad in (evil, tampered):
        response = anon.get("/oai", {"verb": "ListIdentifiers", "resumptionToken": bad})
        assert b'code="badResumptionToken"' in response.content


# --- /infer options and .npz bodies ---------------------------------------------------------------


@pytest.fixture
def mlp(owner, publish):
    publish(owner, "mlp", {"mlp.onnx": models.mlp()})
    return "/api/v1/artifacts/alice/mlp/versions/latest/infer"


@pytest.mark.parametrize("option, value", [
    ("output_format", [None, None]), ("output_format", "xml"), ("mode", {}), ("mode", ["sync"]),
    ("threads", 2.7), ("threads", True), ("threads", -1), ("threads", 10**6), ("worker_num", "2.5"),
    ("device", 3), ("if_no_worker", []), ("outputs", [1]), ("outputs", {"a": 1}), ("file", {}),
    ("dataset", ["x"]), ("batch_size", "x"), ("batch_size", 0), ("batch_size", 1.5),
])
def test_every_infer_option_has_a_type_and_a_range(api, mlp, option, value):
    response = api.post(mlp, {"inputs": {"x": [[0.0] * 784]}, option: value}, format="json")
    assert_coded(response, 400, "invalid")
    assert option in response.json()["errors"], response.json()
    # The express path reads requests with the same function: it refuses the same options.
    with pytest.raises(Exception) as raised:
        parse_body({}, json.dumps({"inputs": {}, option: value}).encode(), "application/json")
    assert getattr(raised.value, "error_code", None) == "invalid"


@pytest.mark.parametrize("query", ["threads=2.7", "threads=abc", "mode=fast", "output_format=xml",
                                   "batch_size=-3", "device=tpu"])
def test_query_options_are_checked_the_same_way(api, mlp, query):
    response = api.post(f"{mlp}?{query}", {"inputs": {"x": [[0.0] * 784]}}, format="json")
    assert_coded(response, 400, "invalid")


def test_good_options_still_pass_the_check():
    options, _, _ = parse_body({"threads": "2", "outputs": "a,b"}, json.dumps(
        {"inputs": {}, "mode": "sync", "device": "cpu", "output_format": "npz", "batch_size": 8, "file": "m.onnx",
         "if_no_worker": "queue", "worker_num": None}).encode(), "application/json")
    assert options == {"threads": 2, "outputs": ["a", "b"], "mode": "sync", "device": "cpu", "output_format": "npz",
                       "batch_size": 8, "file": "m.onnx", "if_no_worker": "queue"}


def npz_bomb(megabytes: int) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, x=np.zeros((megabytes * 2**20 // 4 // 784, 784), np.float32))
    return buffer.getvalue()


@pytest.mark.slow
@pytest.mark.cpu
def test_an_npz_bomb_is_refused_before_inflating(api, mlp):
    bomb = npz_bomb(800)
    tracemalloc.start()
    try:
        started = time.perf_counter()
        response = api.post(mlp, bomb, content_type="application/x-npz")
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"\nnpz bomb: {len(bomb) / 1024:.0f} KiB -> 800 MiB refused in {elapsed * 1000:.0f} ms, "
          f"peak traced memory {peak / 2**20:.1f} MiB")
    assert_coded(response, 413, "request_too_large")
    assert "inflates to 800.0 MiB" in response.json()["detail"]
    assert peak < len(bomb) * 4 + 16 * 2**20  # the body and its copies, never the inflated arrays


def test_an_npy_header_that_lies_about_its_shape_is_refused(api, mlp):
    buffer = io.BytesIO()
    np.savez(buffer, x=np.zeros((1, 784), np.float32))
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as archive:
        member = archive.read("x.npy")
    lying = member.replace(b"(1, 784)", b"(10**9,)".replace(b"10**9", b"999999999"), 1)
    forged_zip = io.BytesIO()
    with zipfile.ZipFile(forged_zip, "w") as archive:
        archive.writestr("x.npy", lying)
    response = api.post(mlp, forged_zip.getvalue(), content_type="application/x-npz")
    assert_coded(response, 400, "invalid_inputs")
    assert "declares shape" in response.json()["detail"]


def test_a_small_compressed_npz_still_runs_the_check(api, mlp):
    buffer = io.BytesIO()
    np.savez_compressed(buffer, x=np.zeros((2, 784), np.float32))
    response = api.post(mlp + "?mode=sync", buffer.getvalue(), content_type="application/x-npz")
    # Read and checked against the signature; no worker runs in this test, so the hub says so (503).
    assert response.status_code == 503 and response.json()["code"] == "no_worker", response.content


def test_the_publish_page_reads_its_json_within_the_same_limits(owner, client):
    client.force_login(owner)
    for body, code in ((b"[" * 5000 + b"]" * 5000, "malformed_request"),
                       (b'{"more": "' + b"[" * 100 + b'", "metadata": {}}', None)):
        response = client.post("/publish/", body, content_type="application/json")
        assert response.status_code == 400, response.content
        if code:
            assert response.json()["code"] == code and "depth limit" in response.json()["detail"]
    more = json.dumps({"kind": "model", "name": "w", "metadata": valid_metadata(), "more": ALIAS_BOMB})
    started = time.perf_counter()
    response = client.post("/publish/", more, content_type="application/json")
    assert response.status_code == 400 and "aliases expand" in response.json()["detail"]
    assert time.perf_counter() - started < QUICK_S

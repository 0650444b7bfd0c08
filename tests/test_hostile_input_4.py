"""Hostile input, fourth round (issue 51), the logic tier: files laid out never write into a blob, generation
formats are the hub's own, and the low items answer as documented. The generation engine's walls are in
tests/generation/test_walls.py (a real worker)."""

from __future__ import annotations

import hashlib
import json
import struct
import unicodedata

import pytest
from hpcfair.compute import CodedError

from hub.storage import get_blob_store
from hub.storage.place import create, place
from tests.conftest import client_for, staged

pytestmark = pytest.mark.django_db

PUBLIC = b"id,value\n1,2\n"  # someone else's public file
MINE = b"id,value\n6,6\n"


def blob_bytes(data: bytes) -> bytes:
    with get_blob_store().open(hashlib.sha256(data).hexdigest()) as body:
        return body.read()


@pytest.fixture
def shared_blob(owner, other, publish):
    """``other``'s public dataset and ``owner``'s version whose a/v.csv is the same blob and b/v.csv is not."""
    publish(other, "public-data", {"v.csv": PUBLIC}, kind="dataset")
    _, mine = publish(owner, "collide", {"a/v.csv": PUBLIC, "b/v.csv": MINE}, kind="dataset")
    return mine


def test_place_refuses_a_taken_path_and_never_writes_through_it(tmp_path):
    blob = tmp_path / "blob"
    blob.write_bytes(PUBLIC)
    blob.chmod(0o444)  # as the store keeps them; root could still write into it
    other = tmp_path / "other"
    other.write_bytes(MINE)
    target = place(tmp_path / "v.csv", local=blob)
    assert target.stat().st_ino == blob.stat().st_ino  # a hard link
    for link in (True, False):
        with pytest.raises(FileExistsError):
            place(tmp_path / "v.csv", local=other, link=link)
    (tmp_path / "sym").symlink_to(blob)
    with pytest.raises(FileExistsError):
        place(tmp_path / "sym", opener=lambda: open(other, "rb"), link=False)
    with pytest.raises(FileExistsError):
        create(tmp_path / "v.csv", b"manifest")
    assert blob.read_bytes() == PUBLIC
    copied = place(tmp_path / "copy.csv", local=other, link=False)
    assert copied.read_bytes() == MINE and copied.stat().st_ino != other.stat().st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob", "copy.csv", "other", "sym", "v.csv"]  # no .part


def test_a_jobs_folder_refuses_two_files_on_one_name(shared_blob, tmp_path):
    from hub.jobs import files

    by_path = {f.path: f.blob_id for f in shared_blob.files.all()}
    files.place(by_path["a/v.csv"], tmp_path / "v.csv")
    with pytest.raises(CodedError) as refused:
        files.place(by_path["b/v.csv"], tmp_path / "v.csv")
    assert refused.value.code == "invalid"
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    files.fetch(shared_blob, "a/v.csv", fetched, link=True)  # a symbolic link to the shared blob
    with pytest.raises(CodedError) as refused:
        files.fetch(shared_blob, "b/v.csv", fetched)
    assert "Two files" in refused.value.detail and str(tmp_path) not in refused.value.detail
    assert blob_bytes(PUBLIC) == PUBLIC  # the other person's file downloads as it was published


def test_a_generation_model_folder_keeps_the_versions_paths(shared_blob, tmp_path):
    from hub.generation.engine import model_folder

    wanted = [[f.path, f.blob_id, f.size] for f in shared_blob.files.all()]
    folder = model_folder(wanted, tmp_path / "generation")
    assert (folder / "a" / "v.csv").read_bytes() == PUBLIC and (folder / "b" / "v.csv").read_bytes() == MINE
    assert model_folder(wanted, tmp_path / "generation") == folder  # made once
    twice = [["v.csv", wanted[0][1], wanted[0][2]], ["v.csv", wanted[1][1], wanted[1][2]]]
    with pytest.raises(CodedError) as refused:
        model_folder(twice, tmp_path / "generation")
    assert refused.value.code == "not_runnable"
    with pytest.raises(CodedError):
        model_folder([["../escape", wanted[0][1], wanted[0][2]]], tmp_path / "generation")
    manifest = [[".blobs", wanted[1][1], wanted[1][2]]]  # a file on the cache's own manifest name
    with pytest.raises(FileExistsError):
        model_folder(manifest, tmp_path / "generation")
    assert blob_bytes(PUBLIC) == PUBLIC and blob_bytes(MINE) == MINE


def test_a_typed_generation_format_is_refused_and_never_served(owner, publish, api, tmp_path):
    from hub.generation.services import is_generation_model
    from hub.registry import services
    from hub.registry.models import Artifact

    artifact = services.create_artifact(owner, kind="model", name="typed", title="Typed", description="Typed")
    for form in ("onnx-kv", "onnx-genai"):
        with pytest.raises(Exception) as refused:
            services.create_version(artifact, owner, files=[staged(tmp_path, "kv_config.json", b"{}")],
                                    metadata={"title": "t", "description": "d", "license": "MIT",
                                              "framework": "onnx", "format": form, "task": "text-generation"})
        assert refused.value.code == "invalid_metadata" and "hub's own generation builds" in refused.value.detail
    assert not Artifact.objects.get(pk=artifact.pk).versions.exists()
    _, plain = publish(owner, "plain", {"weights.bin": b"1"})
    plain.metadata = {**plain.metadata, "format": "onnx-kv"}  # a row from before this check
    assert not is_generation_model(plain)


@pytest.mark.parametrize("path, body", [
    ("generate", {"messages": 5}),
    ("generate", {"messages": True}),
    ("generate", {"messages": "hi"}),
    ("openai-chat", {"messages": 5}),
    ("openai-chat", {"messages": [{"role": "user", "content": "x"}], "n": True}),
    ("openai-chat", {"messages": [{"role": "user", "content": "x"}], "n": 2}),
    ("openai-chat", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}),
    ("openai-chat", {"messages": [{"role": "user", "content": "x"}], "user": {"id": 1}}),
    ("openai-chat", {"messages": [{"role": "user", "content": "x"}], "stream": True, "stream_options": "yes"}),
    ("openai-chat", {"messages": [{"role": "user", "content": "x"}], "stream": True,
                     "stream_options": {"include_usage": 1}}),
    ("openai-chat", {"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": True}}),
    ("openai-completions", {"prompt": "x", "max_completion_tokens": 0}),
])
def test_bad_generation_requests_are_4xx(owner, publish, path, body):
    artifact, version = publish(owner, "plain", {"weights.bin": b"123"})
    url = {"generate": f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/generate",
           "openai-chat": "/v1/chat/completions", "openai-completions": "/v1/completions"}[path]
    if path != "generate":
        body = {"model": artifact.full_name, **body}
    refused = client_for(owner).post(url, body, format="json")
    assert refused.status_code == 400, refused.content
    assert refused["X-Error-Code"] == "invalid"


def test_one_persons_generations_are_capped(owner, other, settings):
    from hub.errors import HubError
    from hub.generation.services import hold_stream

    settings.HUB_GENERATE_STREAMS = 2
    first, second = hold_stream(owner), hold_stream(owner)
    with pytest.raises(HubError) as refused:
        hold_stream(owner)
    assert refused.value.code == "too_many_generations" and refused.value.wait > 0
    hold_stream(other)()  # someone else is not counted with them
    first()
    first()  # a release is counted once
    third = hold_stream(owner)
    with pytest.raises(HubError):
        hold_stream(owner)
    second(), third()


def test_a_note_style_without_a_bibliography_is_a_4xx(owner, publish, anon):
    artifact, version = publish(owner, "cited", {"weights.bin": b"1"})
    base = f"/api/v1/artifacts/{artifact.full_name}/versions/{version.label}/metadata/citation"
    for style in ("chicago-notes", "chicago-fullnote-bibliography-short-title-subsequent"):
        refused = anon.get(f"{base}?style={style}")
        assert refused.status_code in (400, 404, 406) and refused.status_code < 500, (style, refused.content)
    assert anon.get(f"{base}?style=apa").status_code == 200


def test_a_deeply_nested_safetensors_header_publishes_without_its_facts(owner, publish):
    header = b"[" * 50_000 + b"]" * 50_000
    _, version = publish(owner, "nested", {"model.safetensors": struct.pack("<Q", len(header)) + header})
    assert "weights" not in version.metadata


def test_names_one_file_system_would_merge_are_refused(owner, publish):
    from hub.errors import HubError

    nfc, nfd = unicodedata.normalize("NFC", "é.csv"), unicodedata.normalize("NFD", "é.csv")
    for files in ({"Data.csv": b"1", "data.csv": b"2"}, {nfc: b"1", nfd: b"2"}, {"a": b"1", "a/b.csv": b"2"}):
        with pytest.raises(HubError) as refused:
            publish(owner, "merge", files, kind="dataset")
        assert refused.value.code == "invalid_path", files


def test_metrics_refuse_any_forwarded_request(client, settings):
    settings.HUB_METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 200
    for header in ("HTTP_X_REAL_IP", "HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_TRUE_CLIENT_IP"):
        assert client.get("/metrics", **{header: "203.0.113.9"}).status_code == 403, header


def test_pages_send_a_content_security_policy(client, owner, publish):
    artifact, _ = publish(owner, "page", {"weights.bin": b"1"})
    for url in ("/", "/browse/", "/accounts/login/", f"/landing/{artifact.pid}"):
        policy = client.get(url)["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "object-src 'none'" in policy and "'unsafe-inline'" not in policy
    assert "Content-Security-Policy" not in client.get("/api/v1/artifacts/")  # JSON answers need none
    assert json.loads(client.get("/api/v1/artifacts/").content)  # and still answer


@pytest.mark.parametrize("location", ["graph.onnx", ".complete", ".blobs"])
def test_a_graphs_data_file_on_a_taken_name_is_refused(owner, publish, settings, tmp_path, location):
    """A graph whose external data names its own file (or the folder's markers) never writes into that blob."""
    import onnx
    from onnx import TensorProto, helper

    from hub.gateway.sessions import model_path

    settings.HUB_GATEWAY_MODEL_DIR = str(tmp_path / "models")
    weight = helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0])
    weight.data_location = TensorProto.EXTERNAL
    weight.ClearField("float_data")
    weight.external_data.add(key="location", value=location)
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], [weight])
    data = helper.make_model(graph).SerializeToString()
    _, version = publish(owner, "self-named", {"graph.onnx": data, location: b"\0\0\x80?"} if location != "graph.onnx"
                         else {"graph.onnx": data})
    files = {f.path: f for f in version.files.all()}
    step = {"sha256": files["graph.onnx"].blob_id, "size": files["graph.onnx"].size, "path": "graph.onnx",
            "beside": [[p, f.blob_id, f.size] for p, f in files.items()]}
    with pytest.raises(CodedError) as refused:
        model_path(step)
    assert refused.value.code == "model_load_failed"
    assert onnx.load_from_string(blob_bytes(data)).graph.name == "g"  # the graph's blob as published
    assert blob_bytes(data) == data

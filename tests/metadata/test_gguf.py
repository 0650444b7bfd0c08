"""Issue 59, point 3: GGUF as a model format. Real GGUF files written by the ``gguf`` package's ``GGUFWriter``
(a tiny random Llama) are told by their magic bytes, read in the sandbox child into the version's metadata
(architecture, context length, quantization, parameters, tokenizer, chat template rendered in the sandboxed
renderer) and facets; hostile headers are coded 400s with nothing stored."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest
from urllib3 import encode_multipart_formdata

from hub.errors import STATUS, HubError
from hub.metadata import gguf
from hub.registry.models import Version
from tests.conftest import valid_metadata
from tests.metadata import gguf_files

pytestmark = pytest.mark.django_db


def info(path: Path, name: str | None = None):
    """A ``FileInfo``-like view of a local file."""
    data = path.read_bytes()
    return SimpleNamespace(path=name or path.name, size=len(data), head=lambda n: data[:n])


def publish(api, name, files):
    assert api.post("/api/v1/artifacts/", {"kind": "model", "name": name}, format="json").status_code == 201
    metadata = {**valid_metadata("model"), "task": "text-generation"}
    parts = [("metadata", json.dumps(metadata))]
    parts += [("files", (path, data, "application/octet-stream")) for path, data in files.items()]
    body, content_type = encode_multipart_formdata(parts)
    return api.generic("POST", f"/api/v1/artifacts/alice/{name}/versions/", body, content_type=content_type)


def test_a_published_gguf_is_described_and_found_by_its_quantization(api, anon, tmp_path):
    wrote = gguf_files.tiny_llama(tmp_path / "tiny.gguf", quantized=True)
    response = publish(api, "tiny-llama-gguf", {"tiny-q8_0.gguf": (tmp_path / "tiny.gguf").read_bytes()})
    assert response.status_code == 201, response.content
    metadata = Version.objects.get(pid=response.json()["pid"]).metadata
    assert (metadata["format"], metadata["quantization"], metadata["parameters"]) == ("gguf", "Q8_0",
                                                                                      wrote["parameters"])
    facts = metadata["gguf"]["tiny-q8_0.gguf"]
    assert facts["architecture"] == "llama" and facts["context_length"] == 256 and facts["tensors"] == 21
    assert facts["tokenizer_model"] == "llama" and facts["vocabulary"] == len(gguf_files.TOKENS)
    assert facts["chat_template"] == gguf_files.TEMPLATE
    # rendered by the sandboxed renderer, with the file's own bos and eos tokens
    assert facts["chat_template_example"] == ("<s><|system|>You are a helpful assistant.</s><|user|>Hello!</s>"
                                              "<|assistant|>")
    assert {"gguf", "quantization"} <= set(metadata["derived"])
    found = anon.get("/api/v1/artifacts/", {"quantization": "Q8_0"}).json()
    assert [r["name"] for r in found["results"]] == ["tiny-llama-gguf"]
    assert [r["name"] for r in anon.get("/api/v1/artifacts/", {"format": "gguf"}).json()["results"]] == [
        "tiny-llama-gguf"]
    assert anon.get("/api/v1/artifacts/", {"quantization": "Q4_0"}).json()["count"] == 0
    assert {"value": "Q8_0", "count": 1} in anon.get("/api/v1/artifacts/").json()["facets"]["quantization"]


def test_gguf_is_told_by_its_magic_bytes_not_its_name(tmp_path):
    gguf_files.tiny_llama(tmp_path / "weights.bin")
    (tmp_path / "fake.gguf").write_bytes(b"PK\x03\x04" + bytes(100))
    facts = gguf.facts([info(tmp_path / "weights.bin")])
    assert facts["format"] == "gguf" and facts["quantization"] == "F32"
    assert facts["gguf"]["weights.bin"]["architecture"] == "llama"
    with pytest.raises(HubError) as refused:
        gguf.facts([info(tmp_path / "fake.gguf")])
    assert refused.value.code == "gguf_invalid" and "does not start with GGUF's magic" in refused.value.message
    assert gguf.facts([info(tmp_path / "fake.gguf", "notes.bin")]) == {}  # another binary: not GGUF


@pytest.mark.slow
@pytest.mark.cpu  # a sandboxed child: over 1 s on a quiet machine
def test_a_chat_template_that_fails_is_reported_not_run_outside_the_sandbox(tmp_path):
    bad = "{{ raise_exception('only user and assistant roles') }}"
    gguf_files.tiny_llama(tmp_path / "a.gguf", template=bad)
    facts = gguf.read(info(tmp_path / "a.gguf"))
    assert "only user and assistant roles" in facts["chat_template_error"] and "chat_template_example" not in facts
    escape = "{{ ''.__class__.__mro__[1].__subclasses__() }}"  # Jinja's sandbox refuses Python's internals
    gguf_files.tiny_llama(tmp_path / "b.gguf", template=escape)
    assert "SecurityError" in gguf.read(info(tmp_path / "b.gguf"))["chat_template_error"]


def _hostile(tmp_path: Path) -> dict[str, tuple[Path, str, str]]:
    source = tmp_path / "good.gguf"
    gguf_files.tiny_llama(source)
    offset = gguf_files.first_tensor_offset_field(source)
    size = source.stat().st_size
    key_length_at = 24  # the first key's length (uint64)
    return {
        "a billion tensors": (gguf_files.patched(source, tmp_path / "1.gguf", 8, struct.pack("<Q", 10**9)),
                              "gguf_too_large", "announces 1000000000 tensors"),
        "more tensors than the file holds": (gguf_files.patched(source, tmp_path / "2.gguf", 8,
                                                                struct.pack("<Q", 90_000)),
                                             "gguf_invalid", "more than a file of"),
        "a string of 2**60 bytes": (gguf_files.patched(source, tmp_path / "3.gguf", key_length_at,
                                                       struct.pack("<Q", 2**60)),
                                    "gguf_too_large", "a string of 1152921504606846976 bytes"),
        "a tensor past the end": (gguf_files.patched(source, tmp_path / "4.gguf", offset, struct.pack("<Q", size)),
                                  "gguf_invalid", "lies outside the file"),
        "a tensor on another's bytes": (gguf_files.patched(source, tmp_path / "5.gguf", offset, struct.pack("<Q", 32)),
                                        "gguf_invalid", "overlaps another"),
        "cut short": (_cut(source, tmp_path / "6.gguf", 1000), "gguf_invalid", "ends inside its header"),
        "an array of 2**40 tokens": (_huge_array(tmp_path / "7.gguf"), "gguf_too_large", "an array of 1099511627776"),
    }


def _cut(source: Path, target: Path, length: int) -> Path:
    target.write_bytes(source.read_bytes()[:length])
    return target


def _huge_array(target: Path) -> Path:
    """A header whose one key is a uint32 array announcing 2**40 elements."""
    key = b"tokenizer.ggml.scores"
    target.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
                       + struct.pack("<IIQ", 9, 4, 2**40) + bytes(64))
    return target


@pytest.mark.parametrize("case", ["a billion tensors", "more tensors than the file holds", "a string of 2**60 bytes",
                                  "a tensor past the end", "a tensor on another's bytes", "cut short",
                                  "an array of 2**40 tokens"])
def test_hostile_headers_are_coded_refusals(tmp_path, case):
    path, code, words = _hostile(tmp_path)[case]
    with pytest.raises(HubError) as refused:
        gguf.read(info(path, "model.gguf"))
    assert refused.value.code == code and STATUS[code] == 400, refused.value.message
    assert words in refused.value.message and refused.value.message.startswith("model.gguf: ")
    assert "/tmp" not in refused.value.message


def test_a_hostile_upload_is_a_400_and_nothing_is_published(api, tmp_path):
    path, code, _ = _hostile(tmp_path)["a tensor past the end"]
    response = publish(api, "liar", {"liar.gguf": path.read_bytes()})
    assert response.status_code == 400 and response["X-Error-Code"] == code == response.json()["code"]
    assert not Version.objects.filter(artifact__name="liar").exists()


def test_a_header_larger_than_the_hub_reads_is_refused(tmp_path, settings):
    settings.HUB_GGUF_HEADER_MB = 1
    gguf_files.tiny_llama(tmp_path / "long.gguf", template="x" * (1 << 20))  # a 1 MiB template
    with pytest.raises(HubError) as refused:
        gguf.read(info(tmp_path / "long.gguf"))
    assert refused.value.code == "gguf_too_large" and "runs past the first 1048576 bytes" in refused.value.message


def test_a_gguf_version_is_served_as_it_is_and_listed(api, tmp_path):
    """No build: llama.cpp serves the version's GGUF file itself (hub.generation, tests/generation/test_gguf_worker.py
    through a worker), and /v1/models names it."""
    from hub.generation import services

    gguf_files.tiny_llama(tmp_path / "tiny.gguf")
    response = publish(api, "served-gguf", {"README.md": b"# tiny", "tiny.gguf": (tmp_path / "tiny.gguf").read_bytes()})
    assert response.status_code == 201, response.content
    version = Version.objects.get(pid=response.json()["pid"])
    assert services.generation_model(version) == version and services.gguf_file(version) == "tiny.gguf"
    assert not version.jobs.filter(kind="generation").exists()
    listed = [m["id"] for m in api.get("/v1/models").json()["data"]]
    assert f"alice/served-gguf@{version.label}" in listed

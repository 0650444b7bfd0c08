"""The real clients against a live hub on 127.0.0.1 (pytest-django's live server), nothing patched: the ORAS
Python SDK pulls a version byte for byte and pushes an artifact; skopeo and podman push an image (a tiny rootfs
made with ``podman import``) with a hub token, pull it back from the registry into a clean store and read the same
bytes; a private artifact is refused to the wrong token by each of them."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from hub.accounts.models import ApiToken

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]
ROOT = Path(__file__).resolve().parents[2]

FILES = {"README.md": b"# Tiny\n",  # a card: the hub would write one
         "config.json": b'{"hidden": 4}\n', "weights.bin": os.urandom(300_000), "sub/notes.txt": b"notes\n"}
SECRET = {**FILES, "weights.bin": os.urandom(1000)}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        pytest.fail(f"{program} is not installed: scripts/system-deps.sh test installs it "
                    "(scripts/debian-packages.txt)")
    return path


@pytest.fixture
def registry(live_server) -> str:
    """``127.0.0.1:PORT``: the live hub as a registry host."""
    return f"127.0.0.1:{urlsplit(live_server.url).port}"


def run(*args: str, stdin: str | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "CONTAINERS_CONF": str(ROOT / "deploy" / "podman" / "containers.conf")}
    return subprocess.run(list(args), input=stdin, capture_output=True, text=True, timeout=timeout, env=env)


ORAS = r"""
import hashlib, json, os, pathlib, sys
import oras.client
args = json.loads(sys.argv[1])
client = oras.client.OrasClient(hostname=args["host"], insecure=True)
if args.get("token"):
    client.login(username="anyone", password=args["token"], hostname=args["host"])
out = {}
if args.get("push"):
    os.chdir(args["push_dir"])
    client.push(files=args["push"], target=args["push_target"])
try:
    files = client.pull(target=args["target"], outdir=args["outdir"])
    root = pathlib.Path(args["outdir"])
    out["files"] = {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                    for p in root.rglob("*") if p.is_file()}
except Exception as error:  # the test compares the refusal
    out["error"] = f"{type(error).__name__}: {error}"[:400]
print(json.dumps(out))
"""


CALLS = itertools.count()


def oras(tmp_path: Path, **args) -> dict:
    outdir = tmp_path / f"oras-{next(CALLS)}"
    args.setdefault("outdir", str(outdir))
    home = tmp_path / f"home-{outdir.name}"  # oras's login writes a Docker config there: one per call
    home.mkdir()
    out = subprocess.run([sys.executable, "-c", ORAS, json.dumps(args)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env={**os.environ, "HOME": str(home)})
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_oras_pulls_a_version_and_pushes_an_artifact(registry, owner, other, publish, tmp_path):
    publish(owner, "tiny", FILES, label="1.0")
    publish(owner, "hidden", SECRET, label="1.0", visibility="private")
    pulled = oras(tmp_path, host=registry, target=f"{registry}/alice/tiny:1.0")
    assert pulled.get("files") == {path: sha(data) for path, data in FILES.items()}, pulled

    _, write = ApiToken.issue(owner, scope="write")
    _, stranger = ApiToken.issue(other, scope="read")
    assert oras(tmp_path, host=registry, target=f"{registry}/alice/hidden:1.0", token=write)["files"] == {
        path: sha(data) for path, data in SECRET.items()}
    for token in (None, stranger):
        refused = oras(tmp_path, host=registry, target=f"{registry}/alice/hidden:1.0", token=token)
        assert "error" in refused and "files" not in refused, refused

    folder = tmp_path / "to-push"
    folder.mkdir()
    (folder / "result.csv").write_bytes(b"a,b\n1,2\n")
    pushed = oras(tmp_path, host=registry, token=write, push=["result.csv"], push_dir=str(folder),
                  push_target=f"{registry}/alice/results:run-1", target=f"{registry}/alice/results:run-1")
    assert pushed.get("files") == {"result.csv": sha(b"a,b\n1,2\n")}, pushed


def tiny_image(tmp_path: Path, tag: str) -> str:
    """A two-file rootfs imported into podman's store as ``tag``."""
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "hello.txt").write_bytes(b"hello from the hub's registry\n" + os.urandom(64).hex().encode())
    (root / "payload.bin").write_bytes(os.urandom(200_000))
    archive = tmp_path / "rootfs.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(root, arcname=".")
    imported = run(need("podman"), "import", "--change", 'CMD ["/bin/cat", "/etc/hello.txt"]', str(archive), tag)
    assert imported.returncode == 0, imported.stderr
    return tag


def blobs_of(folder: Path) -> dict[str, str]:
    """A ``dir:`` copy's files (manifest and blobs) by name -> sha256."""
    return {p.name: sha(p.read_bytes()) for p in folder.iterdir() if p.is_file() and p.name != "version"}


def embedded_token(var: Path, username: str) -> str:
    """A write token of ``username`` (made if needed) on the embedded hub whose var dir is ``var``."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"}}
    env["HUB_VAR_DIR"] = str(var)
    code = f"from django.contrib.auth.models import User\nUser.objects.get_or_create(username={username!r})\n"
    subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=120)
    return subprocess.run([sys.executable, "manage.py", "hub_token", username, "--scope", "write"], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=True, timeout=120).stdout.strip()


@pytest.mark.slow
def test_podman_and_skopeo_push_and_pull_an_image(embedded_hub, tmp_path):
    """Through the hub as deployed (granian: podman sends a compressed layer as a chunked PATCH)."""
    podman, skopeo = need("podman"), need("skopeo")
    url, write, var = embedded_hub
    registry = urlsplit(url).netloc
    stranger = embedded_token(var, "mallory")
    local = tiny_image(tmp_path, f"localhost/hpcfair-oci-test/tiny:{os.getpid()}")
    target = f"{registry}/demo/cube-mlcube:1.0"
    try:
        pushed = run(podman, "push", "--tls-verify=false", "--creds", f"demo:{write}",
                     "--digestfile", str(tmp_path / "digest"), local, f"docker://{target}")
        assert pushed.returncode == 0, pushed.stderr
        digest = (tmp_path / "digest").read_text().strip()

        # skopeo reads it back (tags, raw manifest, every blob) into a folder: the same manifest digest
        tags = run(skopeo, "list-tags", "--tls-verify=false", "--creds", f"demo:{write}",
                   f"docker://{registry}/demo/cube-mlcube")
        assert tags.returncode == 0 and json.loads(tags.stdout)["Tags"] == ["1.0"], tags.stderr
        copied = tmp_path / "copied"
        copy = run(skopeo, "copy", "--src-tls-verify=false", "--src-creds", f"demo:{write}",
                   f"docker://{target}", f"dir:{copied}")
        assert copy.returncode == 0, copy.stderr
        assert f"sha256:{sha((copied / 'manifest.json').read_bytes())}" == digest
        # a second repository: the layers are mounted from the first, and the copy is the same bytes
        again = run(skopeo, "copy", "--dest-tls-verify=false", "--dest-creds", f"demo:{write}", f"dir:{copied}",
                    f"docker://{registry}/demo/cube-mlcube-gpu:1.0")
        assert again.returncode == 0, again.stderr
        copied_again = tmp_path / "copied-again"
        assert run(skopeo, "copy", "--src-tls-verify=false", "--src-creds", f"demo:{write}",
                   f"docker://{registry}/demo/cube-mlcube-gpu:1.0", f"dir:{copied_again}").returncode == 0
        assert blobs_of(copied_again) == blobs_of(copied)

        # podman pulls it into its store after the local image is gone: the same digest and files
        assert run(podman, "rmi", "--force", local).returncode == 0
        pulled = run(podman, "pull", "--tls-verify=false", "--creds", f"demo:{write}", target)
        assert pulled.returncode == 0, pulled.stderr
        inspected = json.loads(run(podman, "image", "inspect", target).stdout)[0]
        assert inspected["Digest"] == digest

        # a repository that is no artifact is its owner's: a stranger neither reads nor pushes there
        refused = run(skopeo, "inspect", "--raw", "--tls-verify=false", "--creds", f"mallory:{stranger}",
                      f"docker://{target}")
        assert refused.returncode != 0 and "cube-mlcube" in refused.stderr
        denied = run(skopeo, "copy", "--dest-tls-verify=false", "--dest-creds", f"mallory:{stranger}",
                     f"dir:{copied}", f"docker://{registry}/demo/cube-mlcube:evil")
        assert denied.returncode != 0
        assert json.loads(run(skopeo, "list-tags", "--tls-verify=false", "--creds", f"demo:{write}",
                              f"docker://{registry}/demo/cube-mlcube").stdout)["Tags"] == ["1.0"]
    finally:
        run(podman, "rmi", "--force", local, target)


def test_skopeo_reads_an_artifacts_manifest_and_refuses_a_private_one(registry, owner, other, publish, tmp_path):
    skopeo = need("skopeo")
    publish(owner, "tiny", FILES, label="1.0")
    publish(owner, "hidden", SECRET, label="1.0", visibility="private")
    raw = run(skopeo, "inspect", "--raw", "--tls-verify=false", f"docker://{registry}/alice/tiny:1.0")
    assert raw.returncode == 0, raw.stderr
    layers = {layer["annotations"]["org.opencontainers.image.title"]: layer["digest"]
              for layer in json.loads(raw.stdout)["layers"]}
    assert layers == {path: f"sha256:{sha(data)}" for path, data in FILES.items()}
    _, stranger = ApiToken.issue(other, scope="read")
    _, reader = ApiToken.issue(owner, scope="read")
    for creds in ([], ["--creds", f"mallory:{stranger}"]):
        refused = run(skopeo, "inspect", "--raw", "--tls-verify=false", *creds, f"docker://{registry}/alice/hidden:1.0")
        assert refused.returncode != 0 and "hidden" in refused.stderr  # the client names what it asked for
    allowed = run(skopeo, "inspect", "--raw", "--tls-verify=false", "--creds", f"alice:{reader}",
                  f"docker://{registry}/alice/hidden:1.0")
    assert allowed.returncode == 0, allowed.stderr

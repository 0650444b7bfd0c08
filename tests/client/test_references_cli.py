"""``hpcfair upload --reference PATH --fetch URL`` against a live hub and a real Celery worker (which runs the
``reference`` and ``fetch`` jobs); the landing page says where the data lives and how big it is; ``hpcfair
download`` of referenced data works where the path is readable and says where the data lives where not."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import start_worker, stop_process, worker_env

pytestmark = pytest.mark.worker


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A declared root with a campaign's folder, a loopback HTTP server of one file, and a worker that reads both."""
    root = tmp_path_factory.mktemp("site")
    lustre, www = root / "lustre", root / "www"
    (lustre / "run1" / "fields").mkdir(parents=True)
    www.mkdir()
    (lustre / "run1" / "fields" / "t.bin").write_bytes(os.urandom(400_000))
    (lustre / "run1" / "notes.txt").write_text("run 1 of the campaign\n")
    (www / "mesh.bin").write_bytes(os.urandom(250_000))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(www)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    proc = start_worker(root, worker_env(root, HUB_REFERENCE_ROOTS=str(lustre), HUB_FETCH_ALLOWED=url))
    yield {"root": root, "lustre": lustre, "www": www, "url": url}
    stop_process(proc)
    httpd.shutdown()


@pytest.mark.django_db(transaction=True)
def test_upload_by_reference_and_fetch_then_download(site, live_server, owner, tmp_path, settings):
    from hub.accounts.models import ApiToken

    settings.HUB_PUBLIC_URL = live_server.url
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(site["root"] / "blobs")}
    settings.HUB_UPLOAD_DIR = site["root"] / "uploads"
    settings.HUB_REFERENCE_ROOTS = [str(site["lustre"])]
    settings.HUB_FETCH_ALLOWED = [site["url"]]
    _, token = ApiToken.issue(owner, scope="write")
    (tmp_path / "meta.yaml").write_text("title: Campaign\ndescription: A simulation campaign.\n"
                                        "creators: [{name: A}]\nlicense: MIT\n")
    env = {**os.environ, "HPCFAIR_ENDPOINT": live_server.url, "HPCFAIR_TOKEN": token}

    def cli(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "hpcfair.cli", *args], capture_output=True, text=True,
                              env={**env, **extra}, timeout=240)

    run1 = site["lustre"] / "run1"
    done = cli("upload", "campaign", "--kind", "dataset", "--metadata", str(tmp_path / "meta.yaml"),
               "--reference", str(run1), "--fetch", site["url"] + "mesh.bin", "--json")
    assert done.returncode == 0, done.stderr
    import json

    files = {f["path"]: f for f in json.loads(done.stdout)["files"]}
    assert sorted(files) == ["README.md", "mesh.bin", "run1/fields/t.bin", "run1/notes.txt"]  # and the hub's card
    assert files["run1/fields/t.bin"]["location"] == str(run1 / "fields" / "t.bin")
    assert files["run1/fields/t.bin"]["sha256"] == hashlib.sha256((run1 / "fields" / "t.bin").read_bytes()).hexdigest()
    assert "location" not in files["mesh.bin"]  # fetched: now in the hub's store
    assert files["mesh.bin"]["sha256"] == hashlib.sha256((site["www"] / "mesh.bin").read_bytes()).hexdigest()

    page = cli("show", "alice/campaign", "--json")
    assert page.returncode == 0, page.stderr
    from django.test import Client

    html = Client().get(f"/{json.loads(page.stdout)['pid']}", HTTP_ACCEPT="text/html", follow=True).content.decode()
    assert "Data by reference, on the site&#x27;s file system" in html or "Data by reference, on the site's" in html
    assert str(run1 / "fields" / "t.bin") in html and "390.6" in html  # where, and how big (400,000 bytes)

    got = cli("download", "alice/campaign", "--dest", str(tmp_path / "here"))
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "here" / "run1" / "fields" / "t.bin").read_bytes() == (run1 / "fields" / "t.bin").read_bytes()
    assert (tmp_path / "here" / "mesh.bin").read_bytes() == (site["www"] / "mesh.bin").read_bytes()

    (run1 / "notes.txt").unlink()  # gone where it lived: neither this machine nor the hub can read it
    gone = cli("download", "alice/campaign", "--dest", str(tmp_path / "there"), "--file", "run1/notes.txt",
               HPCFAIR_CACHE=str(tmp_path / "fresh-cache"))
    assert gone.returncode == 1, gone.stdout
    assert f"data by reference at {run1 / 'notes.txt'}" in gone.stderr
    assert "This machine cannot read" in gone.stderr

"""The conversion sandbox, probed from inside: a child that got loose from the unpickler still reads no
secret, writes nowhere but its work folder, reaches no network and is not root.

The probe runs through ``sandbox.execute``, exactly as a conversion child runs (same bwrap arguments,
environment, limits and user)."""

from __future__ import annotations

import json
import os
import pickle
import socket
import sys
import textwrap
from pathlib import Path

import pytest
from hpcfair.convert import ConversionError, convert_file, sandbox

from tests.conftest import ROOT
from tests.conversions import models
from tests.system_packages import require_program

# Tests that start a sandboxed child are slow; reading back what it wrote is the fast tier's.


@pytest.fixture(autouse=True)
def _bubblewrap():
    """Missing bubblewrap fails under `make test` (which installs it), naming the package; skips elsewhere."""
    require_program("bwrap")

PROBE = """
import json, os, socket, sys
found = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups()}
def read(key, path):
    try:
        with open(path, "rb") as handle:
            found[key] = handle.read(200).decode(errors="replace")
    except OSError as exc:
        found[key] = f"refused {type(exc).__name__}"
def listing(key, path):
    try:
        found[key] = sorted(os.listdir(path))
    except OSError as exc:
        found[key] = f"refused {type(exc).__name__}"
def write(key, path):
    try:
        with open(path, "w") as handle:
            handle.write("escaped")
        found[key] = "written"
    except OSError as exc:
        found[key] = f"refused {type(exc).__name__}"
for key, path in TARGETS["read"].items():
    read(key, path)
for key, path in TARGETS["list"].items():
    listing(key, path)
for key, path in TARGETS["write"].items():
    write(key, path)
try:
    socket.create_connection(("127.0.0.1", TARGETS["port"]), timeout=3)
    found["tcp_host"] = "connected"
except OSError as exc:
    found["tcp_host"] = f"refused {type(exc).__name__}"
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3)
    found["tcp_internet"] = "connected"
except OSError as exc:
    found["tcp_internet"] = f"refused {type(exc).__name__}"
try:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.sendto(b"x", ("8.8.8.8", 53))
    found["udp_internet"] = "sent"
except OSError as exc:
    found["udp_internet"] = f"refused {type(exc).__name__}"
found["processes"] = len([p for p in os.listdir("/proc") if p.isdigit()])
import numpy, sklearn, hpcfair.convert  # the Python environment is there
found["python"] = sys.version.split()[0]
print(json.dumps(found))
"""


@pytest.fixture
def planted(tmp_path):
    """Secrets where the hub keeps its data, in HOME, and a blob dir: (paths, text)."""
    text = f"SECRET-{os.getpid()}-{tmp_path.name}"
    places = {
        "hub_var": ROOT / "var" / f"sandbox-probe-{os.getpid()}" / "hub.sqlite3",
        "home": Path.home() / f".hpcfair-sandbox-probe-{os.getpid()}",
        "blob": tmp_path / "blobs" / "ab" / "abcdef",
        "upload": tmp_path / "uploads" / "staged.bin",
    }
    made = [folder for folder in (ROOT / "var", places["hub_var"].parent) if not folder.exists()]
    for path in places.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    yield places, text
    places["home"].unlink()
    places["hub_var"].unlink()
    for folder in reversed(made):  # the checkout's var/ too, when the probe made it (a clean checkout: tests/tiers.py)
        folder.rmdir()


@pytest.mark.slow
@pytest.mark.cpu  # a sandboxed child
def test_a_loose_child_reads_no_secret_writes_only_its_folder_and_has_no_network(tmp_path, planted):
    places, text = planted
    work = tmp_path / "work"
    work.mkdir()
    (work / "model.pkl").write_bytes(pickle.dumps({"weights": [1, 2, 3]}))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    site_packages = Path(next(p for p in sys.path if p.endswith("site-packages")))
    targets = {
        "read": {"shadow": "/etc/shadow", "passwd": "/etc/passwd", "hub_settings": str(ROOT / "hub" / "settings.py"),
                 **{key: str(path) for key, path in places.items()}, "model": str(work / "model.pkl")},
        "list": {"root_home": str(Path.home()), "home_dirs": "/home", "hub_var_dir": str(places["hub_var"].parent),
                 "blob_dir": str(places["blob"].parent), "etc": "/etc", "work": str(work)},
        "write": {"outside_repo": str(ROOT / f"escaped-{os.getpid()}"), "usr": "/usr/escaped",
                  "site_packages": str(site_packages / "escaped.py"),
                  "hpcfair": str(Path(sandbox.__file__).parent / "escaped.py"),
                  "tmp": str(tmp_path / "escaped"), "work": str(work / "inside.txt")},
        "port": listener.getsockname()[1],
    }
    script = f"TARGETS = {json.dumps(targets)}\n" + textwrap.dedent(PROBE)
    try:
        out = sandbox.execute([sys.executable, "-c", script], work, hide=[places["blob"].parent.parent])
    finally:
        listener.close()
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.splitlines()[-1])
    for key in ("shadow", "passwd", "hub_settings", *places):
        assert found[key].startswith("refused"), (key, found[key])
    assert found["model"].startswith("\x80") or "weights" in found["model"]  # its own file is there
    for key in ("home_dirs", "hub_var_dir", "blob_dir"):
        assert found[key] == "refused FileNotFoundError", (key, found[key])
    # HOME shows at most the way to the Python environment, when the interpreter lives there (pyenv)
    home = Path.home().resolve()
    python_in_home = {Path(p).resolve().relative_to(home).parts[0] for p in (sys.base_prefix, sys.prefix)
                      if Path(p).resolve().is_relative_to(home)}
    assert found["root_home"] == "refused FileNotFoundError" or set(found["root_home"]) <= python_in_home, \
        found["root_home"]
    assert "shadow" not in found["etc"] and "passwd" not in found["etc"], found["etc"]
    assert found["work"] == "written" and (work / "inside.txt").read_text() == "escaped"
    for key in ("outside_repo", "usr", "site_packages", "hpcfair"):
        assert found[key].startswith("refused"), (key, found[key])
    assert not (ROOT / f"escaped-{os.getpid()}").exists() and not (site_packages / "escaped.py").exists()
    assert not (tmp_path / "escaped").exists()  # /tmp inside is private
    assert found["tcp_host"].startswith("refused") and found["tcp_internet"].startswith("refused")
    assert found["udp_internet"].startswith("refused")
    assert found["processes"] <= 3  # a private PID namespace: bwrap and the probe
    assert text not in out.stdout and text not in out.stderr
    if os.geteuid() == 0:
        assert found["uid"] == found["gid"] == sandbox.NOBODY and found["groups"] in ([], [sandbox.NOBODY])


@pytest.mark.slow
@pytest.mark.cpu  # a sandboxed child
def test_conversion_result_says_which_protections_applied(tmp_path):
    name, _ = models.random_forest(tmp_path)
    report = convert_file(tmp_path / name, tmp_path / "forest.onnx")
    protection = report["sandbox"]
    assert protection["isolation"] == "bubblewrap" and protection["network"] == "none"
    assert "Python environment" in protection["filesystem"]
    assert protection["user"] == ("nobody (uid 65534)" if os.geteuid() == 0 else f"uid {os.geteuid()}")


@pytest.mark.slow
@pytest.mark.cpu  # a limited child
def test_without_bubblewrap_only_the_limits_apply_and_the_result_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    name, _ = models.random_forest(tmp_path)
    report = convert_file(tmp_path / name, tmp_path / "forest.onnx")
    assert report["verification"]["passed"] is True
    assert report["sandbox"]["isolation"] == "rlimits"
    assert report["sandbox"]["filesystem"] == "everything the worker can read"
    # The memory limit follows the model's size (8 GiB and 80 MB per MB of model, within the machine's memory).
    assert report["sandbox"]["limits"]["memory_mb"] == sandbox.memory_for((tmp_path / name).stat().st_size) >= 8192


def test_what_the_child_wrote_is_read_only_when_it_is_a_plain_file_inside_its_folder(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("SECRET")
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    (work / "model.onnx").symlink_to(secret)
    os.link(secret, work / "hard.onnx")
    (work / "linked").symlink_to(tmp_path)
    (work / "out" / "ok.onnx").write_bytes(b"onnx")
    assert sandbox.output_file(work, "out/ok.onnx") == work / "out" / "ok.onnx"
    for relative in ("model.onnx", "hard.onnx", "linked/secret", "../secret", "/etc/shadow", "out", "missing"):
        with pytest.raises(ConversionError) as caught:
            sandbox.output_file(work, relative)
        assert caught.value.code == "conversion_crashed" and "SECRET" not in caught.value.detail, relative


@pytest.mark.slow
def test_python_started_by_a_path_with_dots_still_runs_the_sandbox(tmp_path, monkeypatch):
    """``cd papers && ../.venv/bin/python listing3.py``: sys.executable holds ``..``, which the sandbox's view
    cannot follow; the child is started by the normalised path (the venv's link kept)."""
    papers = tmp_path / "papers"  # a folder of the user's that the sandbox does not show
    papers.mkdir()
    monkeypatch.setattr(sys, "executable", str(papers / os.path.relpath(sys.executable, papers)))
    assert ".." in sys.executable and ".." not in sandbox.interpreter()
    name, _ = models.random_forest(tmp_path)
    report = convert_file(tmp_path / name, tmp_path / "forest.onnx")
    assert report["verification"]["passed"] is True


def test_a_sandbox_that_cannot_start_python_is_not_blamed_on_the_model(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "interpreter", lambda: str(tmp_path / "no-such-python"))
    (tmp_path / "model.pkl").write_bytes(b"whatever")
    with pytest.raises(ConversionError) as caught:
        sandbox.run({"task": "convert", "source": "model.pkl"}, tmp_path, hide=[])
    assert caught.value.code == "sandbox_failed"
    assert "not of the model" in caught.value.detail and "damaged" not in caught.value.detail

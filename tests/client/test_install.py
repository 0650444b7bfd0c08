"""The client is a package of its own: ``pip install ./client`` in a fresh virtual environment brings
neither Django, torch nor TensorFlow, and the package imports, validates the shipped examples and answers
``hpcfair --help`` there."""

from __future__ import annotations

import shutil
import subprocess
import venv

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.cpu]  # a venv and pip of its own: beside others in the parallel run


def test_client_installs_and_runs_alone(tmp_path):
    source = tmp_path / "client"
    shutil.copytree(ROOT / "client", source, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    install = subprocess.run([python, "-m", "pip", "install", "-q", str(source)], capture_output=True, text=True,
                             timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    check = subprocess.run([python, "-c", """
import importlib.util, pathlib, hpcfair
from hpcfair import modelAPI, config
for name in ("django", "torch", "tensorflow", "keras", "onnxruntime"):
    assert importlib.util.find_spec(name) is None, name + " was installed"
examples = pathlib.Path(config.__file__).with_name("examples")
assert pathlib.Path(hpcfair.__file__).with_name("cube").joinpath("containers.conf").is_file()  # podman settings
print(sorted(config.load(p).args.general_args.task for p in examples.glob("*.yaml")))
print(modelAPI("http://127.0.0.1:9").client.endpoint)
"""], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert check.stdout.split("\n")[:2] == ["['container', 'conversion', 'inference']", "http://127.0.0.1:9"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "200"}
    hpcfair = env_dir / "bin" / "hpcfair"
    shown = subprocess.run([hpcfair, "--help"], capture_output=True, text=True, timeout=60, env=env)
    assert shown.returncode == 0 and "Usage: hpcfair" in shown.stdout and "login" in shown.stdout
    for args, example in ((["run", "--help"], "Example: hpcfair run"), (["jobs", "wait", "--help"],
                                                                        "Example: hpcfair jobs wait")):
        shown = subprocess.run([hpcfair, *args], capture_output=True, text=True, timeout=60, env=env)
        assert shown.returncode == 0 and example in shown.stdout, shown.stdout
    # Running on this machine needs the onnx extra; without it the error says how to get it.
    (tmp_path / "m.onnx").write_bytes(b"not used")
    subprocess.run([python, "-c", "import numpy; numpy.save('x.npy', numpy.zeros((1, 3), 'float32'))"], cwd=tmp_path,
                   check=True, timeout=60)
    local = subprocess.run([hpcfair, "infer", "m.onnx", "x.npy", "--device", "local"], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path, env=env)
    assert local.returncode == 1 and local.stderr.startswith("error [missing_extra]")
    assert "pip install 'hpcfair[onnx]'" in local.stderr

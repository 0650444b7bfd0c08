"""The client runs podman with the hub's container settings, shipped with the package, when ``CONTAINERS_CONF``
is unset (issue 41, point 13): without them Listing 4 fails here with runc's "error setting rlimit". The
shipped ``container.yaml`` asks for the CPU, which every machine has."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import yaml
from hpcfair.cube import local

from tests.conftest import ROOT

EXAMPLES = ROOT / "client" / "hpcfair" / "examples"


def test_the_shipped_settings_are_the_hubs():
    assert local.HUB_CONTAINERS_CONF.read_text() == (ROOT / "deploy" / "podman" / "containers.conf").read_text()
    package_data = (ROOT / "client" / "pyproject.toml").read_text()
    assert '"cube/containers.conf"' in package_data


def test_containers_conf_is_set_only_when_unset(monkeypatch, tmp_path):
    monkeypatch.delenv("CONTAINERS_CONF", raising=False)
    monkeypatch.setattr(local.shutil, "which", lambda name: f"/usr/bin/{name}")
    local.use_hub_settings(tmp_path)
    assert os.environ["CONTAINERS_CONF"] == str(local.HUB_CONTAINERS_CONF)
    monkeypatch.setenv("CONTAINERS_CONF", "/etc/mine.conf")
    local.use_hub_settings(tmp_path)
    assert os.environ["CONTAINERS_CONF"] == "/etc/mine.conf"  # the user's choice stays


def test_without_runc_podman_keeps_its_own_runtime(monkeypatch, tmp_path):
    monkeypatch.delenv("CONTAINERS_CONF", raising=False)
    monkeypatch.setattr(local.shutil, "which", lambda name: None if name == "runc" else f"/usr/bin/{name}")
    local.use_hub_settings(tmp_path)
    copy = tmp_path / "containers.conf"
    assert os.environ["CONTAINERS_CONF"] == str(copy)
    text = copy.read_text()
    assert "runtime =" not in text and 'default_ulimits = ["nofile=20000:20000"' in text
    assert 'cgroup_manager = "cgroupfs"' in text


def test_the_shipped_listing_4_asks_for_the_cpu():
    config = yaml.safe_load((EXAMPLES / "container.yaml").read_text())
    assert config["device_args"]["device"] == "cpu"


def test_listing_4_runs_from_the_terminal_without_containers_conf(cube_base, tmp_path):
    """The shipped listing as is, with no CONTAINERS_CONF: the client uses the hub's settings itself."""
    shutil.copytree(EXAMPLES / "project_dir", tmp_path / "project_dir")
    shutil.copy(EXAMPLES / "container.yaml", tmp_path)
    env = {key: value for key, value in os.environ.items() if key != "CONTAINERS_CONF"}
    env.update(HPCFAIR_CONFIG=str(tmp_path / "no-login"), HPCFAIR_NO_PROGRESS="1")
    done = subprocess.run([sys.executable, "-m", "hpcfair.cli", "run", "container.yaml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "train: test RMSE" in (tmp_path / "container-out.txt").read_text()

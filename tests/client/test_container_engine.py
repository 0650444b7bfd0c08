"""A container engine that cannot run containers is found out before a build, with a message that says what
to install: podman configured with an OCI runtime that is not installed (issue: Debian's podman brings
crun, a configuration named runc), for the client's ``hpcfair run`` and for the hub's worker alike."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hpcfair.cube.engine import engine_problem

from tests.conftest import ROOT
from tests.system_packages import require_program

EXAMPLES = ROOT / "client" / "hpcfair" / "examples"


@pytest.fixture
def missing_runtime(tmp_path, monkeypatch):
    """A containers.conf naming an OCI runtime this machine lacks (runc where Debian's podman brought crun)."""
    require_program("podman")
    runtime = "runc" if shutil.which("runc") is None else "youki"
    conf = tmp_path / "containers.conf"
    conf.write_text(f'[engine]\nruntime = "{runtime}"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n')
    monkeypatch.setenv("CONTAINERS_CONF", str(conf))
    return runtime, conf


def test_the_hubs_podman_settings_run_here():
    require_program("podman")
    assert os.environ["CONTAINERS_CONF"] == str(ROOT / "deploy" / "podman" / "containers.conf")
    assert engine_problem("podman") is None


def test_a_missing_runtime_is_named_with_its_package(missing_runtime):
    runtime, conf = missing_runtime
    problem = engine_problem("podman")
    assert problem is not None and problem.code == "no_container_runtime"
    message = str(problem)
    assert f"its OCI runtime {runtime!r} is not installed" in message
    assert f"apt install {runtime}" in message and str(conf) in message
    if shutil.which("crun"):
        assert "use crun, which is installed" in message


def test_hpcfair_run_of_listing_4_says_what_to_install(missing_runtime, tmp_path):
    runtime, _ = missing_runtime
    shutil.copytree(EXAMPLES / "project_dir", tmp_path / "project_dir")
    config = (EXAMPLES / "container.yaml").read_text().replace("device: 'gpu'", "device: 'cpu'")
    (tmp_path / "container.yaml").write_text(config)
    env = {**os.environ, "HPCFAIR_CONFIG": str(tmp_path / "no-login"), "HPCFAIR_NO_PROGRESS": "1"}
    done = subprocess.run([sys.executable, "-m", "hpcfair.cli", "run", "container.yaml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stderr.startswith("error [no_container_runtime]:"), done.stderr
    assert f"apt install {runtime}" in done.stderr
    assert not Path(tmp_path / "out.txt").exists()  # nothing ran


@pytest.mark.django_db
def test_the_worker_refuses_a_required_build_with_the_same_code(missing_runtime, settings):
    from workers.container import _engine
    from workers.runner import JobFailure

    settings.HUB_CUBE_ENGINE = "podman"
    logged: list[str] = []

    class Log:  # the job context's log, which the "auto" mode writes its warning to
        def log(self, message: str, level: str = "info") -> None:
            logged.append(f"{level}: {message}")

    with pytest.raises(JobFailure) as failed:
        _engine(Log(), "yes")
    assert failed.value.code == "no_container_runtime" and "apt install" in failed.value.detail
    assert _engine(Log(), "auto") is None  # auto: the cube is made, not built, and the log says why
    assert logged and "not building the image" in logged[0] and "OCI runtime" in logged[0]

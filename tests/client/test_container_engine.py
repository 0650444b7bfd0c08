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
from hpcfair.compute import CodedError
from hpcfair.cube.engine import EngineError, build, engine_problem

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


def test_the_hubs_podman_settings_run_a_container_here(cube_base, tmp_path):
    """With the hub's settings, the runtime they name starts a container and a build's RUN step."""
    assert os.environ["CONTAINERS_CONF"] == str(ROOT / "deploy" / "podman" / "containers.conf")
    assert engine_problem("podman") is None
    ran = subprocess.run(["podman", "run", "--rm", "--network=none", cube_base, "python3", "-c", "print(6 * 7)"],
                         capture_output=True, text=True, timeout=300)
    assert (ran.returncode, ran.stdout.strip()) == (0, "42"), ran.stderr
    (tmp_path / "Containerfile").write_text(f"FROM {cube_base}\nRUN python3 -c 'open(\"/built\", \"w\")'\n")
    built = build("podman", tmp_path, tmp_path / "Containerfile", "localhost/hpcfair-test/runtime:1", timeout=300)
    assert built.digest and built.size > 0


def test_a_runtime_that_fails_on_this_hosts_cgroups_says_what_to_do(cube_base, tmp_path, monkeypatch):
    """crun 1.8 (Debian 12) refuses hosts with cgroup v1 or hybrid cgroups; where it does, the build error says
    so and names the fix instead of podman's last line ("building at STEP ...")."""
    runtime = require_program("crun")
    conf = tmp_path / "crun.conf"
    settings = (ROOT / "deploy" / "podman" / "containers.conf").read_text()
    conf.write_text(settings.replace('runtime = "runc"', f'runtime = "{runtime}"'))
    monkeypatch.setenv("CONTAINERS_CONF", str(conf))
    (tmp_path / "Containerfile").write_text(f"FROM {cube_base}\nRUN true\n")
    try:
        build("podman", tmp_path, tmp_path / "Containerfile", "localhost/hpcfair-test/crun:1", timeout=300)
    except EngineError as exc:
        assert exc.code == "build_failed"
        assert "cgroups in hybrid mode not supported" in exc.log  # the only way crun fails here
        assert "install runc (Debian: apt install runc)" in str(exc) and "building at STEP" not in str(exc)
    else:  # a host with unified cgroup v2: crun works, and nothing needs saying
        assert not Path("/sys/fs/cgroup/cpu").is_dir()


def test_a_missing_runtime_is_named_with_its_package(missing_runtime):
    runtime, conf = missing_runtime
    problem = engine_problem("podman")
    assert problem is not None and problem.code == "no_container_runtime"
    message = str(problem)
    assert f"its OCI runtime {runtime!r} is not installed" in message
    assert f"apt install {runtime}" in message and str(conf) in message
    if shutil.which("crun"):
        assert "use crun, which is installed" in message


@pytest.mark.slow
@pytest.mark.cpu  # runs the CLI: over 1 s on a quiet machine
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
    assert not Path(tmp_path / "container-out.txt").exists()  # nothing ran


@pytest.mark.django_db
def test_the_worker_refuses_a_required_build_with_the_same_code(missing_runtime, settings):
    from hub.containers.jobs import container_engine


    settings.HUB_CUBE_ENGINE = "podman"
    logged: list[str] = []

    class Log:  # the job context's log, which the "auto" mode writes its warning to
        def log(self, message: str, level: str = "info") -> None:
            logged.append(f"{level}: {message}")

    with pytest.raises(CodedError) as failed:
        container_engine(Log(), "yes")
    assert failed.value.code == "no_container_runtime" and "apt install" in failed.value.detail
    assert container_engine(Log(), "auto") is None  # auto: the cube is made, not built, and the log says why
    assert logged and "not building the image" in logged[0] and "OCI runtime" in logged[0]

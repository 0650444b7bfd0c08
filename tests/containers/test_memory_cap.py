"""Containers the hub builds and runs (MLCube checks, users' projects) have a memory cap
(``HUB_CUBE_MEMORY_MB``): one that asks for more is stopped by its cgroup and reported as ``memory_limit``,
so nothing else on the host is at risk (issue 38). Runs podman with the base image."""

from __future__ import annotations

import pytest
from hpcfair.cube.engine import EngineError, memory_options, run_task
from hpcfair.cube.spec import CubeSpec, Task

pytestmark = pytest.mark.slow


def hog(image: str, mib: int) -> CubeSpec:
    code = f"b=bytearray({mib}*2**20);print(len(b))"  # the entrypoint is split on spaces: none in the code
    return CubeSpec(name="hog", description="", tasks={"hog": Task("hog", {}, {}, entrypoint=f"python3 -c {code}")},
                    image=image)


def test_the_cap_options_include_swap_and_zero_means_none():
    assert memory_options(256) == ["--memory=256m", "--memory-swap=256m"]
    assert memory_options(0) == []


def test_a_container_over_its_memory_cap_is_stopped_as_memory_limit(cube_base, tmp_path, monkeypatch):
    here = tmp_path / "cwd"  # the caller's working directory (a checkout, a worker's): podman's conmon wrote an
    here.mkdir()  # empty `oom` file there when the kernel stopped the container
    monkeypatch.chdir(here)
    with pytest.raises(EngineError) as stopped:
        run_task("podman", cube_base, hog(cube_base, 600), "hog", tmp_path, memory_mb=256, timeout=120)
    assert stopped.value.code == "memory_limit", stopped.value
    assert not list(here.iterdir()), list(here.iterdir())
    assert "memory limit of 256 MiB" in str(stopped.value) and "HUB_CUBE_MEMORY_MB" in str(stopped.value)
    ran = run_task("podman", cube_base, hog(cube_base, 100), "hog", tmp_path, memory_mb=256, timeout=120)
    assert ran.code == 0 and str(100 * 2**20) in ran.output

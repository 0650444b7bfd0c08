"""Building and running a cube on this machine (the ``container`` task): a project's tasks, or a model
cube's ``infer`` on the user's inputs. Offline builds: wheels come from a cache (filled from PyPI once,
or by hand on an air-gapped system), the base image must be on the machine."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcfair import progress
from hpcfair.cube.engine import EngineError, build, engine_problem, find_engine, image_exists, prepare_context, run_task
from hpcfair.cube.spec import CubeSpec
from hpcfair.errors import HubError


@dataclass
class LocalRun:
    """What a local cube run did: the image, and each task's time and output."""

    image: str
    engine: str
    build: dict[str, Any]
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def output(self) -> str:
        return "".join(f"$ {run['task']}\n{run['output']}\n" for run in self.runs)

    def report(self) -> dict[str, Any]:
        return {"image": self.image, "engine": self.engine, **self.build,
                "runs": [{k: v for k, v in run.items() if k != "output"} for run in self.runs]}


def wheel_cache(cache_root: Path) -> Path:
    """Where wheels for cube images are kept: ``HPCFAIR_WHEELS``, else ``<cache>/wheels``."""
    return Path(os.environ.get("HPCFAIR_WHEELS") or cache_root / "wheels")


def has_gpu() -> bool:
    """Whether this machine has an NVIDIA GPU that answers ``nvidia-smi``."""
    if not shutil.which("nvidia-smi"):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


HUB_CONTAINERS_CONF = Path(__file__).with_name("containers.conf")  # the hub's deploy/podman/containers.conf


def containers_conf(cache_root: Path) -> Path:
    """The podman settings the client runs with when ``CONTAINERS_CONF`` is unset: the hub's, shipped with the
    package (runc, cgroupfs, file events, host network, ulimits a nested container can set). Where runc is
    not installed, a copy in the cache without the runtime line, so podman keeps its own (crun)."""
    if shutil.which("runc"):
        return HUB_CONTAINERS_CONF
    text = "".join(line for line in HUB_CONTAINERS_CONF.read_text().splitlines(keepends=True)
                   if not line.strip().startswith("runtime ="))
    copy = cache_root / "containers.conf"
    if not copy.is_file() or copy.read_text() != text:
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(text)
    return copy


def use_hub_settings(cache_root: Path) -> None:
    """Set ``CONTAINERS_CONF`` to the hub's podman settings unless the user set it (as the hub's worker does)."""
    if not os.environ.get("CONTAINERS_CONF"):
        os.environ["CONTAINERS_CONF"] = str(containers_conf(cache_root))


def engine_or_fail(preferred: str = "", cache_root: Path | None = None) -> str:
    """The container engine to use, once it has answered ``info``; podman with the hub's settings (see
    ``use_hub_settings``) unless ``CONTAINERS_CONF`` is set."""
    from hpcfair import settings

    use_hub_settings(cache_root or settings.cache_dir())
    engine = find_engine(preferred or os.environ.get("HPCFAIR_CONTAINER_ENGINE", ""))
    if engine is None:
        raise HubError("container: this machine has neither podman nor docker; install one (Debian: apt install "
                       "podman) or run the cube with apptainer by hand (see its README.md).",
                       code="no_container_engine")
    problem = engine_problem(engine)
    if problem is not None:
        raise HubError(f"container: {problem}", code=problem.code)
    return engine


def base_images(recipe: Path) -> list[str]:
    """The images a Containerfile starts FROM (stage names excluded)."""
    stages: set[str] = set()
    found = []
    for line in recipe.read_text(errors="replace").splitlines():
        match = re.match(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", line, re.IGNORECASE)
        if match:
            if match.group(1) not in stages:
                found.append(match.group(1))
            if match.group(2):
                stages.add(match.group(2))
    return found


def build_here(engine: str, folder: Path, spec: CubeSpec, image: str, wheels: Path, *,
               build_file: Path | None = None, requirements: str = "requirements.txt") -> dict[str, Any]:
    """Build ``image`` from the cube in ``folder`` offline (``--network=none``); the folder is not changed."""
    context_dir = folder / spec.build_context
    recipe = build_file or context_dir / spec.build_file
    if not recipe.is_file():
        raise HubError(f"container: no build file {recipe}", code="invalid_mlcube")
    missing = [base for base in base_images(recipe) if not image_exists(engine, base)]
    if missing:
        raise HubError(f"container: the base image {missing[0]} is not on this machine and builds are offline; "
                       "make it with the hub's scripts/cube-base.sh (debootstrap), or load one with python3 and "
                       f"python3-venv ({engine} load / {engine} tag).", code="no_base_image")
    with tempfile.TemporaryDirectory(prefix="hpcfair-build-") as tmp:
        try:
            shown = progress.lines(f"build {image}")
            context = prepare_context(context_dir, Path(tmp) / "context", wheels, requirements, on_line=shown)
            relative = recipe.resolve().relative_to(context_dir.resolve()) if recipe.resolve().is_relative_to(
                context_dir.resolve()) else None
            recipe_in_context = context / relative if relative else recipe
            return build(engine, context, recipe_in_context, image, on_line=build_steps(shown)).record()
        except EngineError as exc:
            raise HubError(f"container: {exc}", code=exc.code)


def build_steps(shown):
    """Of a build's output, the lines that say where it is (``STEP 3/6: RUN ...``, ``COMMIT``)."""
    def step(line: str) -> None:
        if line.startswith(("STEP ", "COMMIT", "Successfully tagged")):
            shown(line)
    return step


def run_tasks(engine: str, image: str, spec: CubeSpec, tasks: list[str], workspace: Path, *,
              gpu: bool = False, overrides: dict[str, str] | None = None,
              mounts: dict[Path, str] | None = None) -> list[dict[str, Any]]:
    """Run ``tasks`` in order (``--network=none``, or host when the cube says it needs internet access)."""
    network = "host" if (spec.raw.get("platform") or {}).get("need_internet_access") else "none"
    runs = []
    for task in tasks:
        try:
            ran = run_task(engine, image, spec, task, workspace, overrides=overrides, gpu=gpu, network=network,
                           extra_mounts=mounts, on_line=progress.lines(f"{spec.name} {task}"))
        except EngineError as exc:
            raise HubError(f"container: {exc}\n{exc.log[-2000:]}".rstrip(), code=exc.code)
        runs.append({"task": task, "seconds": round(ran.seconds, 3), "output": ran.output})
    return runs

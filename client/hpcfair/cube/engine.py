"""Building and running MLCube images with Podman or Docker, offline.

Builds run with ``--network=none``: Python packages come from wheels put into the build context
(``prepare_context``) and are installed with ``pip --no-index``, as on an air-gapped HPC system. Tasks run
the way MLCube's docker runner runs them: each parameter's host folder is mounted at ``/mlcube_ioN`` and
the task gets ``TASK --name=/mlcube_ioN/file ...``, with ``--network=none`` unless asked otherwise.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hpcfair.compute.errors import CodedError
from hpcfair.cube.spec import CubeSpec, Task

ENGINES = ("podman", "docker")
RUNTIMES = ("crun", "runc")  # the OCI runtimes podman can use; Debian's podman brings crun
NETWORKS = ("none", "host")
LOG_TAIL = 200  # lines of a build log kept in a result
IMAGE_PYTHON = "3.11"  # the base images' Python (Debian 12); wheels are downloaded for it


class EngineError(CodedError):
    """A build or run that failed: ``code`` for machines, the message (with the log's tail) for people."""

    def __init__(self, code: str, message: str, log: str = "") -> None:
        super().__init__(code, message)
        self.log = log


@dataclass
class BuildResult:
    image: str
    digest: str
    size: int
    seconds: float
    log: list[str] = field(default_factory=list)
    removed: str = ""  # the id of the image this build superseded (the tag's previous image), removed

    def record(self) -> dict:
        return {"image": self.image, "digest": self.digest, "size": self.size,
                "build_seconds": round(self.seconds, 2)}


@dataclass
class RunResult:
    code: int
    seconds: float
    output: str
    command: list[str]


def find_engine(preferred: str = "") -> str | None:
    """The first container engine on PATH (``preferred`` first), or None."""
    for name in ([preferred] if preferred else []) + [e for e in ENGINES if e != preferred]:
        if name and shutil.which(name):
            return name
    return None


def engine_problem(engine: str) -> EngineError | None:
    """Why ``engine`` cannot build or run containers on this machine, or None when ``engine info`` works.

    Podman fails every command, ``image exists`` included, when the OCI runtime its configuration names is
    not installed; docker's client fails without its daemon. Asking once up front turns that into a
    message that says what to install, instead of a misleading failure later."""
    try:
        done = subprocess.run([engine, "info"], capture_output=True, text=True, errors="replace", timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return EngineError("container_engine_broken", f"`{engine} info` did not answer: {exc}")
    if done.returncode == 0:
        return None
    text = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[-1][:500]
    missing = re.search(r'OCI runtime "([^"]+)" not found', text)
    if missing:
        runtime = missing.group(1)
        there = [name for name in RUNTIMES if name != runtime and shutil.which(name)]
        conf = os.environ.get("CONTAINERS_CONF") or "containers.conf"
        fix = (f"or let {engine} use {there[0]}, which is installed, by removing `runtime = \"{runtime}\"` from "
               f"the [engine] section of {conf}" if there else
               f"or install crun (Debian: apt install crun) and remove `runtime = \"{runtime}\"` from {conf}")
        return EngineError("no_container_runtime", f"{engine} cannot run containers here: its OCI runtime "
                                                   f"{runtime!r} is not installed. Install it (Debian: apt install "
                                                   f"{runtime}), {fix}.")
    return EngineError("container_engine_broken", f"{engine} cannot run containers here: `{engine} info` "
                                                  f"failed: {text}")


def _run(command: list[str], timeout: float, on_line: Callable[[str], None] | None = None,
         cwd: str | None = None) -> tuple[int, list[str]]:
    """Run ``command`` (in ``cwd``), streaming its merged output line by line; kill it after ``timeout`` seconds."""
    lines: list[str] = []
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                            cwd=cwd)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if on_line:
                on_line(lines[-1])
        code = proc.wait()
    finally:
        timed_out = not timer.is_alive() and proc.returncode is not None and proc.returncode < 0
        timer.cancel()
    if timed_out:
        raise EngineError("container_timeout", f"{command[0]} {command[1]} ran longer than {timeout:.0f} s and was "
                                               "stopped.", "\n".join(lines[-LOG_TAIL:]))
    return code, lines


def image_exists(engine: str, image: str) -> bool:
    if engine == "podman":
        return subprocess.run([engine, "image", "exists", image], capture_output=True).returncode == 0
    return subprocess.run([engine, "image", "inspect", image], capture_output=True).returncode == 0


def inspect(engine: str, image: str) -> tuple[str, int]:
    """The image's id digest and size in bytes."""
    out = subprocess.run([engine, "image", "inspect", image], capture_output=True, text=True, check=True).stdout
    info = json.loads(out)[0]
    return str(info.get("Digest") or info.get("Id") or ""), int(info.get("Size") or 0)


def image_id(engine: str, image: str) -> str:
    """The id of the image ``image`` names now, or "" when there is none."""
    done = subprocess.run([engine, "image", "inspect", "--format", "{{.Id}}", image], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def remove_superseded(engine: str, previous: str, image: str) -> str:
    """Remove ``previous``, the image ``image`` named before a build retagged it, which would otherwise stay as
    a dangling ``<none>`` image of ~340 MB per rebuild (issue 41, point 14). Only that image, by id, and only if
    no other tag or container holds it (``rmi`` without force refuses then). Returns the id removed, or ""."""
    if not previous or previous == image_id(engine, image):
        return ""
    found = subprocess.run([engine, "image", "inspect", previous], capture_output=True, text=True)
    try:
        names = json.loads(found.stdout)[0].get("RepoTags") or [] if found.returncode == 0 else ["(gone)"]
    except (ValueError, IndexError, AttributeError):
        names = ["(unreadable)"]
    if names:  # another tag still names it: not ours to remove
        return ""
    done = subprocess.run([engine, "rmi", previous], capture_output=True, text=True, timeout=300)
    return previous if done.returncode == 0 else ""


def memory_options(memory_mb: int) -> list[str]:
    """The engine's options that cap a container's memory, swap included (none for 0)."""
    return [f"--memory={memory_mb}m", f"--memory-swap={memory_mb}m"] if memory_mb > 0 else []


def _over_memory(code: int, memory_mb: int, what: str) -> EngineError | None:
    """A container killed by its memory cap (the kernel's SIGKILL: exit 137) as ``memory_limit``."""
    if memory_mb > 0 and code == 137:
        return EngineError("memory_limit", f"{what} used more than its memory limit of {memory_mb} MiB and was "
                                           "stopped (HUB_CUBE_MEMORY_MB on a hub).")
    return None


def build(engine: str, context: Path, build_file: Path, image: str, *, network: str = "none",
          timeout: float = 1800, on_line: Callable[[str], None] | None = None, no_cache: bool = False,
          memory_mb: int = 0) -> BuildResult:
    """Build ``image`` from ``build_file`` in ``context`` with no network (``no_cache``: no layer reuse;
    ``memory_mb``: each build step's memory cap); EngineError with the log on failure."""
    if network not in NETWORKS:
        raise EngineError("invalid", f"network must be one of {', '.join(NETWORKS)}, not {network!r}.")
    started = time.perf_counter()
    previous = image_id(engine, image)
    command = [engine, "build", f"--network={network}", *(["--no-cache"] if no_cache else []),
               *memory_options(memory_mb), "-t", image, "-f", str(build_file), str(context)]
    code, lines = _run(command, timeout, on_line)
    if code != 0 and (over := _over_memory(code, memory_mb, f"A build step of {image}")):
        raise over
    if code != 0:
        raise EngineError("build_failed", f"{engine} build of {image} failed (exit {code}): "
                                          f"{_last_error(lines)}", "\n".join(lines[-LOG_TAIL:]))
    digest, size = inspect(engine, image)
    removed = remove_superseded(engine, previous, image)
    return BuildResult(image, digest, size, time.perf_counter() - started, lines[-LOG_TAIL:], removed)


# Failures of the OCI runtime itself, whatever the image: what they mean and what to do.
RUNTIME_HINTS = {
    "cgroups in hybrid mode not supported": (
        "crun cannot run containers on a host with cgroup v1 or hybrid cgroups: install runc (Debian: apt install "
        "runc) and set runtime = \"runc\" in the [engine] section of containers.conf (CONTAINERS_CONF)."),
    "error setting rlimit": (
        "the runtime cannot set the container's limits past the host's: set default_ulimits in the [containers] "
        "section of containers.conf (CONTAINERS_CONF), as the hub's deploy/podman/containers.conf does."),
}


def _last_error(lines: list[str]) -> str:
    for line in reversed(lines):
        for symptom, hint in RUNTIME_HINTS.items():
            if symptom in line:
                return f"the container runtime failed: {symptom}. Fix: {hint}"
    for line in reversed(lines):
        if line.strip() and ("error" in line.lower() or "no matching" in line.lower()):
            return line.strip()[:500]
    return (lines[-1].strip() if lines else "no output")[:500]


def task_invocation(spec: CubeSpec, task: Task, workspace: Path, overrides: dict[str, str] | None = None
                    ) -> tuple[dict[Path, str], list[str]]:
    """MLCube's docker runner convention: the mounts (host folder -> /mlcube_ioN) and the task's arguments.
    ``overrides`` replace parameter paths (relative to the workspace, or absolute on the host)."""
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(task.parameters))
    if unknown:
        raise EngineError("invalid", f"Task {task.name!r} of {spec.name} has no parameter {unknown[0]!r}; it takes "
                                     f"{', '.join(task.parameters) or 'none'}.")
    mounts: dict[Path, str] = {}
    args = [task.name]
    for name, param in task.parameters.items():
        host = Path(overrides.get(name, param.default))
        host = host if host.is_absolute() else workspace / host
        if name in task.outputs:
            (host if param.is_dir else host.parent).mkdir(parents=True, exist_ok=True)
        folder = host if param.is_dir else host.parent
        folder = folder.resolve()
        if folder not in mounts:
            mounts[folder] = f"/mlcube_io{len(mounts)}"
        target = mounts[folder] if param.is_dir else f"{mounts[folder]}/{host.name}"
        args.append(f"--{name}={target}")
    return mounts, args


def run_task(engine: str, image: str, spec: CubeSpec, task_name: str, workspace: Path, *,
             overrides: dict[str, str] | None = None, network: str = "none", gpu: bool = False,
             extra_mounts: dict[Path, str] | None = None, timeout: float = 3600,
             on_line: Callable[[str], None] | None = None, memory_mb: int = 0) -> RunResult:
    """Run one task of the cube in ``image`` as MLCube would (``memory_mb``: the container's memory cap);
    EngineError when it exits non-zero."""
    if task_name not in spec.tasks:
        raise EngineError("invalid", f"{spec.name} has no task {task_name!r}; its tasks: {', '.join(spec.tasks)}.")
    if network not in NETWORKS:
        raise EngineError("invalid", f"network must be one of {', '.join(NETWORKS)}, not {network!r}.")
    task = spec.tasks[task_name]
    mounts, args = task_invocation(spec, task, workspace, overrides)
    command = [engine, "run", "--rm", f"--network={network}", *memory_options(memory_mb)]
    if gpu:
        command += ["--device", "nvidia.com/gpu=all"] if engine == "podman" else ["--gpus", "all"]
    for host, target in {**mounts, **(extra_mounts or {})}.items():
        command += ["--volume", f"{host}:{target}"]
    if task.entrypoint:
        words = task.entrypoint.split()
        command += [f"--entrypoint={words[0]}", image, *words[1:], *args[1:]]
    else:
        command += [image, *args]
    started = time.perf_counter()
    # podman's conmon writes an empty file named `oom` into its working directory when the kernel stops the
    # container at its memory cap: an empty folder of its own takes it, not the caller's (a checkout, a worker's)
    with tempfile.TemporaryDirectory(prefix="hpcfair-run-") as scratch:
        code, lines = _run(command, timeout, on_line, cwd=scratch)
    result = RunResult(code, time.perf_counter() - started, "\n".join(lines), command)
    if over := _over_memory(code, memory_mb, f"Task {task_name!r} of {spec.name}"):
        raise EngineError(over.code, str(over), "\n".join(lines[-LOG_TAIL:]))
    if code != 0:
        raise EngineError("task_failed", f"Task {task_name!r} of {spec.name} exited with {code}: "
                                         f"{_last_error(lines)}", "\n".join(lines[-LOG_TAIL:]))
    return result


# --- offline builds: wheels in the build context ------------------------------------------------


def wheel_platforms(machine: str | None = None) -> list[str]:
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get((machine or platform.machine()).lower(),
                                                      (machine or platform.machine()).lower())
    return [f"manylinux_2_{minor}_{arch}" for minor in (28, 27, 17)] + [f"manylinux2014_{arch}", "any"]


def ensure_wheels(requirements: Path, cache: Path, *, python_version: str = IMAGE_PYTHON,
                  on_line: Callable[[str], None] | None = None, timeout: float = 900) -> None:
    """Make sure ``cache`` holds wheels for ``requirements`` (and what they need) for the image's Python.
    Offline first (the cache alone); otherwise ``pip download`` from the index the host can reach."""
    cache.mkdir(parents=True, exist_ok=True)
    common = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "--only-binary=:all:",
              "--python-version", python_version, "-d", str(cache), "-r", str(requirements)]
    for plat in wheel_platforms():
        common += ["--platform", plat]
    code, _ = _run([*common, "--no-index", "--find-links", str(cache)], timeout)
    if code == 0:
        return
    code, lines = _run(common, timeout, on_line)
    if code != 0:
        raise EngineError("wheels_unavailable", f"The wheels for {requirements.name} are neither in {cache} nor "
                                                f"downloadable: {_last_error(lines)} On an offline machine, fill the "
                                                f"wheel cache with `pip download -r {requirements.name} -d {cache}` "
                                                "elsewhere.", "\n".join(lines[-LOG_TAIL:]))


def prepare_context(source: Path, dest: Path, wheel_cache: Path, requirements: str = "requirements.txt",
                    on_line: Callable[[str], None] | None = None) -> Path:
    """A copy of ``source`` with a ``wheels/`` folder for its ``requirements`` (hard links into the cache
    where it can). The user's folder is left as it was."""
    shutil.copytree(source, dest, symlinks=True, ignore=shutil.ignore_patterns("wheels", ".git", "__pycache__"))
    wheels = dest / "wheels"
    wheels.mkdir(exist_ok=True)
    req = dest / requirements
    if req.is_file() and req.read_text().strip():
        ensure_wheels(req, wheel_cache, on_line=on_line)
        for wheel in wheel_cache.glob("*.whl"):
            try:
                os.link(wheel, wheels / wheel.name)
            except OSError:
                shutil.copy2(wheel, wheels / wheel.name)
    return dest

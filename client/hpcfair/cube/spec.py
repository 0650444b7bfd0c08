"""Reading and checking an ``mlcube.yaml``.

The ``mlcube`` library (0.0.9) accepts a misspelt ``tasks`` key, a task with no entrypoint and unknown
parameter keys, and fails later inside a container. This module checks what MLCube needs to run a task
with Docker/Podman or Singularity, and names every problem by its place in the file: ``tasks.train.
parameters.inputs.data.defualt``. It reads YAML text only; nothing of the project is executed.
"""

from __future__ import annotations

import difflib
import re
import shlex
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from hpcfair import archives

CUBE_FILE = "mlcube.yaml"
MAX_CUBE_BYTES = 256 * 1024
TOP_KEYS = ("name", "description", "authors", "platform", "docker", "singularity", "tasks", "workspace", "ssh",
            "gcp", "k8s", "kubeflow", "runner")
PLATFORM_KEYS = ("accelerator_count", "accelerator_maker", "accelerator_model", "host_memory_gb",
                 "need_internet_access", "host_disk_space_gb")
# mlcube_docker 0.0.9 ``Config.DEFAULT``.
DOCKER_KEYS = ("image", "docker", "env_args", "gpu_args", "cpu_args", "build_args", "build_context", "build_file",
               "build_strategy", "--network", "--security-opt", "--gpus", "--memory", "--cpuset-cpus")
SINGULARITY_KEYS = ("image", "image_dir", "singularity", "build_args", "build_context", "build_file", "run_args",
                    "--nv", "fakeroot")
TASK_KEYS = ("parameters", "entrypoint")
PARAMETER_GROUPS = ("inputs", "outputs")
PARAMETER_KEYS = ("type", "default", "opts")
PARAMETER_TYPES = ("file", "directory", "unknown")
SCRIPT_SUFFIXES = (".py", ".sh", ".r", ".jl", ".pl")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


class CubeError(Exception):
    """An ``mlcube.yaml`` that MLCube cannot run: ``problems`` maps a place in the file to what is wrong."""

    code = "invalid_mlcube"

    def __init__(self, problems: dict[str, list[str]], file: str = CUBE_FILE) -> None:
        self.problems = problems
        self.file = file
        first, messages = next(iter(problems.items()))
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{file}: {first}: {messages[0]}{more}")


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str  # file | directory | unknown
    default: str
    opts: str = ""

    @property
    def is_dir(self) -> bool:
        return self.type == "directory" or (self.type == "unknown" and self.default.endswith("/"))


@dataclass(frozen=True)
class Task:
    name: str
    inputs: dict[str, Parameter]
    outputs: dict[str, Parameter]
    entrypoint: str = ""

    @property
    def parameters(self) -> dict[str, Parameter]:
        return {**self.inputs, **self.outputs}

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "inputs": {p.name: p.default for p in self.inputs.values()},
                "outputs": {p.name: p.default for p in self.outputs.values()},
                **({"entrypoint": self.entrypoint} if self.entrypoint else {})}


@dataclass(frozen=True)
class CubeSpec:
    """What the hub and the client need from an ``mlcube.yaml``."""

    name: str
    description: str
    tasks: dict[str, Task]
    image: str
    build_context: str = "."
    build_file: str = "Dockerfile"
    accelerators: int = 0
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    def summary(self) -> dict[str, Any]:
        """The project's MLCube as stored in metadata (tasks as a list: their order is the run order)."""
        return {"name": self.name, "image": self.image, "build_file": self.build_path,
                "accelerator_count": self.accelerators,
                "tasks": [task.summary() for task in self.tasks.values()]}

    @property
    def build_path(self) -> str:
        return str(PurePosixPath(self.build_context) / self.build_file)


def _suggest(word: str, known: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(str(word), list(known), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else f" Expected one of: {', '.join(known)}."


class _Problems(dict):
    def add(self, where: str, message: str) -> None:
        self.setdefault(where, []).append(message)

    def unknown_keys(self, mapping: dict, known: tuple[str, ...], where: str) -> None:
        for key in mapping:
            if key not in known:
                self.add(f"{where}.{key}" if where else str(key), f"Unknown key {key!r}.{_suggest(key, known)}")


def parse(text: str, files: set[str] | None = None, file: str = CUBE_FILE,
          recipes: dict[str, str] | None = None) -> CubeSpec:
    """Check an ``mlcube.yaml``'s text; ``files`` (paths relative to the file's folder) lets the check
    look for the build file and the entrypoints' scripts, ``recipes`` holds the build files' text.
    Raises ``CubeError`` naming every problem."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "yaml"
        raise CubeError({where: [f"Not valid YAML: {getattr(exc, 'problem', None) or exc}."]}, file)
    if not isinstance(raw, dict):
        raise CubeError({"mlcube": ["Expected a mapping with name, platform, docker and tasks."]}, file)
    problems = _Problems()
    problems.unknown_keys(raw, TOP_KEYS, "")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.add("name", "Every MLCube needs a name.")
    platform = raw.get("platform") or {}
    if not isinstance(platform, dict):
        problems.add("platform", "Expected a mapping (accelerator_count, host_memory_gb, ...).")
        platform = {}
    problems.unknown_keys(platform, PLATFORM_KEYS, "platform")
    accelerators = platform.get("accelerator_count", 0) or 0
    if not isinstance(accelerators, int) or accelerators < 0:
        problems.add("platform.accelerator_count", "Expected a whole number of accelerators (0 for CPU only).")
        accelerators = 0
    docker = raw.get("docker")
    if not isinstance(docker, dict):
        problems.add("docker", "A docker section with the image name is needed to build and run the cube "
                               "(docker: {image: ..., build_file: Dockerfile}).")
        docker = {}
    problems.unknown_keys(docker, DOCKER_KEYS, "docker")
    if not isinstance(docker.get("image", ""), str) or (docker and not docker.get("image")):
        problems.add("docker.image", "The image name is missing.")
    singularity = raw.get("singularity")
    if singularity is not None:
        if isinstance(singularity, dict):
            problems.unknown_keys(singularity, SINGULARITY_KEYS, "singularity")
        else:
            problems.add("singularity", "Expected a mapping (image, build_file, ...).")
    context = str(docker.get("build_context") or ".")
    build_file = str(docker.get("build_file") or "Dockerfile")
    build_path = _relative(PurePosixPath(context) / build_file)
    recipe: str | None = None
    if files is not None and docker:
        if build_path not in files:
            problems.add("docker.build_file", f"The build file {build_path!r} is not in the project.")
        else:
            recipe = build_path
    tasks = _tasks(raw, problems, files, has_entrypoint=recipe is not None and
                   _declares_entrypoint((recipes or {}).get(recipe, "")))
    if problems:
        raise CubeError(dict(problems), file)
    return CubeSpec(name=str(name), description=str(raw.get("description") or ""), tasks=tasks,
                    image=str(docker["image"]), build_context=context, build_file=build_file,
                    accelerators=accelerators, raw=raw)


def _declares_entrypoint(recipe: str) -> bool:
    return bool(re.search(r"^\s*(ENTRYPOINT|CMD)\s", recipe, re.MULTILINE | re.IGNORECASE)) or "%runscript" in recipe


def _relative(path: PurePosixPath) -> str:
    return str(PurePosixPath(*[part for part in path.parts if part not in (".", "")])) or "."


def _tasks(raw: dict, problems: _Problems, files, has_entrypoint: bool) -> dict[str, Task]:
    tasks_raw = raw.get("tasks")
    if not isinstance(tasks_raw, dict) or not tasks_raw:
        if "tasks" in raw:
            problems.add("tasks", "Expected a mapping of task names to their parameters, e.g. tasks: {train: ...}.")
        else:
            problems.add("tasks", "The cube declares no tasks.")
        return {}
    tasks: dict[str, Task] = {}
    for task_name, body in tasks_raw.items():
        where = f"tasks.{task_name}"
        if not isinstance(task_name, str) or not NAME_RE.match(task_name):
            problems.add(where, "A task name uses letters, digits, '_', '.', '-' and starts with a letter.")
            continue
        body = body or {}
        if not isinstance(body, dict):
            problems.add(where, "Expected a mapping with parameters (and optionally entrypoint).")
            continue
        problems.unknown_keys(body, TASK_KEYS, where)
        entrypoint = body.get("entrypoint") or ""
        if not isinstance(entrypoint, str):
            problems.add(f"{where}.entrypoint", "Expected a command line, e.g. 'python /workspace/train.py'.")
            entrypoint = ""
        if entrypoint:
            _check_script(entrypoint, files, problems, f"{where}.entrypoint")
        elif files is not None and not has_entrypoint:
            problems.add(f"{where}.entrypoint", "The task has no entrypoint and the build file declares no "
                                                "ENTRYPOINT: nothing would run. Add entrypoint: 'python /app/"
                                                f"{task_name}.py' or an ENTRYPOINT line.")
        params = body.get("parameters") or {}
        if not isinstance(params, dict):
            problems.add(f"{where}.parameters", "Expected a mapping with inputs and outputs.")
            params = {}
        problems.unknown_keys(params, PARAMETER_GROUPS, f"{where}.parameters")
        groups = {group: _parameters(params.get(group), problems, f"{where}.parameters.{group}")
                  for group in PARAMETER_GROUPS}
        for both in sorted(set(groups["inputs"]) & set(groups["outputs"])):
            problems.add(f"{where}.parameters.outputs.{both}", f"{both!r} is both an input and an output.")
        tasks[task_name] = Task(task_name, groups["inputs"], groups["outputs"], entrypoint)
    return tasks


def _parameters(group: Any, problems: _Problems, where: str) -> dict[str, Parameter]:
    if group is None:
        return {}
    if not isinstance(group, dict):
        problems.add(where, "Expected a mapping of parameter names to a path or {type, default}.")
        return {}
    out: dict[str, Parameter] = {}
    for name, spec in group.items():
        place = f"{where}.{name}"
        if not isinstance(name, str) or not NAME_RE.match(name):
            problems.add(place, "A parameter name uses letters, digits and '_'.")
            continue
        if isinstance(spec, str):
            out[name] = Parameter(name, "unknown", spec)
            continue
        if not isinstance(spec, dict):
            problems.add(place, "Expected a path (relative to the workspace) or {type: file|directory, default}.")
            continue
        problems.unknown_keys(spec, PARAMETER_KEYS, place)
        kind = spec.get("type", "unknown")
        if kind not in PARAMETER_TYPES:
            problems.add(f"{place}.type", f"Unknown type {kind!r}.{_suggest(kind, PARAMETER_TYPES)}")
        default = spec.get("default")
        if not isinstance(default, str) or not default:
            problems.add(f"{place}.default", "A default path (relative to the workspace) is needed.")
            continue
        if default.startswith("/") or ".." in PurePosixPath(default).parts:
            problems.add(f"{place}.default", "Use a path inside the workspace (relative, no '..').")
        out[name] = Parameter(name, str(kind), default, str(spec.get("opts") or ""))
    return out


def _check_script(entrypoint: str, files, problems: _Problems, where: str) -> None:
    try:
        words = shlex.split(entrypoint)
    except ValueError as exc:
        problems.add(where, f"Cannot split the command line: {exc}.")
        return
    if files is None:
        return
    names = {PurePosixPath(p).name for p in files}
    for word in words:
        if word.lower().endswith(SCRIPT_SUFFIXES) and PurePosixPath(word).name not in names:
            problems.add(where, f"The script {word!r} is not in the project (files: "
                                f"{', '.join(sorted(names)[:8])}{', ...' if len(names) > 8 else ''}).")


def parse_dir(folder: Path, cube_file: str = CUBE_FILE) -> CubeSpec:
    """Check ``folder/cube_file`` against the folder's files."""
    if not (folder / cube_file).is_file():
        raise CubeError({"mlcube": [f"There is no {cube_file} in {folder}."]}, cube_file)
    return parse_files({p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}, cube_file)


def parse_files(files: dict[str, Path], cube_file: str = CUBE_FILE) -> CubeSpec:
    """Check ``files[cube_file]`` against ``files`` (project path -> local file, which holds it)."""
    path = files[cube_file]
    if path.stat().st_size > MAX_CUBE_BYTES:
        raise CubeError({"mlcube": [f"{cube_file} is larger than {MAX_CUBE_BYTES // 1024} KiB."]}, cube_file)
    texts = {name: _small_text(local) for name, local in files.items() if _is_recipe(name)}
    return parse(path.read_text(errors="replace"), set(files), cube_file, texts)


def parse_zip(archive: Path) -> CubeSpec:
    """Check the ``mlcube.yaml`` inside a zip (at its top or in its only top folder)."""
    try:
        with zipfile.ZipFile(archive) as zf:
            unsafe = [info.filename for info in zf.infolist() if archives.unsafe_member(info)]
            if unsafe:
                raise CubeError({"archive": [f"{archive.name} holds {unsafe[0]!r}: a project's members stay inside "
                                             "its folder (no absolute paths, no '..', no links)."]})
            names = [n for n in zf.namelist() if not n.endswith("/")]
            root = _zip_root(names)
            if root is None:
                raise CubeError({"mlcube": [f"{archive.name} holds no {CUBE_FILE} at its top level."]})
            files = {n[len(root):] for n in names if n.startswith(root)}
            info = zf.getinfo(root + CUBE_FILE)
            if info.file_size > MAX_CUBE_BYTES:
                raise CubeError({"mlcube": [f"{CUBE_FILE} is larger than {MAX_CUBE_BYTES // 1024} KiB."]})
            texts = {n: _head(zf, root + n) for n in files if _is_recipe(n)}
            text = zf.read(root + CUBE_FILE).decode(errors="replace")
    except zipfile.BadZipFile:
        raise CubeError({"mlcube": [f"{archive.name} is not a readable zip archive."]})
    return parse(text, files, f"{archive.name}:{CUBE_FILE}", texts)


def _head(zf: zipfile.ZipFile, name: str) -> str:
    """The first MAX_CUBE_BYTES of a member, inflating no more than that."""
    with zf.open(name) as member:
        return member.read(MAX_CUBE_BYTES).decode(errors="replace")


def _zip_root(names: list[str]) -> str | None:
    if CUBE_FILE in names:
        return ""
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) == 1 and f"{next(iter(tops))}/{CUBE_FILE}" in names:
        return f"{next(iter(tops))}/"
    return None


def _is_recipe(name: str) -> bool:
    base = PurePosixPath(name).name.lower()
    return base.startswith(("dockerfile", "containerfile", "singularity")) or base.endswith(".def")


def _small_text(path: Path) -> str:
    with open(path, "rb") as fh:
        return fh.read(MAX_CUBE_BYTES).decode(errors="replace")

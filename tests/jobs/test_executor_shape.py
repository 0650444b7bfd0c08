"""The executor seam's shape, read from the source tree (nothing imported but the registry): an executor is one
module of hub/jobs/executors/ whose ``EXECUTOR`` answers the interface; nothing outside the package imports an
executor's module (everything goes through ``executor_for`` / ``of``); and the PSI/J executor, written to show the
seam holds, is named in at most 2 files besides its module, the tests and the manual
(docs/developing/extending/executor.md says which)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hub.jobs import executors
from hub.jobs.executors.batch import BatchExecutor

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "hub" / "jobs" / "executors"
SHARED = {"__init__", "batch"}  # the interface and what every batch executor shares
NAMES = sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem not in SHARED)


def test_the_executors_are_celery_slurm_and_psij_at_least():
    assert {"celery", "psij", "slurm"} <= set(NAMES)  # and a new one's module: each is tested below
    assert [path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name != "__pycache__"] == []


@pytest.mark.parametrize("name", NAMES)
def test_an_executor_is_one_module_with_its_executor(name):
    executor = executors.get(name)
    assert executor.name == name and isinstance(executor, executors.Executor)
    left = [verb for verb in ("dispatch", "submit", "cancel")
            if getattr(type(executor), verb) is getattr(executors.Executor, verb)]
    assert left == [], f"{name} does not define {left}"
    if executor.batch:
        assert isinstance(executor, BatchExecutor)
        assert all(getattr(type(executor), hook) is not getattr(BatchExecutor, hook) for hook in
                   ("start", "states", "stop")), name


def test_only_the_package_imports_an_executor_module():
    modules = "|".join(NAMES)
    pattern = re.compile(rf"hub\.jobs\.executors\.({modules})\b|from hub\.jobs\.executors import [^\n]*\b({modules})\b")
    reaching = sorted(path.relative_to(ROOT).as_posix() for folder in ("hub", "workers") for path in
                      (ROOT / folder).rglob("*.py") if PACKAGE not in path.parents and pattern.search(path.read_text()))
    assert reaching == [], "go through hub.jobs.executors.executor_for / of instead"


def test_the_psij_executor_touches_its_module_and_two_files():
    """Beside tests, the manual and the lock (make lock writes it from pyproject.toml): the setting and the
    dependency."""
    files = [path for path in ROOT.iterdir() if path.is_file()]
    for folder in ("hub", "workers", "client", "ontology", "scripts", "deploy", ".ci"):
        files += [path for path in (ROOT / folder).rglob("*") if path.is_file() and "__pycache__" not in path.parts
                  and path.suffix not in {".pyc", ".png", ".svg", ".woff2", ".onnx"}]
    named = {path.relative_to(ROOT).as_posix() for path in files
             if re.search(r"psij|PSI/J", path.read_text(errors="replace"), re.IGNORECASE)}
    assert named == {"hub/jobs/executors/psij.py", "hub/settings.py", "pyproject.toml"}, sorted(named)

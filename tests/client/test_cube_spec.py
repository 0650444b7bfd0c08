"""mlcube.yaml checks: what the mlcube library lets through (a typo in tasks, a task with nothing to run,
an unknown parameter key) is named by its place in the file, and a good project passes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hpcfair.config import SCHEMA_FILE
from hpcfair.cube import CubeError, parse, parse_dir

PROJECT = SCHEMA_FILE.with_name("examples") / "project_dir"
GOOD = (PROJECT / "mlcube.yaml").read_text()
FILES = {"mlcube.yaml", "Containerfile", "main.py", "requirements.txt", "workspace/parameters.yaml"}
RECIPES = {"Containerfile": (PROJECT / "Containerfile").read_text()}


def problems(text: str, files=FILES, recipes=RECIPES) -> dict[str, list[str]]:
    with pytest.raises(CubeError) as caught:
        parse(text, set(files), recipes=recipes)
    assert caught.value.code == "invalid_mlcube"
    return caught.value.problems


def test_the_example_project_passes():
    spec = parse_dir(PROJECT)
    assert list(spec.tasks) == ["prepare", "train"]
    assert spec.tasks["train"].inputs["data_dir"].is_dir and spec.image.endswith("linear-regression-project:1")
    assert spec.summary()["tasks"][1]["outputs"] == {"model_dir": "model", "metrics": "metrics.json"}


def test_typo_in_tasks_is_named_with_a_suggestion():
    found = problems(GOOD.replace("\ntasks:", "\ntaks:"))
    assert "Did you mean 'tasks'?" in found["taks"][0]
    assert found["tasks"] == ["The cube declares no tasks."]


def test_task_without_entrypoint_when_the_build_file_declares_none():
    recipe = {"Containerfile": RECIPES["Containerfile"].replace("ENTRYPOINT", "# no entrypoint:")}
    found = problems(GOOD, recipes=recipe)
    assert set(found) == {"tasks.prepare.entrypoint", "tasks.train.entrypoint"}
    assert "nothing would run" in found["tasks.train.entrypoint"][0]
    # A task's own entrypoint must name a script that is in the project.
    text = GOOD.replace("  train:\n", "  train:\n    entrypoint: python /app/fit.py\n")
    found = problems(text)
    assert "'/app/fit.py' is not in the project" in found["tasks.train.entrypoint"][0]


def test_unknown_parameter_keys_and_groups():
    text = GOOD.replace("metrics: {type: file, default: metrics.json}", "metrics: {type: file, defualt: metrics.json}")
    prepare_inputs = "      inputs:\n        parameters: {type: file, default: parameters.yaml}\n      outputs:\n"
    misspelt = prepare_inputs.replace("inputs:", "input:")
    text = text.replace(prepare_inputs + "        data_dir:", misspelt + "        data_dir:")
    found = problems(text)
    assert "Did you mean 'default'?" in found["tasks.train.parameters.outputs.metrics.defualt"][0]
    assert "A default path" in found["tasks.train.parameters.outputs.metrics.default"][0]
    assert "Did you mean 'inputs'?" in found["tasks.prepare.parameters.input"][0]


def test_other_mistakes():
    raw = yaml.safe_load(GOOD)
    raw["docker"]["build_file"] = "Dockerfile"
    raw["docker"]["--netwrok"] = "none"
    raw["platform"]["accelerator_count"] = -1
    raw["tasks"]["prepare"]["parameters"]["outputs"]["data_dir"]["default"] = "../outside"
    raw["tasks"]["prepare"]["parameters"]["outputs"]["data_dir"]["type"] = "folder"
    found = problems(yaml.safe_dump(raw))
    assert "'Dockerfile' is not in the project" in found["docker.build_file"][0]
    assert "Did you mean '--network'?" in found["docker.--netwrok"][0]
    assert "accelerators" in found["platform.accelerator_count"][0]
    assert "inside the workspace" in found["tasks.prepare.parameters.outputs.data_dir.default"][0]
    assert "Unknown type 'folder'" in found["tasks.prepare.parameters.outputs.data_dir.type"][0]
    assert list(problems("name: [unclosed")) == ["line 1"]


def test_mlcube_itself_lets_these_through(tmp_path):
    """Why the hub checks: mlcube 0.0.9 describes, without complaint, a cube whose task misspells
    entrypoint and whose parameter has an unknown type and an unknown key."""
    if shutil.which("mlcube", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("mlcube is installed by `make test`")
    shutil.copytree(PROJECT, tmp_path / "cube")
    cube = tmp_path / "cube" / "mlcube.yaml"
    cube.write_text(GOOD.replace("  train:\n", "  train:\n    entrypiont: python /app/fit.py\n").replace(
        "metrics: {type: file, default: metrics.json}", "metrics: {type: fil, default: metrics.json, colour: red}"))
    env = {**os.environ, "MLCUBE_SYSTEM_SETTINGS": str(tmp_path / "mlcube-settings.yaml")}
    done = subprocess.run([str(Path(sys.executable).with_name("mlcube")), "describe", f"--mlcube={cube.parent}"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    with pytest.raises(CubeError) as caught:
        parse_dir(cube.parent)
    assert set(caught.value.problems) == {"tasks.train.entrypiont", "tasks.train.parameters.outputs.metrics.colour",
                                          "tasks.train.parameters.outputs.metrics.type"}

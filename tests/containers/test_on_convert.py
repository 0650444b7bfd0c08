"""After a verified conversion the hub makes the version's MLCube but builds its image only when asked
(issue 41, point 14: a ~343 MB podman image per published version by default)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub.containers.services import on_onnx_verified
from hub.registry import services
from tests.conftest import staged, valid_metadata

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.cpu  # runs the cube's configuration tools in child processes: about 5 s
def test_the_default_makes_the_cube_and_leaves_the_image_for_when_it_is_asked_for():
    env = {k: v for k, v in os.environ.items() if k != "HUB_CUBE_ON_CONVERT"}
    code = "import django; django.setup(); from django.conf import settings; print(settings.HUB_CUBE_ON_CONVERT)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**env, "DJANGO_SETTINGS_MODULE": "hub.settings"},
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "generate", done.stderr[-2000:]


@pytest.mark.django_db
def test_generate_queues_a_cube_without_a_build_and_build_one_with_it(owner, tmp_path, settings):
    artifact = services.create_artifact(owner, kind="model", name="cubed", visibility="public")
    version = services.create_version(artifact, owner, files=[staged(tmp_path, "model.onnx", b"onnx bytes")],
                                      metadata=valid_metadata(framework="onnx"))
    settings.HUB_CUBE_ON_CONVERT = "generate"
    assert on_onnx_verified(version, owner, verified=True).params["build"] == "no"
    settings.HUB_CUBE_ON_CONVERT = "build"
    assert on_onnx_verified(version, owner, verified=True).params["build"] == "auto"
    assert on_onnx_verified(version, owner, verified=False) is None  # unverified: no cube

"""MLCube containers through the whole hub: a conversion publishes an ONNX version, a real Celery worker
makes its cube, builds the image with podman offline from the debootstrap base image and checks the
cube's infer against the gateway; the cube is valid for the mlcube CLI, and `mlcube run` with podman
and no network gives the gateway's outputs. A project's image is built and its tasks run the same way."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from hub.jobs.models import Job
from hub.registry.models import Version
from tests.conftest import start_worker, stop_process, wait_for_job, worker_env
from tests.containers.test_projects import project_files, upload
from tests.conversions import models
from tests.conversions.test_worker import conversion_job, publish_model

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
MLCUBE = str(Path(sys.executable).with_name("mlcube"))


@pytest.fixture(scope="module")
def cube_worker(django_db_setup, django_db_blocker, tmp_path_factory, cube_base):
    """A worker that makes and builds cubes after conversions (HUB_CUBE_ON_CONVERT=build)."""
    from workers.celery import app

    root = tmp_path_factory.mktemp("cube-worker")
    env = worker_env(root, HUB_CUBE_ON_CONVERT="build", HUB_CUBE_BASE_IMAGE=cube_base)
    app.control.purge()
    proc = start_worker(root, env, name="cube-worker")
    yield root
    stop_process(proc)


@pytest.fixture
def storage(settings, cube_worker):
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(cube_worker / "blobs")}
    settings.HUB_UPLOAD_DIR = cube_worker / "uploads"
    return cube_worker


def mlcube(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([MLCUBE, *args], capture_output=True, text=True, timeout=300)


def test_conversion_makes_builds_and_checks_the_cube(storage, api, tmp_path):
    filename, metadata = models.torchscript_cnn(tmp_path)
    x = np.random.default_rng(3).standard_normal((2, 1, 28, 28)).astype(np.float32)
    buffer = io.BytesIO()
    np.savez(buffer, image=x)
    publish_model(api, "cnn", {filename: (tmp_path / filename).read_bytes(), "sample_inputs.npz": buffer.getvalue()},
                  {**metadata, "framework": "pytorch"})
    assert wait_for_job(conversion_job("1", "cnn").pk, timeout=240).state == "succeeded"
    job = wait_for_job(Job.objects.get(kind="container", version__label="1-onnx",
                                       version__artifact__name="cnn").pk, timeout=900)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-8:])
    result = job.result
    assert result["built"] is True and result["name"] == "cnn-mlcube"
    assert result["image"] == "localhost/hpcfair/alice-cnn:1-onnx"
    container = result["container"]
    assert container["digest"].startswith("sha256:") and container["size"] > 50e6 and container["network"] == "none"
    assert container["check"]["passed"] and container["check"]["max_abs_diff"] <= 1e-5
    assert container["check"]["inputs"] == "sample_inputs.npz"

    cube = api.get("/api/v1/artifacts/alice/cnn/versions/1-onnx/container").json()
    assert cube["artifact"] == "alice/cnn-mlcube" and cube["version"] == "1-onnx"
    assert cube["provenance"][0]["relation"] == "derived_from" and cube["provenance"][0]["target"] == "alice/cnn@1-onnx"
    assert sorted(f["path"] for f in cube["files"]) == ["alice-cnn.mlcube.zip", "build.log"]
    assert cube["metadata"]["container_image"] == result["image"] and cube["metadata"]["license"] == "MIT"
    assert [t["name"] for t in cube["metadata"]["mlcube"]["tasks"]] == ["infer"]
    # Asking again gives the same cube, not a second build.
    again = wait_for_job(api.post("/api/v1/artifacts/alice/cnn/versions/1/container", {"build": "auto"},
                                  format="json").json()["id"])
    assert again.state == "succeeded" and again.result["pid"] == cube["pid"]

    archive = tmp_path / "cube.zip"
    archive.write_bytes(b"".join(api.get("/api/v1/artifacts/alice/cnn-mlcube/versions/1-onnx/files/"
                                         "alice-cnn.mlcube.zip").streaming_content))
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(tmp_path / "unpacked")
    folder = tmp_path / "unpacked" / "alice-cnn"
    assert {"mlcube.yaml", "mlcube-gpu.yaml", "Containerfile", "Containerfile.gpu", "Singularity.def",
            "Singularity-gpu.def", "requirements-gpu.txt", "entrypoint.py"} <= {p.name for p in folder.iterdir()}
    assert "onnxruntime-gpu==" in (folder / "requirements-gpu.txt").read_text()
    described = mlcube("describe", f"--mlcube={folder}")
    assert described.returncode == 0 and "name = infer, inputs = ['model', 'inputs', 'parameters']" in \
        described.stdout, described.stderr
    shown = mlcube("show_config", f"--mlcube={folder}", "--platform=docker")
    assert shown.returncode == 0 and "image: localhost/hpcfair/alice-cnn:1-onnx" in shown.stdout
    gpu = mlcube("show_config", f"--mlcube={folder / 'mlcube-gpu.yaml'}", "--platform=docker")
    assert gpu.returncode == 0 and "accelerator_count: 1" in gpu.stdout and "--gpus=all" in gpu.stdout

    # The image the worker built runs under MLCube's own docker runner, with podman and no network.
    ran = mlcube("run", f"--mlcube={folder}", "--task=infer", "--platform=docker", "-Pdocker.docker=podman",
                 "-Pdocker.--network=none", "-Pdocker.cpu_args=--rm")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    with np.load(folder / "workspace" / "outputs.npz") as data:
        in_container = {name: data[name] for name in data.files}
    gateway = api.post("/api/v1/artifacts/alice/cnn/versions/1-onnx/infer", {"inputs": {"image": x.tolist()}},
                       format="json")
    assert gateway.status_code == 200, gateway.content
    expected = {name: np.asarray(value["data"] if isinstance(value, dict) else value, dtype=np.float32)
                for name, value in gateway.json()["outputs"].items()}
    assert list(in_container) == list(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(in_container[name], value, atol=1e-5)


def test_a_project_is_built_and_its_tasks_run(storage, api):
    buffer = io.BytesIO()  # a form upload keeps base names only: the project's folders travel in a zip
    with zipfile.ZipFile(buffer, "w") as zf:
        for path, data in project_files().items():
            zf.writestr(f"recipe/{path}", data)
    response = upload(api, "recipe", {"recipe.zip": buffer.getvalue()})
    assert response.status_code == 201, response.content
    started = api.post("/api/v1/artifacts/alice/recipe/versions/1/container",
                       {"build": "yes", "tasks": ["prepare", "train"]}, format="json")
    assert started.status_code == 202, started.content
    job = wait_for_job(started.json()["id"], timeout=600)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-8:])
    assert job.result["built"] and [run["task"] for run in job.result["runs"]] == ["prepare", "train"]
    assert any("train: test RMSE" in line["message"] for line in job.log)
    unknown = api.post("/api/v1/artifacts/alice/recipe/versions/1/container", {"tasks": ["fit"]}, format="json")
    failed = wait_for_job(unknown.json()["id"])
    assert failed.state == "failed" and failed.error_code == "invalid" and "no task 'fit'" in failed.error_detail
    assert Version.objects.filter(artifact__name="recipe").count() == 1
    assert json.loads(json.dumps(job.result))["mlcube"]["name"] == "linear-regression-project"

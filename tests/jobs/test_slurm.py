"""The Slurm executor through a real scheduler: the private cluster of scripts/slurm.sh (started by
scripts/services.sh), a real Celery worker with HUB_EXECUTOR=slurm that submits jobs with sbatch and follows
them with squeue, and the runner (hpcfair.slurm_runner) on the "compute node". Answers are compared with bare
ONNX Runtime in this process."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from hub.jobs.models import Job
from hub.registry.models import Version
from hub.storage import get_blob_store
from tests.conftest import start_worker, stop_process, wait_for_job, worker_env
from tests.gateway import models
from tests.system_packages import installed_profile

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

MLP = models.mlp(hidden=32)
SLURM = {"HUB_EXECUTOR": "slurm", "HUB_SLURM_POLL_S": "0.3", "HUB_SLURM_TIME": "5", "HUB_SLURM_MEM": "400M",
         "HUB_JOB_MAX_ATTEMPTS": "2", "HUB_SLURM_KINDS": "infer,container,optimize,verify,finetune,generate"}


def slurm_command(*args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, check=True, timeout=30).stdout


def cluster_worker(tmp_path_factory, name: str, **settings: str):
    """A Celery worker that runs jobs on the private Slurm cluster (SLURM and ``settings``); yields its folder
    (blobs, job folders)."""
    from workers.celery import app

    if not os.environ.get("SLURM_CONF"):
        (pytest.fail if installed_profile() else pytest.skip)("needs the private Slurm cluster: run through "
                                                              "`make test` (scripts/services.sh sets SLURM_CONF)")
    root = tmp_path_factory.mktemp(name)
    env = worker_env(root, **{**SLURM, **settings}, HUB_SLURM_JOB_DIR=str(root / "jobs"))
    app.control.purge()
    proc = start_worker(root, env, name=f"{name}-worker")
    yield root
    stop_process(proc)


@pytest.fixture(scope="module")
def slurm_root(django_db_setup, django_db_blocker, tmp_path_factory):
    yield from cluster_worker(tmp_path_factory, "slurm")


def point_at(settings, root: Path, **more) -> None:
    """This process on a cluster worker's blobs, uploads and job folders, with ``more`` settings of the worker's."""
    settings.HUB_STORAGE = {**settings.HUB_STORAGE, "BACKEND": "filesystem", "DIR": str(root / "blobs")}
    settings.HUB_UPLOAD_DIR = root / "uploads"
    settings.HUB_SLURM_JOB_DIR = root / "jobs"
    for name, value in more.items():
        setattr(settings, name, value)


@pytest.fixture
def hub(settings, slurm_root):
    """This process submits like the worker does: the same job folders, blobs and settings."""
    point_at(settings, slurm_root, HUB_EXECUTOR="slurm", HUB_SLURM_KINDS=SLURM["HUB_SLURM_KINDS"].split(","))
    yield slurm_root
    # A published version starts jobs of its own (an optimised version's verification): the test's database is
    # flushed only once none is queued or running, so that a node's last writes do not meet the flush (a
    # deadlock between TRUNCATE and a job's update, seen once in CI).
    deadline = time.monotonic() + 120
    while Job.objects.filter(state__in=(Job.State.QUEUED, Job.State.RUNNING)).exists() and time.monotonic() < deadline:
        time.sleep(0.25)


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@pytest.fixture
def mlp(hub, owner, publish):
    _, version = publish(owner, "mlp", {"mlp.onnx": MLP})
    return version


def dataset(owner, publish, rows: int, seed: int = 5) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, 784)).astype(np.float32)
    publish(owner, f"digits-{rows}-{seed}", {"inputs.npy": npy(x)}, kind="dataset")
    return x


def batch(api, owner, rows_name: str, model: str = "mlp", **options):
    response = api.post(f"/api/v1/artifacts/alice/{model}/versions/latest/infer",
                        {"dataset": f"alice/{rows_name}", "batch_size": 16, **options}, format="json")
    assert response.status_code == 202, response.content
    return response.json()["id"]


def outputs_of(job: Job) -> dict[str, np.ndarray]:
    version = Version.objects.get(pid=job.result["pid"])
    file = version.files.get(path="outputs.npz")
    with get_blob_store().open(file.blob_id) as stream, np.load(io.BytesIO(stream.read())) as archive:
        return {name: archive[name] for name in archive.files}


def wait_for(predicate, timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise TimeoutError(what)


def test_batch_inference_as_a_job_array_equals_a_single_run(mlp, owner, publish, api):
    x = dataset(owner, publish, 50)
    single = wait_for_job(batch(api, owner, "digits-50-5"), timeout=90)
    assert single.state == "succeeded", (single.error_code, single.error_detail, single.log)
    array = wait_for_job(batch(api, owner, "digits-50-5", worker_num=3), timeout=90)
    assert array.state == "succeeded", (array.error_code, array.error_detail, array.log)

    expected = models.reference(MLP, {"x": x})["logits"]
    np.testing.assert_allclose(outputs_of(single)["logits"], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(outputs_of(array)["logits"], outputs_of(single)["logits"])
    assert array.execution["tasks"] == 3 and single.execution["tasks"] == 1
    assert array.worker == f"slurm:{array.execution['id']}" and array.execution["partition"] == "cpu"
    messages = [line["message"] for line in array.log]
    assert any("[task 2] " in m and "rows 33-50 of 50" in m for m in messages), messages  # live log lines
    execution = array.result["execution"]
    assert execution["executor"] == "slurm" and execution["partition"] == "cpu" and execution["tasks"] == 3
    assert execution["nodes"] and execution["started"] and execution["ended"]
    assert execution["cpu_s"] > 0 and execution["max_rss_bytes"] > 10 * 2**20
    # byte-identical outputs: the array's job points at the version the single run published
    assert array.result["pid"] == single.result["pid"]
    version = Version.objects.get(pid=single.result["pid"])
    assert version.metadata["execution"]["slurm_job"] == single.execution["id"]
    assert version.metadata["execution"]["partition"] == "cpu"
    assert_prov_names_the_slurm_job(api, version, single)  # ... and so does its PROV-O
    assert not Path(array.execution["folder"]).parent.exists()  # the job folder went with the job


def assert_prov_names_the_slurm_job(api, version: Version, job: Job) -> None:
    """The version's PROV-O: the generating activity is the hub job, with its times and its place (the Slurm
    job's node and partition)."""
    from django.urls import reverse
    from rdflib import Graph, URIRef
    from rdflib.namespace import PROV, RDFS

    url = reverse("api:version-metadata", args=[version.artifact.owner.username, version.artifact.name,
                                                 version.label, "turtle"])
    response = api.get(url)
    assert response.status_code == 200, response.content
    graph = Graph().parse(data=b"".join(response.streaming_content) if response.streaming else response.content,
                          format="turtle")
    activity = next(a for a in graph.objects(None, PROV.wasGeneratedBy) if isinstance(a, URIRef))
    assert str(activity).endswith(f"/{version.pid}#activity")  # the version's own IRI, not the job's private API
    assert {str(t) for t in graph.objects(activity, PROV.startedAtTime)} and \
        {str(t) for t in graph.objects(activity, PROV.endedAtTime)}
    place = next(graph.objects(activity, PROV.atLocation))
    run = job.execution
    assert f"slurm job {run['id']} on node(s) {run['nodes']}, partition {run['partition']}" in \
        str(next(graph.objects(place, RDFS.label)))


def slow_job(api, owner, publish) -> str:
    """A batch run that lasts about a minute (1000 rows, one at a time, ~60 ms each): the tests stop it."""
    publish(owner, "slow", {"slow.onnx": models.slow(size=1024, repeats=256)})
    x = np.random.default_rng(3).standard_normal((1000, 1024)).astype(np.float32) / 32
    publish(owner, "wide", {"inputs.npy": npy(x)}, kind="dataset")
    return batch(api, owner, "wide", model="slow", batch_size=1)


def running(job_id) -> Job:
    """The job once its runner is at work on the node (its log lines arrive)."""
    wait_for(lambda: any("ran rows" in line["message"] for line in Job.objects.get(pk=job_id).log), 30,
             "no log lines arrived")
    return Job.objects.get(pk=job_id)


def slurm_state(slurm_id: str) -> str:
    return slurm_command("squeue", "-h", "-t", "all", "-j", slurm_id, "-o", "%T").strip()


def test_cancelling_a_hub_job_cancels_its_slurm_job(hub, owner, publish, api):
    job = running(slow_job(api, owner, publish))
    from hub.jobs.executors import slurm

    assert slurm.EXECUTOR.submit(job)  # a duplicate submission message submits nothing
    assert Job.objects.get(pk=job.pk).execution["id"] == job.execution["id"] and job.attempts == 1
    response = api.post(f"/api/v1/jobs/{job.pk}/cancel")
    assert response.status_code in (200, 202), response.content
    job.refresh_from_db()
    assert job.state == "cancelled" and job.error_code == "cancelled"
    wait_for(lambda: slurm_state(job.execution["id"]) == "CANCELLED", 15, "Slurm still runs the job")
    assert not Path(job.execution["folder"]).exists()
    assert not Version.objects.filter(artifact__name="slow-outputs").exists()


@pytest.mark.slow
def test_a_time_limit_ends_the_job_with_time_limit(hub, owner, publish, api):
    job = running(slow_job(api, owner, publish))
    # Slurm's limits are whole minutes, checked every ~15 s: bring this job's end forward instead of waiting.
    end = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 1))
    slurm_command("scontrol", "update", f"JobId={job.execution['id']}", f"EndTime={end}")
    job = wait_for_job(job.pk, timeout=60)
    assert job.state == "failed" and job.error_code == "time_limit", (job.error_code, job.error_detail)
    assert "ran past its time limit (5)" in job.error_detail and job.execution["state"] == "TIMEOUT"


def expander() -> bytes:
    """x [n, 1] -> y [n, 2**24]: 64 MiB of output per row."""
    from onnx import TensorProto, helper

    shape = np.array([1, 2**24], np.int64)
    return models._model([helper.make_node("Expand", ["x", "shape"], ["y"])],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2**24])], [("shape", shape)],
                         "expander")


def test_a_memory_limit_ends_the_job_with_out_of_memory(hub, owner, publish, api):
    # The worker asks for HUB_SLURM_MEM=400M; 32 rows of 64 MiB need 2 GiB.
    publish(owner, "mlp", {"mlp.onnx": expander()})
    publish(owner, "ones", {"inputs.npy": npy(np.ones((32, 1), np.float32))}, kind="dataset")
    job = wait_for_job(batch(api, owner, "ones"), timeout=60)
    assert job.state == "failed" and job.error_code == "out_of_memory", (job.error_code, job.error_detail, job.log)
    assert "more memory than its limit (400M)" in job.error_detail


def test_a_partition_slurm_does_not_have_is_refused_at_submission(hub, mlp, owner, publish, api, settings):
    from hub.jobs.executors import slurm

    dataset(owner, publish, 4)
    done = wait_for_job(batch(api, owner, "digits-4-5"), timeout=60)  # the same job the worker submits well
    assert done.state == "succeeded", (done.error_code, done.error_detail)
    # ... submitted here, where the hub maps cpu to a partition this cluster lacks (stored, not dispatched:
    # this process runs what the worker's hub.batch_submit runs)
    settings.HUB_SLURM_PARTITIONS = "cpu=nosuch"
    job = Job.objects.create(kind="infer", requester=owner, version=done.version, params=done.params)
    assert slurm.EXECUTOR.submit(job)
    job.refresh_from_db()
    assert job.state == "failed" and job.error_code == "slurm_rejected", (job.error_code, job.error_detail)
    assert "invalid partition specified: nosuch" in job.error_detail.lower() and job.execution is None
    assert not (hub / "jobs" / str(job.pk)).exists()


def test_a_gpu_job_goes_to_the_gpu_partition(mlp, owner, publish, api):
    dataset(owner, publish, 4)
    job = wait_for_job(batch(api, owner, "digits-4-5", device="gpu", if_no_worker="queue"), timeout=60)
    assert job.execution["partition"] == "gpu"
    job_line = slurm_command("scontrol", "show", "job", job.execution["id"])
    assert "Partition=gpu" in job_line and "gres:gpu:1" in job_line
    # the node's one "GPU" is counted by Slurm, not real: the runner says there is no CUDA provider there
    assert job.state == "failed" and job.error_code == "gpu_unavailable", (job.error_code, job.error_detail)
    assert "has no CUDA execution provider" in job.error_detail


@pytest.mark.slow
def test_a_job_lost_with_its_node_is_submitted_again(hub, owner, publish, api):
    """NODE_FAIL: the hub submits the job again (attempt 2 of HUB_JOB_MAX_ATTEMPTS=2); when that attempt is lost
    too (here: the cluster forgot it, as after a slurmctld started afresh), the job ends worker_lost."""
    job = running(slow_job(api, owner, publish))
    first = job.execution["id"]
    _kill_node(job.execution["folder"])
    job = wait_for_job_change(job.pk, lambda j: j.is_final or (j.execution["id"] != first and j.state == "running"),
                              timeout=60)
    assert job.state == "running" and job.attempts == 2, (job.state, job.log)
    assert any(f"Slurm job {first} was lost: Slurm reports NODE_FAIL" in line["message"] for line in job.log)
    assert slurm_state(first) == "NODE_FAIL" and job.execution["attempt"] == 2
    wait_for(lambda: runner_pids(job.execution["folder"]), 30, "the second attempt never ran")
    second = job.execution["id"]
    try:
        forgotten = {**job.execution, "id": "99999999", "raw_ids": {}, "submitted": "2000-01-01T00:00:00+00:00"}
        Job.objects.filter(pk=job.pk).update(execution=forgotten)
        job = wait_for_job(job.pk, timeout=30)
        assert job.state == "failed" and job.error_code == "worker_lost", (job.state, job.error_code)
        assert job.attempts == 2 and "started 2 times" in job.error_detail
        assert any("neither squeue nor sacct knows it" in line["message"] for line in job.log)
    finally:
        slurm_command("scancel", second)


def wait_for_job_change(job_id, predicate, timeout: float) -> Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        if predicate(job):
            return job
        time.sleep(0.3)
    raise TimeoutError(f"job {job_id}: {job.state} {job.log[-3:]}")


def runner_pids(folder: str) -> list[int]:
    """The runner processes of one job folder (their command line names it)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and b"hpcfair.slurm_runner" in argv and folder.encode() in argv:
            found.append(int(proc.name))
    return found


def _kill_node(folder: str) -> None:
    """The node dies: slurmd, the job's step daemon and its runner are killed (by PID: only this cluster's);
    slurmctld marks the node DOWN after SlurmdTimeout (10 s) and the job NODE_FAIL. slurmd is started again
    and ReturnToService=2 brings the node back."""
    run_dir = Path(os.environ["SLURM_CONF"]).parent
    runners = runner_pids(folder)
    steps = [int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) for pid in runners]
    slurm_id = Job.objects.get(execution__folder=folder).execution["id"]
    for pid in [int((run_dir / "slurmd.pid").read_text()), *steps, *runners]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_for(lambda: slurm_state(slurm_id) == "NODE_FAIL", 40, "slurmctld did not notice the node's loss")
    subprocess.run(["slurmd", "-f", os.environ["SLURM_CONF"]], check=True, timeout=30)


@pytest.mark.slow
def test_an_mlcube_project_runs_under_slurm_with_podman(hub, api, cube_base):
    """The project's image is built offline on the node and its tasks run there, with podman."""
    from tests.containers.test_projects import project_files, upload

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path, data in project_files().items():
            zf.writestr(f"recipe/{path}", data)
    assert upload(api, "recipe", {"recipe.zip": buffer.getvalue()}).status_code == 201
    started = api.post("/api/v1/artifacts/alice/recipe/versions/1/container",
                       {"build": "yes", "tasks": ["prepare", "train"]}, format="json")
    assert started.status_code == 202, started.content
    job = wait_for_job(started.json()["id"], timeout=600)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-8:])
    assert job.execution["partition"] == "cpu" and job.result["execution"]["executor"] == "slurm"
    assert job.result["built"] and [run["task"] for run in job.result["runs"]] == ["prepare", "train"]
    assert job.result["mlcube"]["name"] == "linear-regression-project"
    assert any("train: test RMSE" in line["message"] for line in job.log)  # the container's own lines, live

    unknown = api.post("/api/v1/artifacts/alice/recipe/versions/1/container", {"tasks": ["fit"]}, format="json")
    failed = wait_for_job(unknown.json()["id"])
    assert failed.state == "failed" and failed.error_code == "invalid" and "no task 'fit'" in failed.error_detail
    assert failed.execution is None  # refused before anything was submitted


def test_an_optimisation_runs_in_the_sandbox_on_a_node(mlp, api):
    response = api.post("/api/v1/artifacts/alice/mlp/versions/1/optimize", {}, format="json")
    assert response.status_code == 202, response.content
    job = wait_for_job(response.json()["id"], timeout=120)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-6:])
    assert job.execution["partition"] == "cpu" and job.result["execution"]["executor"] == "slurm"
    optimized = Version.objects.get(artifact__name="mlp", label="1-opt")
    variants = optimized.metadata["optimization"]["variants"]
    assert {f.path for f in optimized.files.all()} == set(variants) and variants
    assert all(v["size"] > 0 and v["max_abs_diff"] < 0.1 for v in variants.values())
    assert optimized.provenance.get().relation == "derived_from" and optimized.metadata["job"] == str(job.pk)
    assert any("sandbox:" in line["message"] for line in job.log)


def test_a_verification_runs_in_the_sandbox_on_a_node(mlp, api):
    response = api.post("/api/v1/artifacts/alice/mlp/versions/1/convert", {}, format="json")
    assert response.status_code == 202, response.content
    job = wait_for_job(response.json()["id"], timeout=120)
    assert job.kind == "verify" and job.state == "succeeded", (job.error_code, job.error_detail, job.log[-6:])
    assert job.execution["partition"] == "cpu" and job.result["execution"]["executor"] == "slurm"
    assert job.result["verified"] is True and job.result["files"]["mlp.onnx"]["verification"]["passed"]
    messages = [line["message"] for line in job.log]
    assert any(m.startswith("mlp.onnx: verified, max abs difference") for m in messages), messages


@pytest.mark.slow
def test_a_finetune_trains_in_the_sandbox_on_a_node_and_publishes_as_celery_does(hub, api, tmp_path):
    """The small PyTorch model of tests/finetune trained on a node: the same version the Celery path publishes
    (better validation accuracy, derived_from the base, trained_on the dataset), and the Slurm job's node and
    partition in its metadata and PROV-O."""
    from tests.finetune import fixtures
    from tests.finetune.test_worker import publish as publish_api

    publish_api(api, "mlp", "model", {"mlp.pt": fixtures.torchscript_mlp(tmp_path).read_bytes()},
                task="classification", framework="pytorch",
                inputs=[{"name": "features", "shape": [None, 4], "dtype": "float32"}])
    publish_api(api, "blobs", "dataset", {"blobs.csv": fixtures.blobs_csv(tmp_path / "data", rows=1000).read_bytes()})
    response = api.post("/api/v1/artifacts/alice/mlp/versions/1/finetune",
                        {"dataset": "alice/blobs@1", "target": "label", "epochs": 3, "learning_rate": 0.01,
                         "seed": 5}, format="json")
    assert response.status_code == 202, response.content
    job = wait_for_job(response.json()["id"], timeout=300)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-8:])
    run = job.execution
    assert job.worker == f"slurm:{run['id']}" and run["partition"] == "cpu" and run["nodes"]
    messages = [line["message"] for line in job.log]
    assert any("epoch 3/3" in m and "accuracy" in m for m in messages), messages  # the node's lines, live
    assert any("sandbox:" in m for m in messages), messages
    result = job.result
    assert result["version"] == "alice/mlp-finetuned@1" and result["execution"]["executor"] == "slurm"
    assert result["final"]["accuracy"] > result["base"]["accuracy"]

    version = Version.objects.get(pid=result["pid"])
    assert version.artifact.visibility == "private"
    assert {(link.relation, str(link.target)) for link in version.provenance.all()} == {
        ("derived_from", "alice/mlp@1"), ("trained_on", "alice/blobs@1")}
    assert {f.path for f in version.files.all()} == {"model.pt", "sample_inputs.npz", "loss_curve.png"}
    meta = version.metadata
    assert meta["metrics"]["validation_accuracy"] > meta["metrics"]["base_validation_accuracy"]
    assert meta["job"] == str(job.pk) and len(meta["training"]["history"]) == 3
    execution = meta["execution"]
    assert execution["slurm_job"] == job.execution["id"] and execution["partition"] == "cpu"
    assert execution["nodes"] == job.execution["nodes"] and execution["started"] and execution["ended"]
    assert_prov_names_the_slurm_job(api, version, job)
    assert not Path(job.execution["folder"]).parent.exists()  # the job folder went with the job


def test_a_file_of_prompts_generates_the_same_text_on_a_node_as_on_celery(hub, owner, publish, api, settings,
                                                                          tmp_path):
    """A language model's generation over a dataset of prompts (kind generate) in the sandbox of a Slurm node
    and of a Celery worker: the same generations.jsonl."""
    from tests.generation.lm import folder_files, save_lm

    _, source = publish(owner, "llama", folder_files(save_lm(tmp_path / "llama", "llama")))
    build = Job.objects.get(version=source, kind="generation")  # on the worker's Celery queue
    assert wait_for_job(build.pk, timeout=300).state == "succeeded"
    publish(owner, "prompts", {"prompts.txt": b"the hub converts\nscientists share\n"}, kind="dataset")
    answers = {}
    for executor in ("celery", "slurm"):
        settings.HUB_EXECUTOR = executor
        response = api.post("/api/v1/artifacts/alice/llama/versions/1/generate",
                            {"dataset": "alice/prompts", "max_new_tokens": 8, "temperature": 0}, format="json")
        assert response.status_code == 202, response.content
        job = wait_for_job(response.json()["id"], timeout=180)
        assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-5:])
        assert bool(job.execution) == (executor == "slurm")
        version = Version.objects.get(pid=job.result["pid"])
        with get_blob_store().open(version.files.get(path="generations.jsonl").blob_id) as stream:
            answers[executor] = stream.read()
    assert answers["celery"] == answers["slurm"]
    assert answers["slurm"].count(b'"completion_tokens": 8') == 2


# One request, one answer, whichever executor runs it: the same chain and batch requests as Celery jobs and
# as Slurm jobs give the same outputs, or the same error code and message (hpcfair.compute.runs on both).
EXECUTOR_CASES = {
    "batch": ({"models": ["alice/mlp"]}, None),
    "chain with links": ({"models": ["alice/mlp", "alice/fan", "alice/add"], "links": [{}, {"a": "p", "b": "r"}]},
                         None),
    "3 outputs by position into 2 inputs": ({"models": ["alice/mlp", "alice/fan", "alice/add"]}, "invalid_inputs"),
    "a link naming no output": ({"models": ["alice/mlp", "alice/fan", "alice/add"],
                                 "links": [{}, {"a": "p", "b": "nothing"}]}, "invalid_inputs"),
}


def run_on(executor: str, settings, api, request: dict) -> Job:
    settings.HUB_EXECUTOR = executor
    models_ = request["models"]
    if len(models_) == 1:
        response = api.post(f"/api/v1/artifacts/{models_[0]}/versions/latest/infer",
                            {"dataset": "alice/digits-40-9", "batch_size": 16}, format="json")
    else:
        response = api.post("/api/v1/collaborate", {**request, "dataset": "alice/digits-40-9", "batch_size": 16},
                            format="json")
    assert response.status_code == 202, response.content
    job = wait_for_job(response.json()["id"], timeout=90)
    assert bool(job.execution) == (executor == "slurm"), job.execution
    return job


@pytest.mark.parametrize("case", list(EXECUTOR_CASES))
def test_celery_and_slurm_give_the_same_answer(case, mlp, owner, publish, api, settings):
    publish(owner, "fan", {"fan.onnx": models.fan_out()})
    publish(owner, "add", {"add.onnx": models.add_two()})
    x = dataset(owner, publish, 40, seed=9)
    request, code = EXECUTOR_CASES[case]
    if code:  # signatures the hub did not record: the API cannot check the joints, the executors must
        for version in Version.objects.filter(artifact__name__in=["fan", "add"]):
            version.metadata = {k: v for k, v in version.metadata.items() if k not in ("inputs", "outputs")}
            version.save(update_fields=["metadata"])
    jobs = {executor: run_on(executor, settings, api, request) for executor in ("celery", "slurm")}
    for executor, job in jobs.items():
        assert job.state == ("failed" if code else "succeeded"), (executor, job.error_code, job.error_detail)
        assert job.error_code == (code or ""), (executor, job.error_detail)
    assert jobs["celery"].error_detail == jobs["slurm"].error_detail
    if code is None:
        celery, slurm = outputs_of(jobs["celery"]), outputs_of(jobs["slurm"])
        assert set(celery) == set(slurm) and celery
        for name in celery:
            np.testing.assert_array_equal(celery[name], slurm[name])
        logits = models.reference(MLP, {"x": x})["logits"]
        expected = {"logits": logits} if case == "batch" else {"y": logits + np.abs(logits)}
        for name, value in expected.items():
            np.testing.assert_allclose(celery[name], value, rtol=1e-5, atol=1e-6)


def test_a_model_with_external_data_runs_on_a_node_with_its_versions_files(hub, owner, publish, api, tmp_path):
    """Issue 36: the node gets the model's folder with the data file its weights name, and nothing else."""
    import onnx
    from onnx.external_data_helper import convert_model_to_external_data

    model = onnx.load_from_string(MLP)
    convert_model_to_external_data(model, location="weights/mlp.bin", size_threshold=0)
    (tmp_path / "weights").mkdir()
    onnx.save_model(model, str(tmp_path / "mlp.onnx"))
    files = {"mlp.onnx": (tmp_path / "mlp.onnx").read_bytes(),
             "weights/mlp.bin": (tmp_path / "weights" / "mlp.bin").read_bytes()}
    publish(owner, "mlp-external", files)
    x = dataset(owner, publish, 20, seed=9)
    job = wait_for_job(batch(api, owner, "digits-20-9", model="mlp-external"), timeout=90)
    assert job.state == "succeeded", (job.error_code, job.error_detail, job.log)
    assert job.worker.startswith("slurm:")
    np.testing.assert_allclose(outputs_of(job)["logits"], models.reference(MLP, {"x": x})["logits"],
                               rtol=1e-5, atol=1e-6)


def test_a_job_is_billed_to_its_requesters_account_and_a_foreign_one_never_reaches_sbatch(mlp, owner, other,
                                                                                          publish, api):
    from hub.orgs.models import SlurmAccount

    SlurmAccount.objects.create(owner=owner, account="alice-proj", partitions=["cpu"], is_default=True)
    SlurmAccount.objects.create(owner=other, account="mallory-proj")
    dataset(owner, publish, 4)
    queued = Job.objects.count()
    refused = api.post("/api/v1/artifacts/alice/mlp/versions/latest/infer",
                       {"dataset": "alice/digits-4-5", "account": "mallory-proj"}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "account_not_allowed"
    assert Job.objects.count() == queued  # nothing was queued, so nothing reached sbatch
    job = wait_for_job(batch(api, owner, "digits-4-5", account="alice-proj"), timeout=60)
    assert job.state == "succeeded", (job.error_code, job.error_detail)
    assert job.account == "alice-proj"
    assert "Account=alice-proj" in slurm_command("scontrol", "show", "job", job.execution["id"])
    assert job.result["execution"]["account"] == "alice-proj"  # in the job's record
    published = Version.objects.get(pid=job.result["pid"])  # and in the provenance of what it published
    assert published.metadata["execution"]["account"] == "alice-proj", published.metadata

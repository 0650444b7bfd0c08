"""The job-kind seam's shape (docs/developing/extending/job-kind.md): a kind is one class in its app's ``jobs``
module, registered once; what kinds share lives in ``hub/jobs/`` (``toolkit``, ``files``), so no kind's module
imports another app's; and a kind added as one class, here in this file, is offered by the Job row, created with
its queue and run by the one Celery task, with no other file touched."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hub.jobs import executors, kinds, services
from hub.jobs.models import Job
from workers import tasks

ROOT = Path(__file__).resolve().parent.parent.parent
KIND_MODULES = sorted([*ROOT.glob("hub/*/jobs.py"), *ROOT.glob("hub/*/jobs/*.py")])


def _app(path: Path) -> str:
    return path.relative_to(ROOT / "hub").parts[0]


def test_every_kind_lives_in_its_app_s_jobs_module():
    modules = {type(kind).__module__ for kind in kinds.KINDS.values()}
    assert all(module.split(".")[0] == "hub" and module.split(".")[2] == "jobs" for module in modules), modules
    assert {".".join(path.relative_to(ROOT).with_suffix("").parts) for path in KIND_MODULES} >= modules


def test_no_kind_imports_another_app_s_kinds():
    """The toolkit three kinds used to import from ``hub/conversions/jobs.py`` is ``hub/jobs/`` now."""
    reaching = []
    for path in KIND_MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                parts = name.split(".")
                other = len(parts) >= 3 and parts[1] not in ("jobs", _app(path))
                if other and parts[0] == "hub" and parts[2] == "jobs":
                    reaching.append(f"{path.relative_to(ROOT)} imports {name}")
    assert reaching == [], "move what kinds share into hub/jobs/ (toolkit.py, files.py)"


@pytest.fixture
def echo_kind():
    @kinds.register
    class EchoJob(kinds.JobKind):
        """A kind written in one class, in a test module: nothing else of the tree names it."""

        name = "echo-test"
        label = "echo"
        queue = kinds.DEVICE

        def run(self, ctx) -> dict:
            ctx.log("echoing the parameters")
            ctx.progress(0.5)
            return {"echo": ctx.job.params["say"], "device": ctx.job.device}

    yield EchoJob
    del kinds.KINDS[EchoJob.name]


@pytest.mark.django_db
def test_a_kind_added_as_one_class_is_created_queued_and_run_by_the_one_task(echo_kind, owner, monkeypatch,
                                                                            django_capture_on_commit_callbacks):
    celery = executors.get("celery")
    monkeypatch.setattr(type(celery), "dispatch", lambda self, job: tasks.run_job(str(job.pk)))  # the task, eagerly
    assert ("echo-test", "echo") in Job._meta.get_field("kind").choices
    with django_capture_on_commit_callbacks(execute=True):
        job = services.create_job("echo-test", owner, params={"say": "hello"}, device="gpu")
    job.refresh_from_db()
    assert job.queue == "gpu" and job.get_kind_display() == "echo"
    assert job.state == "succeeded", (job.error_code, job.error_detail)
    assert job.result == {"echo": "hello", "device": "gpu"} and job.progress == 1.0
    assert [line["message"] for line in job.log] == ["echoing the parameters"]

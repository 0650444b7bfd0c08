"""Executors: where a job's work runs, one module each behind one interface (docs/developing/extending/executor.md).

``HUB_EXECUTORS`` chooses one per kind (``infer=slurm,container=slurm``; every other kind: ``celery``). The module
``hub.jobs.executors.<name>`` defines ``EXECUTOR``, an ``Executor``. Celery runs ``kind.run`` in a worker; a batch
executor (``batch.BatchExecutor``) has a worker stage the kind's inputs and submit them to a scheduler, and a poller
publish them. The job row records ``job.execution``: ``{"executor": name, ...its own data}`` (null on Celery).
"""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

from django.conf import settings

from hub.jobs import kinds

Job = Any  # hub.jobs.models.Job (not imported: the executors' modules import the models)


class Executor:
    """The verbs every executor answers. ``dispatch`` runs in the web process after the job's commit (it only
    sends a message); ``submit``, ``poll`` and ``cancel`` talk to the scheduler."""

    name: ClassVar[str]
    batch: ClassVar[bool] = False  # runs jobs outside the hub's workers (staged folder, a poller publishes)

    def dispatch(self, job: Job) -> None:
        """Send the job on its way (a message to a queue; raises the broker's errors)."""
        raise NotImplementedError

    def submit(self, job: Job) -> bool:
        """Start the job's work; False: this executor does not take this job, Celery runs it instead."""
        raise NotImplementedError

    def poll(self) -> int:
        """Bring the jobs it runs up to date; returns how many changed state."""
        return 0

    def cancel(self, job: Job) -> None:
        """Stop the job's work and remove what it made (the caller marked the job)."""
        raise NotImplementedError

    def place(self, device: str) -> str | None:
        """Where jobs for ``device`` run (a partition), for billing; None where that means nothing."""
        return None


def chosen() -> dict[str, str]:
    """Kind -> executor name: ``HUB_EXECUTORS``, else the deprecated ``HUB_EXECUTOR=slurm`` + ``HUB_SLURM_KINDS``."""
    if settings.HUB_EXECUTORS:
        return dict(item.split("=", 1) for item in settings.HUB_EXECUTORS)
    return {kind: "slurm" for kind in settings.HUB_SLURM_KINDS} if settings.HUB_EXECUTOR == "slurm" else {}


def get(name: str) -> Executor:
    """The executor of module ``hub.jobs.executors.<name>``."""
    return importlib.import_module(f"{__name__}.{name}").EXECUTOR


def executor_for(kind: str) -> Executor:
    """The executor of ``kind``: the one chosen for it when the kind can run there (a batch executor needs the
    kind's ``stage``), else Celery."""
    name = chosen().get(kind, "celery")
    if name != "celery" and kind in kinds.KINDS and kinds.get(kind).runs_on_nodes():
        return get(name)
    return get("celery")


def of(job: Job) -> Executor:
    """The executor that runs ``job`` now (the one it was submitted to), else the one its kind goes to."""
    return get(job.execution["executor"]) if job.execution else executor_for(job.kind)


def batch_executors() -> list[Executor]:
    """The batch executors this hub uses (their poller runs in every worker)."""
    return [get(name) for name in sorted(set(chosen().values())) if get(name).batch]

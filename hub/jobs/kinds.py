"""Job kinds: each kind of job is one class in its app's ``jobs`` module, registered here once by ``@register``.

Everything that needs to know the kinds reads this one registry: the ``Job.kind`` choices, job creation
(``hub.jobs.services``), the Celery executor's one task (``workers.tasks.run_job``) and the batch executors
(``hub.jobs.executors``). The kinds' modules are imported when Django starts (``JobsConfig.ready`` discovers
the ``jobs`` module of every installed app, as the admin discovers ``admin`` modules).

A kind runs on either executor:

- **Celery** calls ``run(ctx)`` in one worker process: it stages the inputs, computes (through the compute
  library, ``hpcfair.compute`` and the engines of ``hub.gateway.engine``) and publishes (versions,
  provenance), and returns the job's result;
- **a batch executor** (``hub.jobs.executors``), for kinds that define ``stage``: ``stage(job, folder)`` writes
  the inputs into a job folder on the login node and returns a ``Plan`` (the node's ``job.json``: which compute of
  ``hpcfair.slurm_runner`` and its arguments); the node computes; ``publish(job, folder, execution)`` publishes
  what it wrote, in the poller, exactly as ``run`` would (``job.execution["tasks"]`` says how many tasks wrote).

Failures a scientist can act on are ``hpcfair.compute.CodedError`` with a code of ``JOB_CODES`` (or of the
HTTP table, ``hub.errors.STATUS``, for what publishing meets); the runner records them on the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

# The kinds' methods take a ``hub.jobs.models.Job`` (``job``) or a ``hub.jobs.runner.JobContext`` (``ctx``);
# they are not imported here, because the Job model reads its choices from this module.
Job = Any
JobContext = Any


@dataclass
class Plan:
    """What a kind asks Slurm for: the runner's ``job.json`` (``compute`` names what the node runs), the
    array size, CPUs per task, a line for the job's log."""

    spec: dict[str, Any]
    tasks: int = 1
    cpus: int = 1
    summary: str = ""
    memory_mb: int = 0  # what one task needs at least (a large model's weights); HUB_SLURM_MEM when more


class JobKind:
    """One kind of job. Subclasses set ``name`` and ``label`` and define ``run``; those that can run on a
    Slurm node define ``stage`` and ``publish`` too."""

    name: ClassVar[str]
    label: ClassVar[str]
    # The Celery queue its jobs wait in: "cpu", "convert" (the converters' workers) or DEVICE, the queue of the
    # device the job asks for ("cpu" or "gpu").
    queue: ClassVar[str] = "cpu"

    def run(self, ctx: JobContext) -> dict[str, Any]:
        """The whole job in this process (the Celery executor); returns the job's result."""
        raise NotImplementedError

    def stage(self, job: Job, folder: Path) -> Plan | None:
        """Write the job's inputs into ``folder`` for a node; None: run this job with ``run`` instead (e.g. a
        retried job that published already, or a case the node does not take)."""
        raise NotImplementedError

    def publish(self, job: Job, folder: Path, execution: dict[str, Any]) -> dict[str, Any]:
        """Publish what the node wrote into ``folder``; returns the job's result."""
        raise NotImplementedError

    def follow(self, job: Job, folder: Path) -> None:
        """While the job's tasks run: read what the node wrote so far (a server's address), at every poll; the
        caller saves ``job`` (its log) after."""

    @classmethod
    def runs_on_nodes(cls) -> bool:
        """Whether this kind can run on a Slurm node (it defines ``stage``)."""
        return cls.stage is not JobKind.stage


DEVICE = "device"  # a kind's ``queue``: its jobs wait in the queue of the device they ask for

KINDS: dict[str, JobKind] = {}


def register(cls: type[JobKind]) -> type[JobKind]:
    """Class decorator: make ``cls`` the kind of its ``name``. A name is registered once."""
    if cls.name in KINDS and type(KINDS[cls.name]) is not cls:
        raise ValueError(f"job kind {cls.name!r} is registered twice: {type(KINDS[cls.name]).__name__} and "
                         f"{cls.__name__}")
    KINDS[cls.name] = cls()
    return cls


def get(name: str) -> JobKind:
    """The kind registered as ``name``; ``KeyError`` for a name no app registers."""
    return KINDS[name]


def choices() -> list[tuple[str, str]]:
    """``Job.kind``'s choices: every registered kind, by name."""
    return sorted((name, kind.label) for name, kind in KINDS.items())

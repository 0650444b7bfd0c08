"""What every batch executor shares: a worker stages the kind's inputs into a job folder on a filesystem the nodes
share, the executor's scheduler runs ``python -m hpcfair.slurm_runner FOLDER`` once per task there, and a poller (one
at a time) follows the tasks' states and log files, publishes with ``kind.publish`` when all completed, maps a final
failure to a job code (``hub.errors.SLURM_STATES``) and submits a lost job again up to its attempt limit.

A scheduler's module subclasses ``BatchExecutor`` with four methods: ``start`` (submit a staged folder), ``states``
(its tasks' states, in Slurm's words), ``stop`` and ``accounting``. ``job.execution`` holds ``executor``, ``id``,
``partition``, ``tasks``, ``folder``, ``state``, ``attempt``, ``submitted``, ``offsets`` (of the logs read) and
whatever the module adds.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import hpcfair
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from hpcfair.compute import CodedError

from hub.errors import SLURM_LOST_STATES, SLURM_STATES
from hub.jobs import kinds
from hub.jobs.executors import Executor, executor_for
from hub.jobs.kinds import Plan
from hub.jobs.models import Job, log_line

log = logging.getLogger(__name__)

ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
          "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED")
MAX_LOG_LINES = 2000
LOST = "LOST"  # execution["state"] of an attempt that was lost, until the next one is submitted
LOST_AFTER_S = 60  # a submitted job its scheduler does not know for this long was lost with its cluster


@dataclass
class Task:
    """One task of a job as its scheduler reports it (states in Slurm's words)."""

    index: int
    raw_id: str
    state: str
    partition: str = ""
    nodes: str = ""
    reason: str = ""
    start: str = ""
    end: str = ""


def folder_of(job: Job, attempt: int) -> Path:
    return Path(settings.HUB_SLURM_JOB_DIR) / str(job.pk) / f"attempt-{attempt}"


def remove_folder(job: Job) -> None:
    if job.execution and job.execution.get("folder"):
        shutil.rmtree(Path(job.execution["folder"]).parent, ignore_errors=True)


class BatchExecutor(Executor):
    batch = True
    label = "the scheduler"  # in the job's log lines
    forgotten = "the scheduler does not know it any more"  # why a job was lost when nobody knows it

    # --- what a scheduler's module defines ----------------------------------------------------------------

    def start(self, job: Job, plan: Plan, folder: Path, attempt: int) -> dict[str, Any]:
        """Submit the staged ``folder`` (``plan.tasks`` tasks); returns ``{"id": ..., "partition": ...}`` and any
        data of its own. Raises ``CodedError`` (``slurm_rejected``) when the scheduler refuses."""
        raise NotImplementedError

    def states(self, jobs: list[Job]) -> dict[Any, list[Task] | None] | None:
        """Job pk -> its tasks (None: the scheduler does not know it); None when the scheduler cannot answer."""
        raise NotImplementedError

    def stop(self, job: Job) -> None:
        """Ask the scheduler to stop the job's tasks."""
        raise NotImplementedError

    def accounting(self, job: Job, tasks: list[Task]) -> dict[str, Any]:
        """The scheduler's figures of a completed job (elapsed_s, cpu_s, max_rss_bytes where it has them)."""
        return {}

    # --- the interface ------------------------------------------------------------------------------------

    def dispatch(self, job: Job) -> None:
        """A worker of ``HUB_SLURM_SUBMIT_QUEUE`` stages and submits (``workers.tasks.submit``)."""
        from hub.celery import app

        app.send_task("hub.batch_submit", args=[str(job.pk)], queue=settings.HUB_SLURM_SUBMIT_QUEUE)

    def cancel(self, job: Job) -> None:
        self.stop(job)
        remove_folder(job)

    def submit(self, job: Job) -> bool:
        """Stage and submit the job; False to send it to Celery instead. Failures end the job (the scheduler's own
        message); nothing is left in the job folder then."""
        if executor_for(job.kind) is not self:
            return False
        kind = kinds.get(job.kind)
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=job.pk)
            if job.is_final or (job.execution and job.execution["state"] != LOST):
                return True  # a duplicate message: this attempt was submitted already
            attempt = job.attempts + 1
            folder = folder_of(job, attempt)
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            try:
                plan = kind.stage(job, folder)
                if plan is None:
                    shutil.rmtree(folder.parent, ignore_errors=True)
                    return False
                (folder / "job.json").write_text(json.dumps(plan.spec))
                data = self.start(job, plan, folder, attempt)
            except CodedError as exc:
                shutil.rmtree(folder.parent, ignore_errors=True)
                job.mark_failed(exc.code, exc.detail)
                job.save()
                return True
            except Exception:  # noqa: BLE001 - never a job left queued for ever; its trace goes to the log
                log.exception("%s: preparing job %s failed", self.name, job.pk)
                shutil.rmtree(folder.parent, ignore_errors=True)
                job.mark_failed("internal_error", f"The job could not be prepared for {self.label}; the "
                                                  f"administrators can trace it by job id {job.pk}.")
                job.save()
                return True
            job.execution = {"executor": self.name, "tasks": plan.tasks, "folder": str(folder), "state": "PENDING",
                             "attempt": attempt, "submitted": timezone.now().isoformat(), "offsets": {}, **data}
            job.attempts = attempt
            job.worker = f"{self.name}:{data['id']}"
            job.dispatched = timezone.now()
            job.append_log("info", f"submitted to {self.label} as job {data['id']} (partition {data['partition']}, "
                                   f"{plan.tasks} task{'s' if plan.tasks != 1 else ''}): {plan.summary}")
            job.save()
        return True

    def poll(self) -> int:
        """Update every job this executor runs; returns how many changed state. One poller at a time (a PostgreSQL
        advisory lock per executor): finishing a job publishes its outputs once."""
        if connection.vendor != "postgresql":
            return self._poll()
        key = zlib.crc32(f"hub-executor-{self.name}".encode()) & 0x7FFFFFFF
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            if not cursor.fetchone()[0]:
                return 0
            try:
                return self._poll()
            finally:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])

    # --- following the jobs -------------------------------------------------------------------------------

    def _poll(self) -> int:
        jobs = list(Job.objects.filter(execution__executor=self.name, state__in=[Job.State.QUEUED, Job.State.RUNNING])
                    .exclude(execution__state=LOST))
        found = self.states(jobs) if jobs else None
        if found is None:
            return 0
        changed = 0
        for job in jobs:
            try:
                changed += self._update(job, found.get(job.pk))
            except Exception:  # noqa: BLE001 - one job's trouble must not stop the others' updates
                log.exception("%s poller: job %s", self.name, job.pk)
        return changed

    def _update(self, job: Job, tasks: list[Task] | None) -> int:
        folder = Path(job.execution["folder"])
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=job.pk)
            if job.is_final or not job.execution or job.execution["state"] == LOST:
                return 0
            job.log = (job.log + _read_logs(job, folder))[-MAX_LOG_LINES:]
            if tasks is None:
                submitted = datetime.fromisoformat(job.execution["submitted"])
                if (timezone.now() - submitted).total_seconds() < LOST_AFTER_S:
                    job.save(update_fields=["log", "execution"])
                    return 0
                return self._lost(job, self.forgotten)
            for task in tasks:
                job.execution.setdefault("raw_ids", {})[str(task.index)] = task.raw_id
            states = {task.state for task in tasks}
            nodes = sorted({task.nodes for task in tasks if task.nodes})
            partition = next((t.partition for t in tasks if t.partition), job.execution["partition"])
            job.execution.update(state=_summary(tasks), nodes=",".join(nodes), partition=partition)
            ended = [task for task in tasks if task.state not in ACTIVE]
            lost = [task for task in ended if task.state in SLURM_LOST_STATES]
            failed = [task for task in ended if task.state != "COMPLETED" and task not in lost]
            if lost:
                return self._lost(job, f"{self.label} reports {lost[0].state} for task {lost[0].index} on "
                                       f"{lost[0].nodes or '?'}")
            if failed:
                self._fail(job, failed[0], folder)
                return 1
            if len(ended) == job.execution["tasks"] and states == {"COMPLETED"}:
                self._finish(job, tasks, folder)
                return 1
            before = job.state
            if states & {"RUNNING", "COMPLETING", "COMPLETED"}:
                job.state = Job.State.RUNNING
                job.started = job.started or timezone.now()
                job.heartbeat = timezone.now()
                done = sum(task.state == "COMPLETED" for task in tasks)
                job.progress = max(job.progress, 0.05 + 0.85 * done / job.execution["tasks"])
                kinds.get(job.kind).follow(job, folder)
            job.save()
            return int(job.state != before)

    def _fail(self, job: Job, task: Task, folder: Path) -> None:
        """A task ended badly: the runner's own error, else what the state (and the task's log) say."""
        self.stop(job)  # the other tasks are of no use now
        error = _error_file(folder, task.index) if task.state == "FAILED" else None
        if error is not None:
            code, detail = error["code"], error["detail"]
        else:
            state = task.state
            path = folder / f"task-{task.index}.log"
            log_text = path.read_text(errors="replace") if path.exists() else ""
            if "Exceeded job memory limit" in log_text or "oom-kill" in log_text:
                state = "OUT_OF_MEMORY"  # without cgroups Slurm reports FAILED; slurmstepd says why in the log
            code, template = SLURM_STATES.get(state, SLURM_STATES["FAILED"])
            detail = template.format(id=job.execution["id"], node=task.nodes or "?", time=settings.HUB_SLURM_TIME,
                                     mem=settings.HUB_SLURM_MEM, state=task.state, partition=task.partition)
        job.execution["state"] = task.state
        job.mark_failed(code, detail)
        job.save()
        remove_folder(job)

    def _lost(self, job: Job, why: str) -> int:
        """The job was lost with its node (or preempted): submitted again by this poller up to the attempt limit."""
        self.cancel(job)
        job.append_log("warning", f"{self.label} job {job.execution['id']} was lost: {why} (attempt {job.attempts})")
        if job.attempts >= settings.HUB_JOB_MAX_ATTEMPTS:
            job.mark_worker_lost()
        else:
            job.state = Job.State.QUEUED
            job.execution["state"] = LOST
            job.append_log("info", "submitting it again")
            transaction.on_commit(lambda: self.submit(job))
        job.save()
        return 1

    def _finish(self, job: Job, tasks: list[Task], folder: Path) -> None:
        info = self.execution(job, tasks, folder)
        try:
            if executor_for(job.kind) is not self:
                raise CodedError("slurm_rejected", f"This hub no longer runs this kind of job on {self.label}.")
            result = kinds.get(job.kind).publish(job, folder, info)
        except CodedError as exc:
            job.mark_failed(exc.code, exc.detail)
        except Exception:  # noqa: BLE001 - recorded without its text, like the runner's internal errors
            log.exception("%s job %s: publishing its results failed", self.name, job.pk)
            job.mark_failed("internal_error", f"The job's results could not be published; the administrators can "
                                              f"trace it by job id {job.pk}.")
        else:
            job.state = Job.State.SUCCEEDED
            job.finished = timezone.now()
            job.progress = 1.0
            job.result = {**result, "execution": info}
            job.append_log("info", f"{self.label} job {info['job']} completed on {info['nodes']} "
                                   f"({info['partition']}): {info['elapsed_s']} s, CPU {info['cpu_s']} s, "
                                   f"peak memory {info['max_rss_bytes'] / 2**20:.0f} MiB")
            shutil.rmtree(folder.parent, ignore_errors=True)
        job.execution["state"] = "COMPLETED"
        job.save()

    def execution(self, job: Job, tasks: list[Task], folder: Path) -> dict[str, Any]:
        """Where and how long the job ran: the scheduler's accounting, and the runner's own CPU time and peak
        memory where the scheduler has none."""
        results = []
        for task in sorted(tasks, key=lambda t: t.index):
            try:
                results.append(json.loads((folder / "out" / f"result-{task.index}.json").read_text()))
            except (OSError, ValueError):
                results.append({})
        starts = [_when(t.start) for t in tasks if _when(t.start)]
        ends = [_when(t.end) for t in tasks if _when(t.end)]
        return {"executor": self.name, "job": job.execution["id"], "partition": job.execution["partition"],
                "account": job.account or settings.HUB_SLURM_ACCOUNT, "nodes": job.execution.get("nodes", ""),
                "tasks": len(tasks), "started": min(starts) if starts else None, "ended": max(ends) if ends else None,
                "elapsed_s": None, "cpu_s": round(sum(r.get("cpu_s", 0) for r in results), 3),
                "max_rss_bytes": max((r.get("max_rss_bytes", 0) for r in results), default=0),
                "accounting": "the runner's getrusage", **self.accounting(job, tasks)}


def _when(text: str) -> str:
    """A scheduler's local time (2026-11-23T17:51:50) as ISO 8601 with its offset; empty when unknown."""
    try:
        return datetime.fromisoformat(text).astimezone().isoformat()
    except ValueError:
        return ""


def _read_logs(job: Job, folder: Path) -> list[dict[str, str]]:
    """New lines of the tasks' log files (``task-<i>.log``) since the last poll."""
    offsets = job.execution.setdefault("offsets", {})
    lines = []
    for index in range(job.execution["tasks"]):
        try:
            with open(folder / f"task-{index}.log", "rb") as handle:
                handle.seek(offsets.get(str(index), 0))
                data = handle.read(1 << 20)
        except FileNotFoundError:
            continue
        complete = data[:data.rfind(b"\n") + 1]  # a line still being written waits for the next poll
        offsets[str(index)] = offsets.get(str(index), 0) + len(complete)
        prefix = f"[task {index}] " if job.execution["tasks"] > 1 else ""
        for line in complete.decode(errors="replace").splitlines():
            if line.strip():
                lines.append(log_line("error" if "error" in line.lower() else "info", prefix + line.strip()))
    return lines


def _summary(tasks: list[Task]) -> str:
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.state] = counts.get(task.state, 0) + 1
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) if len(tasks) > 1 else tasks[0].state


def _error_file(folder: Path, index: int) -> dict[str, str] | None:
    try:
        return json.loads((folder / "out" / f"error-{index}.json").read_text())
    except (OSError, ValueError):
        return None


# --- what the batch executors' modules share: partitions, memory, the node's command, the commands' environment

@dataclass
class Partition:
    name: str
    options: list[str] = field(default_factory=list)


def partitions() -> dict[str, Partition]:
    """``HUB_SLURM_PARTITIONS``: ``device=partition[:sbatch options]`` items separated by commas."""
    found = {}
    for item in settings.HUB_SLURM_PARTITIONS.split(","):
        device, _, rest = item.strip().partition("=")
        name, _, options = rest.partition(":")
        if device and name:
            found[device.strip()] = Partition(name.strip(), shlex.split(options))
    return found


def partition_for(device: str) -> Partition:
    found = partitions().get(device)
    if found is None:
        raise CodedError("slurm_rejected", f"This hub maps no Slurm partition to device {device!r} "
                                           f"(HUB_SLURM_PARTITIONS maps {', '.join(partitions()) or 'nothing'}).")
    return found


def slurm_env() -> dict[str, str]:
    """The environment of Slurm's commands: enough to find them and the cluster, none of the hub's secrets."""
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    if settings.SLURM_CONF:
        env["SLURM_CONF"] = settings.SLURM_CONF
    return env


def memory_mb(text: str) -> int:
    """Slurm's ``--mem`` value (``4G``, ``512M``, ``4096``: megabytes without a unit) in MB."""
    text = text.strip().upper()
    factor = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}.get(text[-1:], None)
    return int(float(text[:-1]) * factor) if factor is not None else int(float(text))


def task_memory(plan: Plan) -> str:
    """``--mem`` for each task: ``HUB_SLURM_MEM``, or what the plan needs when that is more (a model whose
    weights take more)."""
    if plan.memory_mb and plan.memory_mb > memory_mb(settings.HUB_SLURM_MEM):
        return f"{plan.memory_mb}M"
    return settings.HUB_SLURM_MEM


def runner_command(folder: Path) -> tuple[str, list[str]]:
    """The node's program (the compute library's runner, from the hub's own client package) and its PYTHONPATH."""
    client = Path(hpcfair.__file__).resolve().parent.parent
    return str(client), [settings.HUB_SLURM_PYTHON, "-m", "hpcfair.slurm_runner", str(folder)]


def seconds(text: str) -> float:
    """Slurm's [DD-][HH:]MM:SS[.mmm] as seconds."""
    if not text:
        return 0.0
    days, _, rest = text.rpartition("-")
    total = 0.0
    for part in rest.split(":"):
        total = total * 60 + float(part)
    return total + (int(days) * 86400 if days else 0)

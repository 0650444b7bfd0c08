"""The Slurm executor: the hub's heavy jobs as Slurm batch jobs (docs/guides/slurm.md).

The login-node side talks to Slurm with its own commands, ``sbatch``, ``squeue``, ``sacct`` and ``scancel``
(not slurmrestd: no daemon, no JWT keys to run, and these commands are on every login node already). It
runs them with a clean environment (PATH, HOME, LANG, SLURM_CONF), so none of the hub's secrets reach a job.

- ``submit(job)`` (from ``hub.jobs.services.dispatch``): the job's kind stages a job folder on the shared
  filesystem (``job.json`` and the files it names), the hub writes ``job.sh`` and submits it as a job array
  (one task, or one per shard of a batch inference). A refusal fails the job with ``slurm_rejected``.
- ``poll()`` (every ``HUB_SLURM_POLL_S`` in each Celery worker, one at a time): squeue's states become the
  job's (``SLURM_STATES`` in ``hub.errors``), the tasks' new log lines its log; when every task completed,
  the kind's ``publish`` publishes the results with the accounting, and the job succeeds.
- ``cancel(job)``: scancel.

The compute nodes need no database or token: ``python -m hpcfair.slurm_runner FOLDER`` reads the folder
and writes its outputs, result and error files into it (``client/hpcfair/slurm_runner.py``).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import subprocess
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
from hub.jobs.kinds import JobKind, Plan
from hub.jobs.models import Job, log_line

log = logging.getLogger(__name__)

ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
          "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED")
MAX_LOG_LINES = 2000
LOST = "LOST"  # slurm["state"] of an attempt that was lost, until the next one is submitted
LOST_AFTER_S = 60  # a submitted job neither squeue nor sacct knows for this long was lost with its cluster
_POLL_LOCK = 0x48554253  # PostgreSQL advisory lock key: one poller at a time


@dataclass
class Task:
    """One array task as squeue (or sacct) reports it."""

    index: int
    raw_id: str
    state: str
    partition: str = ""
    nodes: str = ""
    reason: str = ""
    start: str = ""
    end: str = ""


@dataclass
class Partition:
    name: str
    options: list[str] = field(default_factory=list)


def runs_on_slurm(kind: str) -> bool:
    """Whether this hub submits jobs of ``kind`` to Slurm (HUB_EXECUTOR, HUB_SLURM_KINDS)."""
    return (settings.HUB_EXECUTOR == "slurm" and kind in settings.HUB_SLURM_KINDS and kind in kinds.KINDS
            and kinds.get(kind).runs_on_nodes())


def kind_of(kind: str) -> JobKind | None:
    """The kind (``hub.jobs.kinds``) when this hub runs it on Slurm, else None."""
    return kinds.get(kind) if runs_on_slurm(kind) else None


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


def command(args: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=slurm_env(), check=False)


# --- submission -------------------------------------------------------------------------------------------


def folder_of(job: Job, attempt: int) -> Path:
    return Path(settings.HUB_SLURM_JOB_DIR) / str(job.pk) / f"attempt-{attempt}"


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


def batch_script(job: Job, plan: Plan, partition: Partition, folder: Path, attempt: int) -> str:
    """The batch script the hub submits (docs/guides/slurm.md shows one)."""
    options = [f"--job-name=hpcfair-{job.kind}-{str(job.pk)[:8]}", f"--partition={partition.name}",
               f"--array=0-{plan.tasks - 1}", f"--cpus-per-task={plan.cpus}", f"--time={settings.HUB_SLURM_TIME}",
               f"--mem={task_memory(plan)}", f"--output={folder}/task-%a.log", f"--chdir={folder}",
               "--no-requeue"]  # a job lost with its node is submitted again by the hub, up to its attempt limit
    account = job.account or settings.HUB_SLURM_ACCOUNT  # the requester's project (hub.orgs.billing), or the site's
    if account:
        options.append(f"--account={account}")
    if job.qos or settings.HUB_SLURM_QOS:
        options.append(f"--qos={job.qos or settings.HUB_SLURM_QOS}")
    options += partition.options
    client = Path(hpcfair.__file__).resolve().parent.parent  # the hub's own client package: the same runner
    lines = ["#!/bin/bash", *(f"#SBATCH {option}" for option in options),
             f"# HPCFair Hub job {job.pk} ({job.get_kind_display()}), attempt {attempt}: {plan.summary}",
             f"export PYTHONPATH={shlex.quote(str(client))}",
             f"export OMP_NUM_THREADS={plan.cpus}",
             f"exec {shlex.quote(settings.HUB_SLURM_PYTHON)} -m hpcfair.slurm_runner {shlex.quote(str(folder))}"]
    return "\n".join(lines) + "\n"


def submit(job: Job) -> bool:
    """Submit the job to Slurm if this hub runs its kind there; False to send it to Celery instead. Failures
    end the job (``slurm_rejected`` with Slurm's own message); nothing is left in the job folder then."""
    kind = kind_of(job.kind)
    if kind is None:
        return False
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.is_final or (job.slurm and job.slurm["state"] != LOST):
            return True  # a duplicate message: this attempt was submitted already
        attempt = job.attempts + 1
        folder = folder_of(job, attempt)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        try:
            partition = partition_for(job.device)
            plan = kind.stage(job, folder)
            if plan is None:
                shutil.rmtree(folder.parent, ignore_errors=True)
                return False
            (folder / "job.json").write_text(json.dumps(plan.spec))
            script = folder / "job.sh"
            script.write_text(batch_script(job, plan, partition, folder, attempt))
            try:
                done = command(["sbatch", "--parsable", str(script)], timeout=120)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise CodedError("slurm_rejected", f"Slurm could not be asked to run the job: {exc}")
            if done.returncode != 0:
                message = done.stderr.strip().removeprefix("sbatch: error: ").splitlines()
                raise CodedError("slurm_rejected", f"Slurm refused the job: {'; '.join(message) or 'no reason given'} "
                                                   f"(partition {partition.name}).")
        except CodedError as exc:
            shutil.rmtree(folder.parent, ignore_errors=True)
            job.mark_failed(exc.code, exc.detail)
            job.save()
            return True
        except Exception:  # noqa: BLE001 - never a job left queued for ever; its trace goes to the log
            log.exception("slurm: preparing job %s failed", job.pk)
            shutil.rmtree(folder.parent, ignore_errors=True)
            job.mark_failed("internal_error", f"The job could not be prepared for Slurm; the administrators can "
                                              f"trace it by job id {job.pk}.")
            job.save()
            return True
        slurm_id = done.stdout.strip().split(";")[0]
        job.slurm = {"id": slurm_id, "partition": partition.name, "tasks": plan.tasks, "folder": str(folder),
                     "state": "PENDING", "attempt": attempt, "submitted": timezone.now().isoformat(),
                     "offsets": {}, "raw_ids": {}}
        job.attempts = attempt
        job.worker = f"slurm:{slurm_id}"
        job.dispatched = timezone.now()
        job.append_log("info", f"submitted to Slurm as job {slurm_id} (partition {partition.name}, "
                               f"{plan.tasks} task{'s' if plan.tasks != 1 else ''}): {plan.summary}")
        job.save()
    return True


def cancel(job: Job) -> None:
    """Ask Slurm to stop the job's tasks (the caller marks the job)."""
    if job.slurm:
        try:
            done = command(["scancel", job.slurm["id"]])
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("scancel %s: %s", job.slurm["id"], exc)
            return
        if done.returncode != 0:
            log.warning("scancel %s: %s", job.slurm["id"], done.stderr.strip())


def remove_folder(job: Job) -> None:
    if job.slurm:
        shutil.rmtree(Path(job.slurm["folder"]).parent, ignore_errors=True)


# --- polling ----------------------------------------------------------------------------------------------


def squeue(ids: list[str]) -> dict[str, list[Task]] | None:
    """Slurm job id -> its array tasks as squeue knows them (ended jobs stay there for ``MinJobAge``); None
    when squeue cannot answer (slurmctld away: running jobs carry on meanwhile, nothing is concluded)."""
    if not ids:
        return {}
    try:
        done = command(["squeue", "--array", "-h", "-t", "all", "-j", ",".join(ids), "-o",
                        "%F|%K|%A|%T|%P|%N|%r|%S|%e"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("squeue: %s", exc)
        return None
    if done.returncode != 0 and "Invalid job id" not in done.stderr:  # all of them unknown: an answer
        log.warning("squeue: %s", done.stderr.strip())
        return None
    found: dict[str, list[Task]] = {}
    for line in done.stdout.splitlines():
        parts = line.split("|")
        if len(parts) != 9 or not parts[1].isdigit():
            continue
        array_id, index, raw, state, partition, nodes, reason, start, end = parts
        found.setdefault(array_id, []).append(Task(int(index), raw, state.split()[0], partition, nodes, reason,
                                                   start, end))
    return found


def sacct(raw_ids: list[str]) -> dict[str, dict[str, str]]:
    """Raw job id -> its accounting: sacct with slurmdbd, else the job completion log (``sacct -c``)."""
    if not raw_ids:
        return {}
    fields = "JobIDRaw,State,Partition,NodeList,Start,End,ElapsedRaw,TotalCPU,MaxRSS"
    try:
        done = command(["sacct", "-P", "-n", "-j", ",".join(raw_ids), "-o", fields])
        if done.returncode != 0 or "disabled" in done.stderr:
            fields = "JobID,State,Partition,NodeList,Start,End,Elapsed"
            done = command(["sacct", "-c", "-P", "-n", "-j", ",".join(raw_ids), "-o", fields])
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("sacct: %s", exc)
        return {}
    names = fields.split(",")
    found: dict[str, dict[str, str]] = {}
    for line in done.stdout.splitlines():
        row = dict(zip(names, line.split("|"), strict=False))
        key = row.get("JobIDRaw") or row.get("JobID") or ""
        if key in raw_ids and key not in found:  # the job's own line, not its steps'
            found[key] = row
    return found


def poll() -> int:
    """Update every job that runs on Slurm from squeue; returns how many changed state. One poller at a time
    (PostgreSQL advisory lock): finishing a job publishes its outputs once."""
    if connection.vendor != "postgresql":
        return _poll()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [_POLL_LOCK])
        if not cursor.fetchone()[0]:
            return 0
        try:
            return _poll()
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_POLL_LOCK])


def _poll() -> int:
    jobs = list(Job.objects.filter(slurm__isnull=False, state__in=[Job.State.QUEUED, Job.State.RUNNING])
                .exclude(slurm__state=LOST))
    if not jobs:
        return 0
    queued = squeue([job.slurm["id"] for job in jobs])
    if queued is None:
        return 0
    changed = 0
    for job in jobs:
        tasks = queued.get(job.slurm["id"])
        if tasks is None:
            tasks = _from_sacct(job)
        try:
            changed += _update(job, tasks)
        except Exception:  # noqa: BLE001 - one job's trouble must not stop the others' updates
            log.exception("slurm poller: job %s", job.pk)
    return changed


def _from_sacct(job: Job) -> list[Task] | None:
    """The tasks of a job squeue forgot, from sacct; None when nobody knows it."""
    raw = job.slurm.get("raw_ids") or {}
    rows = sacct(list(raw.values())) if raw else {}
    if not rows or len(rows) < job.slurm["tasks"]:
        return None
    return [Task(int(index), raw_id, rows[raw_id]["State"].split()[0], rows[raw_id]["Partition"],
                 rows[raw_id]["NodeList"], "", rows[raw_id]["Start"], rows[raw_id]["End"])
            for index, raw_id in raw.items()]


def _read_logs(job: Job, folder: Path) -> list[dict[str, str]]:
    """New lines of the tasks' log files since the last poll."""
    offsets = job.slurm.setdefault("offsets", {})
    lines = []
    for index in range(job.slurm["tasks"]):
        path = folder / f"task-{index}.log"
        try:
            with open(path, "rb") as handle:
                handle.seek(offsets.get(str(index), 0))
                data = handle.read(1 << 20)
        except FileNotFoundError:
            continue
        complete = data[:data.rfind(b"\n") + 1]  # a line still being written waits for the next poll
        offsets[str(index)] = offsets.get(str(index), 0) + len(complete)
        prefix = f"[task {index}] " if job.slurm["tasks"] > 1 else ""
        for line in complete.decode(errors="replace").splitlines():
            if line.strip():
                level = "error" if "error" in line.lower() else "info"
                lines.append(log_line(level, prefix + line.strip()))
    return lines


def _update(job: Job, tasks: list[Task] | None) -> int:
    folder = Path(job.slurm["folder"])
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.is_final or not job.slurm or job.slurm["state"] == LOST:
            return 0
        job.log = (job.log + _read_logs(job, folder))[-MAX_LOG_LINES:]
        if tasks is None:
            submitted = datetime.fromisoformat(job.slurm["submitted"])
            if (timezone.now() - submitted).total_seconds() < LOST_AFTER_S:
                job.save(update_fields=["log", "slurm"])
                return 0
            return _lost(job, "neither squeue nor sacct knows it any more")
        for task in tasks:
            job.slurm.setdefault("raw_ids", {})[str(task.index)] = task.raw_id
        states = {task.state for task in tasks}
        nodes = sorted({task.nodes for task in tasks if task.nodes})
        job.slurm.update(state=_summary(tasks), nodes=",".join(nodes),
                         partition=next((t.partition for t in tasks if t.partition), job.slurm["partition"]))
        ended = [task for task in tasks if task.state not in ACTIVE]
        lost = [task for task in ended if task.state in SLURM_LOST_STATES]
        failed = [task for task in ended if task.state != "COMPLETED" and task not in lost]
        if lost:
            return _lost(job, f"Slurm reports {lost[0].state} for task {lost[0].index} on {lost[0].nodes or '?'}")
        if failed:
            _fail(job, failed[0], folder)
            return 1
        if len(ended) == job.slurm["tasks"] and states == {"COMPLETED"}:
            _finish(job, tasks, folder)
            return 1
        before = job.state
        if states & {"RUNNING", "COMPLETING", "COMPLETED"}:
            job.state = Job.State.RUNNING
            job.started = job.started or timezone.now()
            job.heartbeat = timezone.now()
            done = sum(task.state == "COMPLETED" for task in tasks)
            job.progress = max(job.progress, 0.05 + 0.85 * done / job.slurm["tasks"])
        job.save()
        return int(job.state != before)


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


def _fail(job: Job, task: Task, folder: Path) -> None:
    """A task ended badly: the runner's own error, else what Slurm's state (and slurmstepd's words) say."""
    cancel(job)  # the other tasks of the array are of no use now
    error = _error_file(folder, task.index) if task.state == "FAILED" else None
    if error is not None:
        code, detail = error["code"], error["detail"]
    else:
        state = task.state
        log_text = (folder / f"task-{task.index}.log").read_text(errors="replace") if (
            folder / f"task-{task.index}.log").exists() else ""
        if "Exceeded job memory limit" in log_text or "oom-kill" in log_text:
            state = "OUT_OF_MEMORY"  # without cgroups Slurm reports FAILED; slurmstepd says why in the log
        code, template = SLURM_STATES.get(state, SLURM_STATES["FAILED"])
        detail = template.format(id=job.slurm["id"], node=task.nodes or "?", time=settings.HUB_SLURM_TIME,
                                 mem=settings.HUB_SLURM_MEM, state=task.state, partition=task.partition)
    job.slurm["state"] = task.state
    job.mark_failed(code, detail)
    job.save()
    remove_folder(job)


def _lost(job: Job, why: str) -> int:
    """The job was lost with its node (or preempted): submitted again (by this poller, on the login node) up to
    the attempt limit."""
    cancel(job)
    remove_folder(job)
    job.append_log("warning", f"Slurm job {job.slurm['id']} was lost: {why} (attempt {job.attempts})")
    if job.attempts >= settings.HUB_JOB_MAX_ATTEMPTS:
        job.mark_worker_lost()
    else:
        job.state = Job.State.QUEUED
        job.slurm["state"] = LOST
        job.append_log("info", "submitting it again")
        transaction.on_commit(lambda: submit(job))
    job.save()
    return 1


def execution(job: Job, tasks: list[Task], folder: Path) -> dict[str, Any]:
    """Where and how long the job ran: Slurm's accounting (sacct), and the runner's own CPU time and peak
    memory where sacct has none (no slurmdbd)."""
    rows = sacct([task.raw_id for task in tasks])
    results = []
    for task in sorted(tasks, key=lambda t: t.index):
        try:
            results.append(json.loads((folder / "out" / f"result-{task.index}.json").read_text()))
        except (OSError, ValueError):
            results.append({})
    starts = [_when(t.start) for t in tasks if _when(t.start)]
    ends = [_when(t.end) for t in tasks if _when(t.end)]
    elapsed = [float(row["ElapsedRaw"]) if row.get("ElapsedRaw", "").isdigit() else _seconds(row.get("Elapsed", ""))
               for row in rows.values()]
    cpu = [_seconds(row["TotalCPU"]) for row in rows.values() if row.get("TotalCPU")]
    rss = [_bytes(row["MaxRSS"]) for row in rows.values() if row.get("MaxRSS")]
    return {
        "executor": "slurm", "slurm_job": job.slurm["id"], "partition": job.slurm["partition"],
        "account": job.account or settings.HUB_SLURM_ACCOUNT,
        "nodes": job.slurm.get("nodes", ""), "tasks": len(tasks),
        "started": min(starts) if starts else None, "ended": max(ends) if ends else None,
        "elapsed_s": max(elapsed) if elapsed else None,
        "cpu_s": round(sum(cpu), 3) if cpu else round(sum(r.get("cpu_s", 0) for r in results), 3),
        "max_rss_bytes": max(rss) if rss else max((r.get("max_rss_bytes", 0) for r in results), default=0),
        "accounting": "sacct" if cpu else "sacct -c (job completion log) and the runner's getrusage",
    }


def _when(text: str) -> str:
    """Slurm's local time (2026-11-23T17:51:50) as ISO 8601 with its offset; empty when unknown."""
    try:
        return datetime.fromisoformat(text).astimezone().isoformat()
    except ValueError:
        return ""


def _seconds(text: str) -> float:
    """Slurm's [DD-][HH:]MM:SS[.mmm] as seconds."""
    if not text:
        return 0.0
    days, _, rest = text.rpartition("-")
    total = 0.0
    for part in rest.split(":"):
        total = total * 60 + float(part)
    return total + (int(days) * 86400 if days else 0)


def _bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    return int(float(text[:-1]) * units[text[-1]]) if text and text[-1] in units else int(text or 0)


def _finish(job: Job, tasks: list[Task], folder: Path) -> None:
    kind = kind_of(job.kind)
    info = execution(job, tasks, folder)
    try:
        if kind is None:
            raise CodedError("slurm_rejected", "This hub no longer runs this kind of job on Slurm.")
        result = kind.publish(job, folder, info)
    except CodedError as exc:
        job.mark_failed(exc.code, exc.detail)
    except Exception:  # noqa: BLE001 - recorded without its text, like the runner's internal errors
        log.exception("slurm job %s: publishing its results failed", job.pk)
        job.mark_failed("internal_error", f"The job's results could not be published; the administrators can "
                                          f"trace it by job id {job.pk}.")
    else:
        job.state = Job.State.SUCCEEDED
        job.finished = timezone.now()
        job.progress = 1.0
        job.result = {**result, "execution": info}
        job.append_log("info", f"Slurm job {info['slurm_job']} completed on {info['nodes']} "
                               f"({info['partition']}): {info['elapsed_s']} s, CPU {info['cpu_s']} s, "
                               f"peak memory {info['max_rss_bytes'] / 2**20:.0f} MiB")
        shutil.rmtree(folder.parent, ignore_errors=True)
    job.slurm["state"] = "COMPLETED"
    job.save()

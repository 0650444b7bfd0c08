"""The Slurm executor: the hub's heavy jobs as Slurm batch jobs (docs/guides/slurm.md), a ``BatchExecutor``.

It talks to Slurm with its own commands, ``sbatch``, ``squeue``, ``sacct`` and ``scancel`` (not slurmrestd: no
daemon, no JWT keys to run, and these commands are on every login node already), run with a clean environment
(PATH, HOME, LANG, SLURM_CONF), so none of the hub's secrets reach a job. A job is one job array: one task, or
one per shard of a batch inference.
"""

from __future__ import annotations

import logging
import shlex
import subprocess
from pathlib import Path
from typing import Any

from django.conf import settings
from hpcfair.compute import CodedError

from hub.jobs.executors.batch import (
    BatchExecutor,
    Partition,
    Task,
    partition_for,
    partitions,
    runner_command,
    seconds,
    slurm_env,
    task_memory,
)
from hub.jobs.kinds import Plan
from hub.jobs.models import Job

log = logging.getLogger(__name__)


def command(args: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=slurm_env(), check=False)


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
    path, argv = runner_command(folder)
    lines = ["#!/bin/bash", *(f"#SBATCH {option}" for option in options),
             f"# HPCFair Hub job {job.pk} ({job.get_kind_display()}), attempt {attempt}: {plan.summary}",
             f"export PYTHONPATH={shlex.quote(path)}", f"export OMP_NUM_THREADS={plan.cpus}",
             f"exec {shlex.join(argv)}"]
    return "\n".join(lines) + "\n"


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


def _from_sacct(job: Job) -> list[Task] | None:
    """The tasks of a job squeue forgot, from sacct; None when nobody knows it."""
    raw = job.execution.get("raw_ids") or {}
    rows = sacct(list(raw.values())) if raw else {}
    if not rows or len(rows) < job.execution["tasks"]:
        return None
    return [Task(int(index), raw_id, rows[raw_id]["State"].split()[0], rows[raw_id]["Partition"],
                 rows[raw_id]["NodeList"], "", rows[raw_id]["Start"], rows[raw_id]["End"])
            for index, raw_id in raw.items()]


def _bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    return int(float(text[:-1]) * units[text[-1]]) if text and text[-1] in units else int(text or 0)


class Slurm(BatchExecutor):
    name = "slurm"
    label = "Slurm"
    forgotten = "neither squeue nor sacct knows it any more"

    def place(self, device: str) -> str | None:
        found = partitions().get(device)
        return found.name if found else None

    def start(self, job: Job, plan: Plan, folder: Path, attempt: int) -> dict[str, Any]:
        partition = partition_for(job.device)
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
        return {"id": done.stdout.strip().split(";")[0], "partition": partition.name, "raw_ids": {}}

    def states(self, jobs: list[Job]) -> dict[Any, list[Task] | None] | None:
        queued = squeue([job.execution["id"] for job in jobs])
        if queued is None:
            return None
        return {job.pk: queued.get(job.execution["id"]) or _from_sacct(job) for job in jobs}

    def stop(self, job: Job) -> None:
        if not job.execution:
            return
        try:
            done = command(["scancel", job.execution["id"]])
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("scancel %s: %s", job.execution["id"], exc)
            return
        if done.returncode != 0:
            log.warning("scancel %s: %s", job.execution["id"], done.stderr.strip())

    def accounting(self, job: Job, tasks: list[Task]) -> dict[str, Any]:
        """sacct's figures (with slurmdbd; else the job completion log's elapsed time only)."""
        rows = sacct([task.raw_id for task in tasks])
        elapsed = [float(row["ElapsedRaw"]) if row.get("ElapsedRaw", "").isdigit() else seconds(row.get("Elapsed", ""))
                   for row in rows.values()]
        cpu = [seconds(row["TotalCPU"]) for row in rows.values() if row.get("TotalCPU")]
        rss = [_bytes(row["MaxRSS"]) for row in rows.values() if row.get("MaxRSS")]
        found: dict[str, Any] = {"slurm_job": job.execution["id"], "elapsed_s": max(elapsed) if elapsed else None,
                                 "accounting": "sacct -c (job completion log) and the runner's getrusage"}
        if cpu:
            found.update(cpu_s=round(sum(cpu), 3), accounting="sacct")
        if rss:
            found["max_rss_bytes"] = max(rss)
        return found


EXECUTOR = Slurm()

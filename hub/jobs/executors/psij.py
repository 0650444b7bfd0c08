"""The PSI/J executor: batch jobs through ExaWorks' portable job interface (``psij-python``), whose executors speak
Slurm, PBS, LSF and Flux; ``HUB_PSIJ_EXECUTOR`` names which one (``slurm``). A ``BatchExecutor``: each task of a
plan is one PSI/J job running the compute library's node runner, ``HPCFAIR_TASK`` telling it which shard is its.

Queues and options come from ``HUB_SLURM_PARTITIONS`` (``--key=value`` options become PSI/J's ``slurm.key``
custom attributes), limits from ``HUB_SLURM_TIME`` and ``HUB_SLURM_MEM``. PSI/J follows the jobs with its own
status thread and exit-code files under ``HUB_SLURM_JOB_DIR/psij`` (shared, like the job folders).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import psij
from django.conf import settings
from hpcfair.compute import CodedError
from psij.executors.batch.batch_scheduler_executor import BatchSchedulerExecutorConfig

from hub.jobs.executors.batch import (
    BatchExecutor,
    Task,
    memory_mb,
    partition_for,
    partitions,
    runner_command,
    seconds,
    slurm_env,
    task_memory,
)
from hub.jobs.kinds import Plan
from hub.jobs.models import Job

STATES = {"NEW": "PENDING", "QUEUED": "PENDING", "ACTIVE": "RUNNING", "COMPLETED": "COMPLETED",
          "FAILED": "FAILED", "CANCELED": "CANCELLED"}  # PSI/J's states in Slurm's words (hub.errors.SLURM_STATES)


class PsiJ(BatchExecutor):
    name = "psij"
    label = "PSI/J"

    def __init__(self) -> None:
        self._executor: psij.JobExecutor | None = None
        self._attached: dict[str, psij.Job] = {}  # native id -> the PSI/J job this process follows

    def executor(self) -> psij.JobExecutor:
        if self._executor is None:
            config = BatchSchedulerExecutorConfig(
                work_directory=Path(settings.HUB_SLURM_JOB_DIR) / "psij", initial_queue_polling_delay=0,
                queue_polling_interval=max(1, round(settings.HUB_SLURM_POLL_S)))
            self._executor = psij.JobExecutor.get_instance(settings.HUB_PSIJ_EXECUTOR, config=config)
        return self._executor

    def place(self, device: str) -> str | None:
        found = partitions().get(device)
        return found.name if found else None

    def start(self, job: Job, plan: Plan, folder: Path, attempt: int) -> dict[str, Any]:
        partition = partition_for(job.device)
        path, argv = runner_command(folder)
        time = settings.HUB_SLURM_TIME
        custom = {f"slurm.{key.removeprefix('--')}": value
                  for key, _, value in (option.partition("=") for option in partition.options)}
        if job.qos or settings.HUB_SLURM_QOS:
            custom["slurm.qos"] = job.qos or settings.HUB_SLURM_QOS
        ids = []
        for index in range(plan.tasks):
            spec = psij.JobSpec(
                executable=argv[0], arguments=argv[1:], directory=folder, inherit_environment=False,
                name=f"hpcfair-{job.kind}-{str(job.pk)[:8]}", stdout_path=folder / f"task-{index}.log",
                stderr_path=folder / f"task-{index}.err",  # the runner prints its log lines
                environment={**slurm_env(), "PYTHONPATH": path, "OMP_NUM_THREADS": str(plan.cpus),
                             "HPCFAIR_TASK": str(index), "HPCFAIR_TASKS": str(plan.tasks)},
                resources=psij.ResourceSpecV1(process_count=1, cpu_cores_per_process=plan.cpus,
                                              memory=memory_mb(task_memory(plan)) << 20),
                attributes=psij.JobAttributes(
                    queue_name=partition.name, account=job.account or settings.HUB_SLURM_ACCOUNT or None,
                    duration=timedelta(seconds=seconds(time) if ":" in time else float(time) * 60),
                    custom_attributes=custom))
            task = psij.Job(spec)
            try:
                self.executor().submit(task)
            except psij.SubmitException as exc:
                self._stop_ids(ids)
                raise CodedError("slurm_rejected", f"PSI/J could not submit the job: {str(exc).strip() or 'no reason'}"
                                                   f" (queue {partition.name}).")
            self._attached[task.native_id] = task
            ids.append(task.native_id)
        return {"id": ids[0], "ids": ids, "partition": partition.name}

    def _job(self, native_id: str) -> psij.Job:
        if native_id not in self._attached:
            found = psij.Job()
            self.executor().attach(found, native_id)
            self._attached[native_id] = found
        return self._attached[native_id]

    def states(self, jobs: list[Job]) -> dict[Any, list[Task] | None] | None:
        wanted = {native for job in jobs for native in job.execution["ids"]}
        for gone in set(self._attached) - wanted:
            del self._attached[gone]
        return {job.pk: [Task(index, native, STATES[self._job(native).status.state.name], job.execution["partition"])
                         for index, native in enumerate(job.execution["ids"])] for job in jobs}

    def _stop_ids(self, ids: list[str]) -> None:
        for native in ids:
            try:
                self.executor().cancel(self._job(native))
            except psij.SubmitException:
                pass  # ended already

    def stop(self, job: Job) -> None:
        if job.execution:
            self._stop_ids(job.execution["ids"])


EXECUTOR = PsiJ()

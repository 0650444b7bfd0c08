"""Hardware benchmarks: a worker measures a model's latency (median and p95 over repeated runs, per batch
size) on its own hardware, and records it with that hardware (CPU model, cores, memory, GPU model)."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
from hpcfair.compute import CodedError
from hpcfair.convert.signature import OTHER_DYNAMIC, TensorSpec, generate_inputs

from hub.gateway.engine import run_steps
from hub.gateway.jobs.infer import session_for, step_versions
from hub.gateway.models import Benchmark
from hub.jobs.kinds import DEVICE, JobKind, register
from hub.jobs.runner import JobContext
from hub.registry.signals import artifact_changed

ORT_TYPES = {"tensor(float)": "float32", "tensor(double)": "float64", "tensor(float16)": "float16",
             "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8", "tensor(uint8)": "uint8",
             "tensor(bool)": "bool"}


def _first(path: str, prefix: str) -> str:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def hardware(device: str) -> dict[str, Any]:
    """What this worker runs on, in the terms of the HPC Ontology's hardware classes."""
    memory_kb = _first("/proc/meminfo", "MemTotal").split(" ")[0]
    info: dict[str, Any] = {"kind": device, "cpu_model": _first("/proc/cpuinfo", "model name") or platform.processor(),
                            "cores": os.cpu_count() or 1, "host": platform.node()}
    if memory_kb.isdigit():
        info["memory_gb"] = round(int(memory_kb) / 1024**2, 1)
    if device == "gpu":
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=10, check=True).stdout.strip().splitlines()
            info["gpu_model"] = out[0] if out else ""
        except (OSError, subprocess.SubprocessError):
            info["gpu_model"] = "unknown GPU"
    return {key: value for key, value in info.items() if value not in ("", None)}


def feeds_for(session: dict[str, Any], batch: int) -> dict[str, np.ndarray] | None:
    """Random inputs with ``batch`` rows for the model ``session`` describes (``hub.gateway.engine.describe``);
    None when the model's batch axis is fixed to another size."""
    specs = []
    for name, shape, kind in session["inputs"]:
        if shape and isinstance(shape[0], int) and shape[0] > 0 and shape[0] != batch:
            return None
        shape = [batch if axis == 0 else (d if isinstance(d, int) and d > 0 else OTHER_DYNAMIC[0])
                 for axis, d in enumerate(shape)]
        specs.append(TensorSpec(name, shape, ORT_TYPES.get(kind, "float32")))
    return generate_inputs(specs)


@register
class BenchmarkJob(JobKind):
    """Measure a model's latency per batch size on this worker's hardware (in its engine) and record it."""

    name = "benchmark"
    label = "hardware benchmark"
    queue = DEVICE

    def run(self, ctx: JobContext) -> dict[str, Any]:
        params = ctx.job.params
        step = params["steps"][0]
        (version,) = step_versions([step])
        session = session_for(ctx, step)
        machine = hardware(ctx.job.device)
        ctx.log(f"benchmarking {version} ({step['path']}) on {machine.get('gpu_model') or machine.get('cpu_model')}")
        results = []
        sizes = params["batch_sizes"]
        for index, batch in enumerate(sizes):
            feeds = feeds_for(session, batch)
            if feeds is None:
                ctx.log(f"batch size {batch}: skipped (the model's batch axis is fixed)", "warning")
                continue
            deadline = time.time() + params.get("max_seconds", 120)
            try:  # timed run by run inside the engine, so that passing the inputs is not counted
                _, info = run_steps([step], feeds, device=ctx.job.device, threads=0, deadline=deadline,
                                    repeat=params["warmup"] + params["runs"])
            except CodedError as exc:
                raise CodedError(exc.code, f"batch size {batch}: {exc.detail}")
            times = sorted(info.get("times_ms", [info["run_ms"]])[params["warmup"]:])
            row = Benchmark.objects.create(
                version=version, job=ctx.job, hardware=machine, provider=session["provider"], batch_size=batch,
                runs=len(times), median_ms=round(statistics.median(times), 4),
                p95_ms=round(times[min(len(times) - 1, int(0.95 * len(times)))], 4))
            results.append(row.as_metadata())
            ctx.log(f"batch size {batch}: median {row.median_ms:.3f} ms, p95 {row.p95_ms:.3f} ms over {row.runs} runs")
            ctx.progress((index + 1) / len(sizes))
        if not results:
            raise CodedError("invalid_inputs", "No batch size could be run; the model's batch axis is fixed to another "
                                               "size.")
        artifact_changed.send(sender=type(version.artifact), artifact=version.artifact)
        return {"version": str(version), "pid": version.pid, "hardware": machine, "results": results}

"""The program a hub's Slurm batch job runs on a compute node: ``python -m hpcfair.slurm_runner FOLDER``.

The node needs no database, no hub token and no network: the hub (on the login node) wrote ``FOLDER/job.json``
and the files it names into a job folder on the shared filesystem; this runner does the compute part and
writes its answers beside them, and the hub's poller reads them back:

- ``task-<i>.log``        its log lines (Slurm's output file; the poller copies new lines to the job's log);
- ``out/part-<i>.npz``    the outputs of task ``i`` of an array (its shard of the rows);
- ``out/result-<i>.json`` what task ``i`` did: rows, seconds, CPU seconds, peak memory, node;
- ``out/error-<i>.json``  ``{code, detail}`` when it failed for a reason the scientist can act on.

Each file is written under a temporary name and renamed, so the poller never reads half a file.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair.compute import CodedError


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def write_json(path: Path, value: Any) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(value))
    temporary.replace(path)


def shard(total: int, task: int, tasks: int) -> tuple[int, int]:
    """Rows ``[start, end)`` of task ``task`` of ``tasks``: contiguous, sizes differing by at most one."""
    return total * task // tasks, total * (task + 1) // tasks


def usage() -> dict[str, Any]:
    """This process's and its children's CPU seconds and peak resident memory (Linux reports KiB)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu_s": round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, 3),
            "max_rss_bytes": max(own.ru_maxrss, children.ru_maxrss) * 1024, "node": platform.node()}


# --- inference -------------------------------------------------------------------------------------


def infer(folder: Path, spec: dict[str, Any], task: int, tasks: int) -> dict[str, Any]:
    """Run the chain of models over this task's shard of the input rows, in batches: the compute library's
    runs (``hpcfair.compute.runs``), as the hub's engines run them."""
    from hpcfair.batches import BUDGET_BYTES
    from hpcfair.compute.runs import batch_rows, open_session, row_count, run_chain, run_rows
    from hpcfair.convert import ConversionError
    from hpcfair.convert.signature import load_sample_inputs, specs_from_metadata

    threads = int(spec.get("threads") or 0)
    where = f"Node {platform.node()}"
    sessions = [open_session(folder / step["model"], spec["device"], threads, where=where) for step in spec["steps"]]
    input_specs = specs_from_metadata(spec["input_specs"]) if spec.get("input_specs") else None
    try:
        arrays = load_sample_inputs(folder / spec["inputs"], input_specs, int(spec["inflate_limit"]))
    except ConversionError as exc:
        raise CodedError("invalid_inputs", exc.detail)
    total = row_count(arrays)
    start, end = shard(total, task, tasks)
    say(f"task {task + 1} of {tasks}: rows {start}-{end} of {total} on {platform.node()}")
    batch = batch_rows([i.shape for i in sessions[0].get_inputs()], arrays, int(spec.get("batch_size") or 0),
                       int(spec.get("batch_budget") or BUDGET_BYTES))
    outputs = spec.get("outputs") or None

    def run(first: int, stop: int) -> dict[str, np.ndarray]:
        feeds = {name: array[first:stop] for name, array in arrays.items()}
        return run_chain(sessions, spec["steps"], feeds, deadline=float("inf"), outputs=outputs, watch=False)

    merged = run_rows(run, start, end, batch, on_batch=lambda first, stop: say(f"ran rows {first}-{stop}"))
    if merged:  # an empty shard (more tasks than rows) writes no outputs
        part = folder / "out" / f"part-{task}.npz"
        with open(part.with_suffix(".tmp"), "wb") as handle:
            np.savez(handle, **merged)
        part.with_suffix(".tmp").replace(part)
    return {"rows": [start, end], "provider": sessions[-1].hub_provider}


# --- MLCube -----------------------------------------------------------------------------------------


def cube(folder: Path, spec: dict[str, Any], task: int, tasks: int) -> dict[str, Any]:
    """Build a project's MLCube image with the node's container engine and run its tasks in order."""
    from hpcfair.cube import CubeError, EngineError, build, find_engine, parse_dir
    from hpcfair.cube.engine import prepare_context, run_task

    if spec.get("containers_conf"):
        os.environ.setdefault("CONTAINERS_CONF", spec["containers_conf"])  # the hub's podman settings
    engine = find_engine(spec.get("engine") or "")
    if engine is None:
        raise CodedError("no_container_engine", f"Node {platform.node()} has neither podman nor docker.")
    project = folder / "project"
    try:
        cube_spec = parse_dir(project)
        context = prepare_context(project / cube_spec.build_context, folder / "context", Path(spec["wheels"]),
                                  on_line=say)
        say(f"building {spec['image']} with {engine} (--network=none)")
        built = build(engine, context, context / cube_spec.build_file, spec["image"], network="none",
                      timeout=float(spec["build_timeout"]), on_line=say)
        runs = []
        for name in spec.get("tasks") or []:
            ran = run_task(engine, spec["image"], cube_spec, name, project / "workspace", network="none",
                           timeout=float(spec["run_timeout"]), on_line=say)
            runs.append({"task": name, "seconds": round(ran.seconds, 3), "exit": ran.code})
    except CubeError as exc:
        raise CodedError("invalid_mlcube", str(exc))
    except EngineError as exc:
        raise CodedError(exc.code, str(exc))
    return {**built.record(), "engine": engine, "built": True, "runs": runs}


def sandboxed(folder: Path, spec: dict[str, Any], task: int, tasks: int) -> dict[str, Any]:
    """A request to the conversion sandbox's child (an optimisation, a fine-tune), in ``FOLDER/work``, under
    the hub's limits."""
    from hpcfair.compute.sandboxed import run_request
    from hpcfair.convert import Limits

    return {"report": run_request(spec["request"], folder / "work", Limits(**spec["limits"]),
                                  [Path(path) for path in spec.get("hide") or []], say)}


def convert(folder: Path, spec: dict[str, Any], task: int, tasks: int) -> dict[str, Any]:
    """Convert (or verify) each file of the plan in the conversion sandbox, under the hub's limits."""
    from hpcfair.compute.sandboxed import convert_plan
    from hpcfair.convert import Limits

    def on_line(path: str, index: int):
        say(f"{path}: in a sandbox")
        return lambda line: say(f"{path}: {line}")

    return {"reports": convert_plan(folder / "work", spec["plan"], Limits(**spec["limits"]),
                                    [Path(path) for path in spec.get("hide") or []], on_line)}


# What a node computes, by the plan's ``compute`` (``hub.jobs.kinds.Plan``): functions of the compute library.
def serve(folder: Path, spec: dict[str, Any], task: int, tasks: int) -> dict[str, Any]:
    """Serve one model over an OpenAI-compatible API until it is idle or stopped (``hpcfair.serve``)."""
    from hpcfair.serve import serve as run

    return run(folder, spec, say)


COMPUTE = {"infer": infer, "cube": cube, "sandbox": sandboxed, "convert": convert, "serve": serve}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]).resolve()
    spec = json.loads((folder / "job.json").read_text())
    # a Slurm array's task, or the one a scheduler without arrays names
    task = int(os.environ.get("HPCFAIR_TASK") or os.environ.get("SLURM_ARRAY_TASK_ID") or 0)
    tasks = int(os.environ.get("HPCFAIR_TASKS") or os.environ.get("SLURM_ARRAY_TASK_COUNT") or 1)
    (folder / "out").mkdir(exist_ok=True)
    started = time.time()
    try:
        done = COMPUTE[spec["compute"]](folder, spec, task, tasks)
    except CodedError as exc:
        say(f"error: {exc.detail}")
        write_json(folder / "out" / f"error-{task}.json", {"code": exc.code, "detail": exc.detail})
        return 1
    done.update(usage(), task=task, seconds=round(time.time() - started, 3))
    write_json(folder / "out" / f"result-{task}.json", done)
    say(f"done in {done['seconds']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

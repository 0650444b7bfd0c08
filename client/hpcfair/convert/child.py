"""Entry point inside the sandbox: ``python -m hpcfair.convert.child request.json``.

Reads the request, does the work, writes ``result.json`` ({"ok": true, ...} or {"ok": false, "code",
"detail"}). Progress lines for the job log go to stdout prefixed ``hpcfair: ``; library noise and
tracebacks go to stderr (``child.log``), never into the job's messages.
"""

from __future__ import annotations

import json
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from hpcfair.compute.errors import CodedError
from hpcfair.convert.errors import HOST_PATH, ConversionError, log_cause
from hpcfair.convert.sandbox import LOG_PREFIX, stage_line


def say(message: str) -> None:
    print(LOG_PREFIX + message, flush=True)


MEMORY_TEXT = re.compile(r"(can't|cannot) allocate|bad_alloc|failed to map segment|out of memory", re.IGNORECASE)


def near_memory_limit(share: float = 0.9) -> bool:
    """Whether this process's address space came within ``share`` of its limit (RLIMIT_AS): a library that
    failed there most likely failed to allocate, whatever its message says."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit in (resource.RLIM_INFINITY, -1):
        return False
    try:
        peak = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmPeak"))
    except (OSError, StopIteration):
        return False
    return int(peak.split()[1]) * 1024 >= share * limit


def work(request: dict[str, Any]) -> dict[str, Any]:
    task = request.get("task", "convert")
    if request.get("external_data_mb") is not None:  # the hub's threshold for weights beside the graph
        os.environ["HPCFAIR_EXTERNAL_DATA_MB"] = str(float(request["external_data_mb"]))
    if task == "convert":
        from hpcfair.convert.core import convert

        say(f"converting {request['source']}")
        sample = request.get("sample_inputs")
        return convert(Path(request["source"]), Path(request["output"]), opset=int(request.get("opset", 17)),
                       inputs=request.get("inputs"), sample_inputs=Path(sample) if sample else None,
                       atol=float(request.get("atol", 1e-4)), rtol=float(request.get("rtol", 1e-3)),
                       task=request.get("model_task"),
                       stage=lambda fraction, what: say(stage_line(fraction, what)))
    if task == "optimize":
        from hpcfair.convert.optimize import optimize

        say(f"optimizing {request['source']}")
        return optimize(Path(request["source"]), Path(request["output_dir"]), quantize=request.get("quantize", True))
    if task == "generation_build":
        from hpcfair.generate.build import build, compare

        say(f"building a generation model from {request['source']}")
        report = build(Path(request["source"]), Path(request["output"]), precision=request.get("precision", "fp32"),
                       stage=lambda fraction, what: say(stage_line(fraction, what)))
        if request.get("full"):
            say(stage_line(0.85, "comparing with the full-precision model"))
            report["comparison"] = compare(Path(request["full"]), Path(request["output"]))
        return report
    if task == "gguf_build":
        from hpcfair.generate.gguf_build import build_gguf

        say(f"building a GGUF model from {request['source']}")
        return build_gguf(Path(request["source"]), Path(request["output"]), Path(request["converter"]),
                          outtype=request.get("gguf_type", "q8_0"), server=request.get("server", ""),
                          threads=int(request.get("threads", 1)),
                          stage=lambda fraction, what: say(stage_line(fraction, what)))
    if task == "generate_batch":
        from hpcfair.generate.batch import run_batch

        def progress(done: int, total: int) -> None:
            say(stage_line(done / total, f"{done} of {total} prompts"))

        return run_batch(Path(request["model"]), Path(request["prompts"]), Path(request["output"]),
                         request.get("options") or {}, threads=int(request.get("threads", 1)), progress=progress)
    if task == "scidata":
        return scidata(request)
    if task == "gguf":  # a GGUF file's first bytes: its metadata, checked (hpcfair.gguf_facts)
        from hpcfair.gguf_facts import Bounds, GGUFRefused, describe

        try:
            return describe(Path(request["source"]), int(request["size"]), Bounds(**request.get("bounds") or {}),
                            Path("."))
        except GGUFRefused as exc:
            raise ConversionError(exc.code, exc.detail) from None
    if task == "finetune":
        from hpcfair.finetune.child import work as finetune

        return finetune(request, say)
    raise ConversionError("invalid_request", f"unknown task {task!r}")


def scidata(request: dict[str, Any]) -> dict[str, Any]:
    """An HDF5/NetCDF/Zarr file's structure and, for ``previews`` variables (or the first ``auto`` that are not
    coordinates), first values and a PNG (base64); a refusal is the result's code, as any coded failure."""
    import base64

    from hpcfair.scidata import Bounds, ScienceRefused, describe, preview

    bounds = Bounds(**request.get("bounds") or {})
    source = Path(request["source"])
    try:
        out: dict[str, Any] = {"structure": describe(source, bounds)}
        if request.get("extract"):  # one variable as a .npy, for a job that runs a model over it
            return {**out, **extract(source, request["extract"], int(request["max_bytes"]), out["structure"],
                                     int(request.get("slab_bytes") or 64 * 2**20), int(request.get("threads") or 1),
                                     bool(request.get("in_place")))}
        wanted = list(request.get("previews") or [])
        if request.get("auto"):
            wanted += [v["path"] for v in out["structure"]["variables"]
                       if not v.get("coordinate") and v["shape"]][:int(request["auto"])]
        shown = []
        for variable in wanted[:8]:
            try:
                one = preview(source, variable, bounds)
            except ScienceRefused as exc:
                one = {"variable": variable, "refused": exc.detail}
            except (KeyError, ValueError, TypeError, OSError):
                one = {"variable": variable, "refused": "This variable's values could not be read."}
            if "png" in one:
                one["png"] = base64.b64encode(one["png"]).decode()
            shown.append(one)
        out["previews"] = shown
    except ScienceRefused as exc:
        raise ConversionError(exc.code, exc.detail) from None
    return out


def extract(source: Path, variable: str, max_bytes: int, structure: dict[str, Any], slab_bytes: int,
            threads: int = 1, in_place: bool = False) -> dict[str, Any]:
    """``variable`` of the (checked) file written as ``variable.npy``, read in slabs of ``slab_bytes`` (whole
    chunks; deflated ones inflated by ``threads`` threads) and written into it (``write_variable``), each
    slab's rows announced as it lands (``rows_line``: the job runs them while the next is read); refused
    past ``max_bytes`` before anything is read. ``in_place`` (the file is the job's own, mounted read-only):
    where the values are one run of raw bytes of the file (``stored_extent``), only where they lie."""
    import math

    from hpcfair.scidata import ScienceRefused, rows_line, stored_extent, variable_dtype, write_variable

    found = next((v for v in structure["variables"] if v["path"] == variable), None)
    if found is None:
        raise ConversionError("scientific_unreadable", f"The file has no variable {variable}.")
    dtype, shape = variable_dtype(source, variable), tuple(found["shape"])
    size = math.prod(shape) * dtype.itemsize
    if size > max_bytes:
        raise ScienceRefused("scientific_too_large", f"{variable} holds {size} bytes; a job reads variables of up "
                                                     f"to {max_bytes} bytes.")
    extent = stored_extent(source, variable) if in_place else None
    if extent is not None:
        return {"extracted": {"variable": variable, "shape": extent["shape"], "dtype": str(dtype), "extent": extent}}
    shape, dtype = write_variable(source, variable, Path("variable.npy"), slab_bytes, threads=threads,
                                  on_rows=lambda done: say(rows_line(done, shape[0])) if shape else None)
    return {"extracted": {"variable": variable, "shape": list(shape), "dtype": str(dtype)}}


def _library(exc: BaseException) -> str:
    """Which library raised ``exc``: its top-level module, or the model's or the exporter's code for a builtin
    exception (an IndexError in an embedding)."""
    module = type(exc).__module__.split(".")[0]
    return "the model's or the exporter's code" if module == "builtins" else module


# The tasks that read an upload for its metadata: what a file they cannot read is (code, format, its writers).
UNREADABLE = {"scidata": ("scientific_unreadable", "HDF5, NetCDF or Zarr", "h5py, netCDF4, xarray or zarr"),
              "gguf": ("gguf_invalid", "GGUF", "llama.cpp's tools")}


def main() -> int:
    """Run the request; a failure becomes a code and a fixed message, its text goes to stderr only."""
    Path("started").write_text(str(os.getpid()))  # Python runs here: a crash from now on is the work's
    request = json.loads(Path(sys.argv[1]).read_text())
    try:
        result = {"ok": True, **work(request)}
        import resource

        result["peak_memory_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # its RSS
    except ConversionError as exc:
        log_cause(exc.code, exc.cause)
        result = {"ok": False, **exc.to_dict()}
    except CodedError as exc:  # a generation build's coded failure (the builder's own cause): as it is
        result = {"ok": False, **exc.to_dict()}
    except MemoryError:
        result = {"ok": False, "code": "memory_limit", "detail": "The conversion ran out of its memory limit."}
    except Exception as exc:  # noqa: BLE001 - the traceback goes to the log, a fixed message to the user
        traceback.print_exc()
        text = str(exc)
        if MEMORY_TEXT.search(text) or near_memory_limit():  # protobuf's "Failed to serialize proto" when it could
            # not allocate, a shared library that could not be mapped: each a limit reached, not a bug
            result = {"ok": False, "code": "memory_limit", "detail": "The conversion ran out of its memory limit."}
        elif request.get("task") in UNREADABLE:  # a file described for its metadata: damaged, not a failed conversion
            code, kind, tools = UNREADABLE[request["task"]]
            reader = "Python's parser" if type(exc).__module__ == "builtins" else _library(exc)
            result = {"ok": False, "code": code,
                      "detail": f"{reader} could not read it as {kind} ({type(exc).__name__}): it is truncated, "
                                f"damaged or not {kind}. Upload the file as {tools} wrote it (check that it opens "
                                "there)."}
        elif request.get("task") == "generation_build":  # the runtime's or builder's own words: the cause
            said = HOST_PATH.sub("<path>", text.strip().splitlines()[-1] if text.strip() else "")
            said = f"…{said[-400:]}" if len(said) > 400 else said  # a runtime's cause comes last
            result = {"ok": False, "code": "conversion_failed",
                      "detail": f"{request.get('source')}: the generation build failed inside {_library(exc)} "
                                f"({type(exc).__name__}): {said or 'no message'}. The model's config is what it "
                                "names (a window size, a cache or attention class); its traceback is in the "
                                "build's log."}
        else:
            result = {"ok": False, "code": "conversion_failed",
                      "detail": f"{request.get('source')}: the conversion failed inside "
                                f"{_library(exc)} ({type(exc).__name__}); its traceback is in the "
                                "conversion's log (the hub worker's log, or locally with HPCFAIR_DEBUG=1). Check that "
                                "the file loads "
                                "and runs with its own framework on the inputs given, or convert it with another "
                                "opset (onnx_version)."}
    Path("result.json").write_text(json.dumps(result, default=str))
    say("done" if result["ok"] else f"failed: {result['code']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

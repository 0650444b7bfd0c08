"""Running ONNX models, one or a chain, whole or in batches of rows: the one engine of every executor.

The hub's engine processes (``hub.gateway.engine``, which serve the gateway's lanes and Celery jobs) and the
Slurm node's runner (``hpcfair.slurm_runner``) call these, so the same request gives the same answer and the
same error code wherever it runs. Errors are ``CodedError``: ``invalid_inputs`` (names, shapes, rows, a
chain's links), ``overtime``, ``memory_limit``, ``model_load_failed``, ``gpu_unavailable``, ``run_failed``.

ONNX files are protobuf: loading one runs no Python code. Weights in external data files are read only from
the model's own folder, which holds its version's files (``hpcfair.external_data``): a ``location`` that
leaves it is refused.
"""

from __future__ import annotations

import heapq
import itertools
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from hpcfair import chain
from hpcfair.batches import BUDGET_BYTES, rows_per_batch
from hpcfair.compute.errors import CodedError

PROVIDERS = {"cpu": ["CPUExecutionProvider"], "gpu": ["CUDAExecutionProvider", "CPUExecutionProvider"]}
# ONNX Runtime's words for an allocation it could not make (its arena's cap, or the process's RLIMIT_DATA)
_OUT_OF_MEMORY = ("Available memory of", "bad_alloc", "bad allocation", "Failed to allocate memory")
_bound: int | None = None  # the arena's cap in bytes, once bound_memory ran in this process


def gpu_available() -> bool:
    import onnxruntime as ort

    return "CUDAExecutionProvider" in ort.get_available_providers()


def bound_memory(limit: int) -> None:
    """Give every session created from now on its working memory from one arena of at most ``limit`` bytes
    (ONNX Runtime's environment allocator), returned to the system after each run. Once per process."""
    import onnxruntime as ort

    global _bound
    if _bound is not None:
        return
    info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    ort.create_and_register_allocator(info, ort.OrtArenaCfg({"max_mem": limit, "arena_extend_strategy": 1}))
    _bound = limit


def memory_message(limit: int | None, asked: int | None = None) -> str:
    wanted = f" (it asked for {asked / 2**30:.3g} GiB at once)" if asked else ""
    if limit is None:
        return (f"The run needed more memory than this machine could give{wanted}. Send fewer rows or smaller "
                "inputs (a smaller batch_size), or ask for more memory.")
    return (f"The run needed more memory than one model run may use on this hub: {limit / 2**20:.0f} MiB "
            f"(HUB_INFER_MEMORY_MB){wanted}. Send fewer rows or smaller inputs, or run it where more memory is "
            "allowed (a Slurm job).")


def out_of_memory(text: str, limit: int | None = None) -> CodedError | None:
    """The ``memory_limit`` error for ONNX Runtime's message, when it is about an allocation."""
    if not any(words in text for words in _OUT_OF_MEMORY):
        return None
    asked = re.search(r"requested bytes of (\d+)", text)
    return CodedError("memory_limit", memory_message(_bound or limit, int(asked.group(1)) if asked else None))


def model_graph(path: Path):
    """``path``'s graph without its weights, its external data files (if any) checked: each a plain file
    inside ``path``'s folder (``model_load_failed`` otherwise; the folder is one the hub put the model's
    version's files in, so a ``location`` can reach nothing else)."""
    import onnx

    from hpcfair import external_data

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - protobuf's words for a damaged file
        raise CodedError("model_load_failed", f"The model file cannot be read as ONNX: {str(exc)[:200]}")
    external_data.check_locations(model, Path(path).parent)
    return model


def open_session(path: Path, device: str, threads: int, *, where: str = "This worker", checked: bool = False):
    """An ONNX Runtime session for ``path`` on ``device`` with ``threads`` intra-op threads, with the output
    names and provider read once (``hub_output_names``, ``hub_provider``). Weights in data files beside it
    (ONNX external data) are read from ``path``'s folder only (``model_graph``; ``checked``: the caller did)."""
    import onnxruntime as ort

    if device == "gpu" and not gpu_available():
        raise CodedError("gpu_unavailable", f"{where} has no CUDA execution provider (onnxruntime-gpu and a "
                                            "GPU); nothing was run.")
    if not checked:
        model_graph(path)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    providers: list[Any] = list(PROVIDERS[device])
    if _bound is not None:
        options.add_session_config_entry("session.use_env_allocators", "1")
        if device == "gpu":
            providers[0] = ("CUDAExecutionProvider", {"gpu_mem_limit": str(_bound)})
    try:
        session = ort.InferenceSession(str(path), options, providers=providers)
    except MemoryError:
        raise out_of_memory("bad_alloc")
    except Exception as exc:  # noqa: BLE001 - ONNX Runtime raises its own classes; the text is the news
        raise out_of_memory(str(exc)) or CodedError("model_load_failed",
                                                    f"ONNX Runtime could not load the model: {str(exc)[:400]}")
    session.hub_output_names = [o.name for o in session.get_outputs()]
    session.hub_provider = session.get_providers()[0]
    return session


class Watchdog:
    """One thread that sets ``terminate`` on runs whose deadline passed; it sleeps until the soonest
    deadline (indefinitely when there is none), so an idle process costs no CPU."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, Any]] = []
        self.lock = threading.Lock()
        self.counter = itertools.count()
        self.finished: set[int] = set()
        self.wake = threading.Event()
        threading.Thread(target=self._loop, name="gateway-watchdog", daemon=True).start()

    def watch(self, deadline: float, run_options) -> int | None:
        """Stop the run at ``deadline``; one whose deadline has passed already never starts. Returns the
        ticket to hand to ``done`` when the run ends."""
        if time.time() >= deadline:
            run_options.terminate = True
            return None
        ticket = next(self.counter)
        with self.lock:
            sooner = not self.heap or deadline < self.heap[0][0]
            heapq.heappush(self.heap, (deadline, ticket, run_options))
        if sooner:
            self.wake.set()  # the loop may be asleep past this deadline
        return ticket

    def done(self, ticket: int | None, run_options) -> None:
        """The run ended: nothing to stop (its entry goes when it reaches the front; one the loop stopped
        has gone already)."""
        if ticket is not None and not run_options.terminate:
            with self.lock:
                self.finished.add(ticket)

    def _loop(self) -> None:
        while True:
            now = time.time()
            with self.lock:
                while self.heap and (self.heap[0][1] in self.finished or self.heap[0][0] <= now):
                    _, ticket, options = heapq.heappop(self.heap)
                    if ticket in self.finished:
                        self.finished.discard(ticket)
                    else:
                        options.terminate = True
                wait = self.heap[0][0] - now if self.heap else None
            self.wake.wait(wait)
            self.wake.clear()


_watchdog: Watchdog | None = None
_watchdog_lock = threading.Lock()


def watchdog() -> Watchdog:
    global _watchdog
    with _watchdog_lock:
        if _watchdog is None:
            _watchdog = Watchdog()
    return _watchdog


def run_model(session, feeds: dict[str, np.ndarray], deadline: float, outputs: list[str] | None = None,
              watch: bool = True) -> dict[str, np.ndarray]:
    """One ``session.run`` that stops at ``deadline`` (seconds since the epoch; batch runs pass ``watch=False``
    and check their deadline between batches)."""
    import onnxruntime as ort

    names = session.hub_output_names
    wanted = outputs or names
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise CodedError("invalid_inputs", f"The model has no output {unknown[0]!r}; it has {', '.join(names)}.")
    options = ort.RunOptions()
    if _bound is not None:
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")  # give it back afterwards
    ticket = watchdog().watch(deadline, options) if watch else None
    try:
        results = session.run(wanted, feeds, options)
    except Exception as exc:  # noqa: BLE001
        text = str(exc)
        if options.terminate or "terminate" in text.lower():
            raise CodedError("overtime", "The run was stopped at its time limit.")
        if memory := out_of_memory(text):
            raise memory
        if "INVALID_ARGUMENT" in text or "Invalid Feed" in text or "Got invalid dimensions" in text:
            raise CodedError("invalid_inputs", f"ONNX Runtime refused the inputs: {text.split(':', 1)[-1][:400]}")
        raise CodedError("run_failed", f"ONNX Runtime failed while running the model: {text[:400]}")
    finally:
        if ticket is not None:
            watchdog().done(ticket, options)
    return dict(zip(wanted, results, strict=True))


def link(step: dict[str, Any], index: int, previous: dict[str, np.ndarray], session) -> dict[str, np.ndarray]:
    """Step ``index``'s feeds from the step before's outputs: its links, or by position (``hpcfair.chain``)."""
    try:
        return chain.feed(step.get("links"), previous, [i.name for i in session.get_inputs()],
                          before=f"step {index}", after=f"step {index + 1}", where=f"links[{index - 1}]")
    except chain.ChainError as exc:
        raise CodedError("invalid_inputs", str(exc))


def run_chain(sessions: list, steps: list[dict[str, Any]], arrays: dict[str, np.ndarray], *, deadline: float,
              outputs: list[str] | None = None, watch: bool = True) -> dict[str, np.ndarray]:
    """Run one model or a chain (``steps[i]["links"]`` feeds step ``i`` from step ``i - 1``); returns the last
    step's outputs (``outputs`` of them, or all)."""
    feeds = arrays
    for index, (step, session) in enumerate(zip(steps, sessions, strict=True)):
        if index:
            feeds = link(step, index, feeds, session)
        last = index == len(steps) - 1
        feeds = run_model(session, feeds, deadline, outputs if last else None, watch=watch)
    return feeds


def row_count(arrays: dict[str, np.ndarray]) -> int:
    """The rows (first axis) every input shares; ``invalid_inputs`` when they differ, one is a scalar or there
    are none."""
    rows = {array.shape[0] if array.ndim else -1 for array in arrays.values()}
    if len(rows) != 1 or -1 in rows:
        raise CodedError("invalid_inputs", "Batch runs need inputs with the same number of rows (first axis).")
    total = rows.pop()
    if total == 0:
        raise CodedError("invalid_inputs", "The inputs have no rows; nothing was computed.")
    return total


def batch_rows(shapes: list, arrays: dict[str, np.ndarray], asked: int = 0, budget: int = BUDGET_BYTES) -> int:
    """Rows per batch: a first model whose inputs (``shapes``) have a fixed first axis gets that many; else
    ``asked``, or as many rows as fit ``budget`` bytes of inputs (``hpcfair.batches``)."""
    first = {shape[0] for shape in shapes if shape}
    if len(first) == 1 and isinstance(fixed := next(iter(first)), int) and fixed > 0:
        return fixed
    return rows_per_batch(arrays, asked, budget)


def batches(start: int, end: int, size: int) -> Iterator[tuple[int, int]]:
    """``[first, stop)`` row ranges of at most ``size`` rows covering ``[start, end)``."""
    for first in range(start, end, size):
        yield first, min(first + size, end)


def run_rows(run: Callable[[int, int], dict[str, np.ndarray]], start: int, end: int, size: int, *,
             deadline: float | None = None, limit_s: float = 0.0,
             on_batch: Callable[[int, int], None] | None = None) -> dict[str, np.ndarray]:
    """Call ``run(first, stop)`` for each batch of rows in ``[start, end)`` and join the outputs along the
    first axis. Past ``deadline`` (checked between batches): ``overtime``. A run's error names its rows."""
    parts: dict[str, list[np.ndarray]] = {}
    for first, stop in batches(start, end, size):
        if deadline is not None and time.time() > deadline:
            raise CodedError("overtime", f"The run passed its limit of {limit_s:g} s after {first - start} of "
                                         f"{end - start} rows.")
        try:
            result = run(first, stop)
        except CodedError as exc:
            raise CodedError(exc.code, f"rows {first}-{stop}: {exc.detail}")
        for name, value in result.items():
            parts.setdefault(name, []).append(np.asarray(value))
        if on_batch is not None:
            on_batch(first, stop)
    return {name: np.concatenate(values) if values[0].ndim else values[0] for name, values in parts.items()}

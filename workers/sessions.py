"""ONNX Runtime sessions in an engine process (``workers.engine``): loaded once, cached (keyed by blob
sha256, provider and thread count, bounded in bytes), run with a deadline that aborts the run
(``RunOptions.terminate``) and, once ``bound_memory`` was called, with working memory from one capped arena
that is given back after each run.

ONNX files are protobuf: loading one runs no Python code. Models with external data are refused (their
tensors could name any file on the worker); the hub stores self-contained ONNX files.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import platform
import re
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from hpcfair import chain

log = logging.getLogger(__name__)

PROVIDERS = {"cpu": ["CPUExecutionProvider"], "gpu": ["CUDAExecutionProvider", "CPUExecutionProvider"]}
_bound: int | None = None  # the arena's cap in bytes, once bound_memory ran
# ONNX Runtime's words for an allocation it could not make (its arena's cap, or the process's RLIMIT_DATA)
_OUT_OF_MEMORY = ("Available memory of", "bad_alloc", "bad allocation", "Failed to allocate memory")


class RunError(Exception):
    """A failure the caller can act on: a code and a message."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.detail = code, detail


def gpu_available() -> bool:
    import onnxruntime as ort

    return "CUDAExecutionProvider" in ort.get_available_providers()


def _model_file(sha256: str, size: int) -> Path:
    """A local path to the blob: the filesystem store's own file, or a copy in the worker's model dir."""
    from hub.storage import get_blob_store

    store = get_blob_store()
    local = store.local_path(sha256)
    if local is not None and local.exists():
        return local
    folder = Path(settings.HUB_GATEWAY_MODEL_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{sha256}.onnx"
    if not target.exists() or target.stat().st_size != size:
        temp = folder / f".{sha256}.{os.getpid()}.{threading.get_ident()}"
        with store.open(sha256) as stream, open(temp, "wb") as out:
            while chunk := stream.read(8 * 1024 * 1024):
                out.write(chunk)
        os.replace(temp, target)
    return target


def _refuse_external_data(path: Path) -> None:
    import onnx
    from onnx.external_data_helper import uses_external_data

    model = onnx.load(str(path), load_external_data=False)
    tensors = list(model.graph.initializer) + [
        attr.t for node in model.graph.node for attr in node.attribute if attr.HasField("t")]
    if any(uses_external_data(tensor) for tensor in tensors):
        raise RunError("model_load_failed", "The model keeps tensors in external data files; the gateway runs "
                                            "self-contained ONNX files only.")


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


def memory_message(limit: int, asked: int | None = None) -> str:
    wanted = f" (it asked for {asked / 2**30:.3g} GiB at once)" if asked else ""
    return (f"The run needed more memory than one model run may use on this hub: {limit / 2**20:.0f} MiB "
            f"(HUB_INFER_MEMORY_MB){wanted}. Send fewer rows or smaller inputs, or run it where more memory is "
            "allowed (a Slurm job).")


def out_of_memory(text: str) -> RunError | None:
    """The ``memory_limit`` error for ONNX Runtime's message, when it is about an allocation."""
    if not any(words in text for words in _OUT_OF_MEMORY):
        return None
    limit = _bound or settings.HUB_INFER_MEMORY_BYTES
    asked = re.search(r"requested bytes of (\d+)", text)
    return RunError("memory_limit", memory_message(limit, int(asked.group(1)) if asked else None))


def sendable(outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs in the wire format's types: string tensors (objects) as fixed-width unicode."""
    return {name: value.astype(str) if value.dtype.hasobject else value for name, value in outputs.items()}


class SessionCache:
    """Loaded sessions, least recently used first out when their estimated bytes exceed the bound."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self.lock = threading.Lock()
        self.loading: dict[tuple, threading.Lock] = {}
        self.loads = 0

    def get(self, sha256: str, size: int, device: str, threads: int, local: str | None = None):
        """The session for blob ``sha256`` (or, uncached, for the worker's own file ``local``: a merged
        model)."""
        if local:
            return self._load(sha256, size, device, threads, local)  # a file of this job's: not kept
        key = (sha256, device, threads)
        with self.lock:
            if key in self.entries:
                self.entries.move_to_end(key)
                return self.entries[key][0]
            gate = self.loading.setdefault(key, threading.Lock())
        with gate:  # one load per key; others wait for it
            with self.lock:
                if key in self.entries:
                    return self.entries[key][0]
            try:
                session = self._load(sha256, size, device, threads)
            except RunError as exc:
                if exc.code != "memory_limit" or not self.entries:
                    raise
                self.clear()  # the cached models' weights left too little room: load it alone
                session = self._load(sha256, size, device, threads)
            cost = 2 * size + 1024 * 1024  # the weights once in the session, plus working memory
            with self.lock:
                self.entries[key] = (session, cost)
                self.loads += 1
                self.loading.pop(key, None)
                while len(self.entries) > 1 and sum(c for _, c in self.entries.values()) > self.max_bytes:
                    evicted, _ = self.entries.popitem(last=False)
                    log.info("session cache: evicted %s", evicted[0][:12])
            return session

    def _load(self, sha256: str, size: int, device: str, threads: int, local: str | None = None):
        import onnxruntime as ort

        if device == "gpu" and not gpu_available():
            raise RunError("gpu_unavailable", "This worker has no CUDA execution provider (onnxruntime-gpu and a "
                                              "GPU); nothing was run.")
        path = Path(local) if local else _model_file(sha256, size)
        _refuse_external_data(path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or settings.HUB_INFER_THREADS
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
            raise out_of_memory(str(exc)) or RunError("model_load_failed",
                                                      f"ONNX Runtime could not load the model: {str(exc)[:400]}")
        # Asked on every run: read once (run_model relies on them).
        session.hub_output_names = [o.name for o in session.get_outputs()]
        session.hub_provider = session.get_providers()[0]
        return session

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()


_cache: SessionCache | None = None


def cache() -> SessionCache:
    global _cache
    if _cache is None:
        _cache = SessionCache(settings.HUB_GATEWAY_CACHE_BYTES)
    return _cache


class Watchdog:
    """One thread that sets ``terminate`` on runs whose deadline passed; it sleeps until the soonest
    deadline (indefinitely when there is none), so an idle engine costs no CPU."""

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
    """One ``session.run`` that stops at ``deadline`` (seconds since the epoch; jobs pass ``watch=False``
    and check their deadline between batches)."""
    import onnxruntime as ort

    names = session.hub_output_names
    wanted = outputs or names
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise RunError("invalid_inputs", f"The model has no output {unknown[0]!r}; it has {', '.join(names)}.")
    options = ort.RunOptions()
    if _bound is not None:
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")  # give it back afterwards
    ticket = watchdog().watch(deadline, options) if watch else None
    try:
        results = session.run(wanted, feeds, options)
    except Exception as exc:  # noqa: BLE001
        text = str(exc)
        if options.terminate or "terminate" in text.lower():
            raise RunError("overtime", "The run was stopped at its time limit.")
        if memory := out_of_memory(text):
            raise memory
        if "INVALID_ARGUMENT" in text or "Invalid Feed" in text or "Got invalid dimensions" in text:
            raise RunError("invalid_inputs", f"ONNX Runtime refused the inputs: {text.split(':', 1)[-1][:400]}")
        raise RunError("run_failed", f"ONNX Runtime failed while running the model: {text[:400]}")
    finally:
        if ticket is not None:
            watchdog().done(ticket, options)
    return dict(zip(wanted, results, strict=True))


def link(step: dict[str, Any], previous: dict[str, np.ndarray], session) -> dict[str, np.ndarray]:
    """The next step's feeds from the previous step's outputs: explicit links, or by position
    (``hpcfair.chain``)."""
    index = step["index"]
    try:
        return chain.feed(step.get("links"), previous, [i.name for i in session.get_inputs()],
                          before=f"step {index}", after=f"step {index + 1}", where=f"links[{index - 1}]")
    except chain.ChainError as exc:
        raise RunError("invalid_inputs", str(exc))


def run_steps(steps: list[dict[str, Any]], arrays: dict[str, np.ndarray], *, device: str, threads: int,
              deadline: float, outputs: list[str] | None = None, deadline_is_long: bool = False
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Run one model or a chain; returns the last step's outputs and what ran where."""
    feeds = arrays
    providers = []
    started = time.perf_counter()
    for index, step in enumerate(steps):
        session = cache().get(step.get("sha256", ""), step.get("size", 0), device, threads, step.get("local"))
        if index:
            feeds = link({**step, "index": index}, feeds, session)
        last = index == len(steps) - 1
        feeds = run_model(session, feeds, deadline, outputs if last else None, watch=not deadline_is_long)
        providers.append(session.hub_provider)
    info = {"device": device, "provider": providers[-1] if len(set(providers)) == 1 else providers,
            "worker": f"{platform.node()}:{os.getpid()}", "run_ms": round((time.perf_counter() - started) * 1e3, 3)}
    return feeds, info

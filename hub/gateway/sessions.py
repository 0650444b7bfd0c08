"""The engine process's session cache (``hub.gateway.engine``): ONNX Runtime sessions of the hub's blobs, loaded
once, cached (keyed by blob sha256, provider and thread count, bounded in bytes). Opening and running them is
the compute library's (``hpcfair.compute.runs``), the same on a Slurm node.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import platform
import shutil
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from hpcfair import external_data
from hpcfair.compute import CodedError
from hpcfair.compute.runs import gpu_available, open_session, run_chain

from hub.gateway import localcache
from hub.storage.place import create, place

log = logging.getLogger(__name__)

__all__ = ["SessionCache", "cache", "gpu_available", "run_steps", "sendable"]


def model_file(sha256: str, size: int) -> Path:
    """A local path to the blob: the filesystem store's own file, or a copy in the worker's model dir."""
    from hub.storage import get_blob_store

    store = get_blob_store()
    local = store.local_path(sha256)
    if local is not None and local.exists():
        return local
    folder = Path(settings.HUB_GATEWAY_MODEL_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{sha256}.onnx"
    if target.exists() and target.stat().st_size == size:
        localcache.touch(target)
        return target
    temp = folder / f".{sha256}.{os.getpid()}.{threading.get_ident()}"
    temp.unlink(missing_ok=True)  # left by a thread that died copying
    place(temp, opener=lambda: store.open(sha256), link=False)
    os.replace(temp, target)
    localcache.enforce()  # a new copy: the others make room (least recently used first)
    return target


def model_path(step: dict[str, Any]) -> tuple[Path, Any]:
    """A local path to the step's ONNX file and its graph (without weights). A model whose weights live in data
    files (ONNX external data) gets a folder of its own, ``HUB_GATEWAY_MODEL_DIR/with-data/<sha256>-<files>/``,
    holding it and the data files it names, taken from its version's files (``step["beside"]``) by hard link
    (or copy) under the names the graph gives them; a name that leaves the folder or is not a file of the
    version is refused (``model_load_failed``)."""
    path = model_file(step["sha256"], step["size"])
    import onnx

    try:
        graph = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - a damaged file
        raise CodedError("model_load_failed", f"The model file cannot be read as ONNX: {str(exc)[:200]}")
    names = {entry[0]: (entry[1], int(entry[2])) for entry in step.get("beside") or []}
    wanted = external_data.data_files(graph, names, Path(step.get("path") or "model.onnx").name)
    if not wanted:
        return path, graph
    label = hashlib.sha256(json.dumps(sorted(wanted.items())).encode()).hexdigest()[:16]  # the files used
    folder = Path(settings.HUB_GATEWAY_MODEL_DIR) / "with-data" / f"{step['sha256']}-{label}"
    name = Path(step.get("path") or "model.onnx").name
    if (folder / ".complete").exists():
        localcache.touch(folder)
        return folder / name, graph
    temporary = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    try:
        place(temporary / name, local=path)
        for location, (sha256, size) in wanted.items():
            (temporary / location).parent.mkdir(parents=True, exist_ok=True)
            place(temporary / location, local=model_file(sha256, size))
        localcache.write_manifest(temporary, [step["sha256"], *(sha256 for sha256, _ in wanted.values())])
        create(temporary / ".complete", b"")
    except FileExistsError:
        shutil.rmtree(temporary, ignore_errors=True)
        raise CodedError("model_load_failed", "The model's weights name a data file twice, or on the model's own "
                                              "name: each file of the model needs a path of its own.") from None
    try:
        os.rename(temporary, folder)
    except OSError:  # another engine put it together first
        shutil.rmtree(temporary, ignore_errors=True)
    localcache.enforce()
    return folder / name, graph


def beside_label(step: dict[str, Any]) -> str:
    """A short digest of the step's version's other files (empty when there are none)."""
    beside = step.get("beside")
    return hashlib.sha256(json.dumps(sorted(map(list, beside))).encode()).hexdigest()[:16] if beside else ""


def files_bytes(path: Path, graph) -> int:
    """Bytes of the ONNX file at ``path`` and of the data files its graph names."""
    return path.stat().st_size + sum((path.parent / name).stat().st_size for name in external_data.locations(graph))


def sendable(outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs in the wire format's types: string tensors (objects) as fixed-width unicode."""
    return {name: value.astype(str) if value.dtype.hasobject else value for name, value in outputs.items()}


def needed_bytes(weights: int) -> int:
    """What a session of ``weights`` bytes of model files holds in an engine (measured in bench/RESULTS.md,
    "Models past 2 GiB"): the weights, and as much again for ONNX Runtime's own copies (pre-packed matrices,
    constant folding). The runs' working memory comes from the arena, bounded apart (``HUB_INFER_MEMORY_MB``)."""
    return 2 * weights


def _size(count: int) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


def too_large(weights: int, need: int, budget: int) -> CodedError:
    return CodedError("model_too_large", (
        f"The model's files take {_size(weights)}; loaded, it needs about {_size(need)}, more than this worker "
        f"gives loaded models ({_size(budget)}, HUB_GATEWAY_CACHE_MB). Run it on a worker with more memory "
        f"(HUB_GATEWAY_CACHE_MB of at least {-(-need // 2**20)} there) or as a Slurm job, or use a smaller copy "
        "of the model (float16, int8)."))


class SessionCache:
    """Loaded sessions, least recently used first out. Before a model is loaded its cost is known
    (``needed_bytes`` of its files): one that cannot fit ``max_bytes`` even alone is refused
    (``model_too_large``) rather than loaded into an out-of-memory kill, and cached sessions are evicted until
    it fits beside the rest."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        # key -> (session, cost, holds on the local copies it was loaded from: no sweep removes them meanwhile)
        self.entries: OrderedDict[tuple, tuple[Any, int, list[localcache.Hold]]] = OrderedDict()
        self.lock = threading.Lock()
        self.loading: dict[tuple, threading.Lock] = {}
        self.loads = 0

    def held(self) -> int:
        return sum(cost for _, cost, _ in self.entries.values())

    def get(self, step: dict[str, Any], device: str, threads: int):
        """The session for the step's model (``sha256``, ``size``, ``path``, ``beside``; or, uncached, the
        worker's own file ``local``: a merged model)."""
        if step.get("local"):
            return self._open(Path(step["local"]), device, threads)  # a file of this job's: not kept
        # the graph's file and its version's other files: one graph (external data) may hold other weights
        key = (step["sha256"], beside_label(step), device, threads)
        with self.lock:
            if key in self.entries:
                self.entries.move_to_end(key)
                return self.entries[key][0]
            gate = self.loading.setdefault(key, threading.Lock())
        with gate:  # one load per key; others wait for it
            with self.lock:
                if key in self.entries:
                    return self.entries[key][0]
            path, graph = model_path(step)
            entry = localcache.entry_of(path, localcache.configured_roots())
            holds = [found for found in [localcache.hold(entry) if entry else None] if found]
            try:
                session, cost = self._load(path, graph, device, threads)
            except BaseException:
                release(holds)
                raise
            with self.lock:
                self.entries[key] = (session, cost, holds)
                self.loads += 1
                self.loading.pop(key, None)
            return session

    def _load(self, path: Path, graph, device: str, threads: int) -> tuple[Any, int]:
        weights = files_bytes(path, graph)
        cost = needed_bytes(weights)
        if cost > self.max_bytes:
            raise too_large(weights, cost, self.max_bytes)
        self.make_room(cost)
        try:
            return self._open(path, device, threads, checked=True), cost
        except CodedError as exc:
            if exc.code != "memory_limit" or not self.entries:
                raise
            self.clear()  # the cached models' weights left too little room: load it alone
            return self._open(path, device, threads, checked=True), cost

    def make_room(self, cost: int) -> None:
        """Evict the least recently used sessions until ``cost`` more bytes fit ``max_bytes``."""
        evicted = []
        with self.lock:
            while self.entries and self.held() + cost > self.max_bytes:
                evicted.append(self.entries.popitem(last=False))
                log.info("session cache: evicted %s to make room", evicted[-1][0][0][:12])
        for _, (_, _, holds) in evicted:
            release(holds)
        if evicted:
            evicted.clear()
            gc.collect()  # the evicted sessions' memory goes back before the new one takes its own

    def _open(self, path: Path, device: str, threads: int, checked: bool = False):
        return open_session(path, device, threads or settings.HUB_INFER_THREADS, checked=checked)

    def clear(self) -> None:
        with self.lock:
            for _, _, holds in self.entries.values():
                release(holds)
            self.entries.clear()


def release(holds: list[localcache.Hold]) -> None:
    for found in holds:
        found.release()


_cache: SessionCache | None = None


def cache() -> SessionCache:
    global _cache
    if _cache is None:
        _cache = SessionCache(settings.HUB_GATEWAY_CACHE_BYTES)
    return _cache


def run_steps(steps: list[dict[str, Any]], arrays: dict[str, np.ndarray], *, device: str, threads: int,
              deadline: float, outputs: list[str] | None = None, deadline_is_long: bool = False
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Run one model or a chain of the hub's blobs (``hpcfair.compute.runs.run_chain``); returns the last
    step's outputs and what ran where."""
    started = time.perf_counter()
    sessions = [cache().get(step, device, threads) for step in steps]
    feeds = run_chain(sessions, steps, arrays, deadline=deadline, outputs=outputs, watch=not deadline_is_long)
    providers = [session.hub_provider for session in sessions]
    info = {"device": device, "provider": providers[-1] if len(set(providers)) == 1 else providers,
            "worker": f"{platform.node()}:{os.getpid()}", "run_ms": round((time.perf_counter() - started) * 1e3, 3)}
    return feeds, info

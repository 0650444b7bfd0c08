"""The engine process's session cache (``hub.gateway.engine``): ONNX Runtime sessions of the hub's blobs, loaded
once, cached (keyed by blob sha256, provider and thread count, bounded in bytes). Opening and running them is
the compute library's (``hpcfair.compute.runs``), the same on a Slurm node.
"""

from __future__ import annotations

import logging
import os
import platform
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from hpcfair.compute import CodedError
from hpcfair.compute.runs import gpu_available, open_session, run_chain

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
    if not target.exists() or target.stat().st_size != size:
        temp = folder / f".{sha256}.{os.getpid()}.{threading.get_ident()}"
        with store.open(sha256) as stream, open(temp, "wb") as out:
            while chunk := stream.read(8 * 1024 * 1024):
                out.write(chunk)
        os.replace(temp, target)
    return target


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
            except CodedError as exc:
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
        path = Path(local) if local else model_file(sha256, size)
        return open_session(path, device, threads or settings.HUB_INFER_THREADS)

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()


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
    sessions = [cache().get(step.get("sha256", ""), step.get("size", 0), device, threads, step.get("local"))
                for step in steps]
    feeds = run_chain(sessions, steps, arrays, deadline=deadline, outputs=outputs, watch=not deadline_is_long)
    providers = [session.hub_provider for session in sessions]
    info = {"device": device, "provider": providers[-1] if len(set(providers)) == 1 else providers,
            "worker": f"{platform.node()}:{os.getpid()}", "run_ms": round((time.perf_counter() - started) * 1e3, 3)}
    return feeds, info

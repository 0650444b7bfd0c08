"""Request counts and latencies of this web process, kept by route name (the URL pattern's name, never the path:
so the number of series is bounded by the URL conf) and merged with the host's other web processes through small
files under ``HUB_METRICS_DIR``, so that a scrape that reaches any one process sees the whole host."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from pathlib import Path

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
MAX_SERIES = 2000  # past this many (route, status) pairs, new ones count under route "other"
FLUSH_S = 1.0  # a process writes its file at most this often (and whenever it answers a scrape)


class Requests:
    """Counters by (route, status) and a latency histogram by (route, status class); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[tuple[str, str], int] = {}
        self.histograms: dict[tuple[str, str], list[float]] = {}  # per bucket, then +Inf count, then sum
        self.errors: dict[str, int] = {}  # by the answer's X-Error-Code (hub.errors.STATUS: a bounded set)
        self._flushed = 0.0

    def observe(self, route: str, status: int, seconds: float, error_code: str = "") -> None:
        code = str(status)
        with self._lock:
            if error_code:
                if error_code not in self.errors and len(self.errors) >= MAX_SERIES:
                    error_code = "other"
                self.errors[error_code] = self.errors.get(error_code, 0) + 1
            if (route, code) not in self.counts and len(self.counts) >= MAX_SERIES:
                route = "other"
            self.counts[(route, code)] = self.counts.get((route, code), 0) + 1
            series = self.histograms.setdefault((route, f"{code[0]}xx"), [0.0] * (len(BUCKETS) + 2))
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    series[i] += 1
            series[-2] += 1
            series[-1] += seconds

    def snapshot(self) -> dict:
        with self._lock:
            return {"counts": [[*key, n] for key, n in self.counts.items()],
                    "histograms": [[*key, list(series)] for key, series in self.histograms.items()],
                    "errors": [[code, n] for code, n in self.errors.items()]}

    def flush(self, folder: Path, force: bool = False) -> bool:
        """Write this process's counts to ``folder`` (at most every FLUSH_S unless ``force``); False when
        the folder cannot be written."""
        now = time.monotonic()
        if not force and now - self._flushed < FLUSH_S:
            return True
        self._flushed = now
        target = folder / f"{socket.gethostname()}-{os.getpid()}.json"
        temp = target.with_name(f".{target.name}.tmp")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            temp.write_text(json.dumps(self.snapshot()))
            os.replace(temp, target)
        except OSError:
            return False
        return True


def merged(folder: Path, own: dict) -> dict:
    """Every process's snapshot under ``folder`` summed (this process's own, ``own``, whether or not its file
    was written). Processes that ended still count: their counts happened (``hub_serve`` empties the folder as
    it starts)."""
    snapshots = [own]
    mine = f"{socket.gethostname()}-{os.getpid()}.json"
    with contextlib.suppress(OSError):
        for path in folder.glob("*.json"):
            if path.name == mine:
                continue
            with contextlib.suppress(OSError, ValueError):
                snapshots.append(json.loads(path.read_text()))
    counts: dict[tuple[str, str], int] = {}
    histograms: dict[tuple[str, str], list[float]] = {}
    errors: dict[str, int] = {}
    for snapshot in snapshots:
        for code, n in snapshot.get("errors", []):
            errors[code] = errors.get(code, 0) + n
        for route, code, n in snapshot.get("counts", []):
            counts[(route, code)] = counts.get((route, code), 0) + n
        for route, klass, series in snapshot.get("histograms", []):
            if len(series) != len(BUCKETS) + 2:
                continue  # written by a hub with other buckets
            total = histograms.setdefault((route, klass), [0.0] * len(series))
            for i, value in enumerate(series):
                total[i] += value
    return {"counts": counts, "histograms": histograms, "errors": errors}


REQUESTS = Requests()  # this process's counts (the web server's; a test client's in tests)

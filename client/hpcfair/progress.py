"""Progress on stderr, one look for every long command: bars (tqdm) for quantities with a rate and the time
left (bytes sent or fetched, a job's percent), and lines ``what: message`` for events (a conversion's
stages, a hub job's log such as one line per epoch, a container's build steps and its tasks' output).
Both show only on a terminal and never with ``HPCFAIR_NO_PROGRESS=1``; stdout keeps the result alone."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from tqdm.auto import tqdm

from hpcfair import settings


def active() -> bool:
    """Whether progress shows: stderr is a terminal and ``HPCFAIR_NO_PROGRESS`` is not set."""
    return settings.progress_enabled() and sys.stderr.isatty()


def bar(total: int, desc: str, unit: str = "B", disable: bool = False) -> tqdm:
    """A bar with the rate and the time left; ``disable`` when an outer bar counts these bytes already."""
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000,
                disable=True if disable or not active() else False, leave=False,
                smoothing=0.1 if unit == "B" else 0.3)


def say(what: str, message: str) -> None:
    """One progress line, ``what: message``, above any bar that is showing."""
    if active():
        tqdm.write(f"{what}: {message}", file=sys.stderr)


def lines(what: str) -> Callable[[str], None]:
    """A callback that shows each line it gets as ``what: line``."""
    return lambda message: say(what, message)


def stage_printer(name: str) -> Callable[[str], None]:
    """A local conversion's stages ("encoder: [60%] checking ..."): a conversion can take a minute, and
    silence looks like a hang."""
    return lines(name)


class JobLog:
    """The lines a polled hub job adds to its log (epochs, stages), each shown once as ``what: message``."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.last: Any = None

    def show(self, job: dict[str, Any]) -> None:
        log = job.get("log") or []
        start = 0
        if self.last is not None:  # after the last line shown (the hub keeps the newest lines only)
            start = next((index + 1 for index in range(len(log) - 1, -1, -1) if log[index] == self.last), 0)
        for entry in log[start:]:
            message = entry.get("message", "") if isinstance(entry, dict) else str(entry)
            level = entry.get("level", "info") if isinstance(entry, dict) else "info"
            say(self.what, message if level == "info" else f"{level}: {message}")
        if log:
            self.last = log[-1]

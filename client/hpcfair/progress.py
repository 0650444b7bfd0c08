"""Progress bars (tqdm) that ``HPCFAIR_NO_PROGRESS=1`` turns off; they also stay off when stderr is not
a terminal."""

from __future__ import annotations

from tqdm.auto import tqdm

from hpcfair import settings


def bar(total: int, desc: str, unit: str = "B", disable: bool = False) -> tqdm:
    """A bar with the rate and the time left; ``disable`` when an outer bar counts these bytes already."""
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000,
                disable=True if disable or not settings.progress_enabled() else None, leave=False,
                smoothing=0.1 if unit == "B" else 0.3)


def stage_printer(name: str):
    """A callback that prints a local conversion's stages to stderr ("encoder: [60%] checking ..."), where
    progress bars would show (a terminal, HPCFAIR_NO_PROGRESS unset): a conversion can take a minute, and
    silence looks like a hang."""
    import sys

    def show(line: str) -> None:
        if settings.progress_enabled() and sys.stderr.isatty():
            print(f"{name}: {line}", file=sys.stderr, flush=True)
    return show

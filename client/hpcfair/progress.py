"""Progress bars (tqdm) that ``HPCFAIR_NO_PROGRESS=1`` turns off; they also stay off when stderr is not
a terminal."""

from __future__ import annotations

from tqdm.auto import tqdm

from hpcfair import settings


def bar(total: int, desc: str, unit: str = "B") -> tqdm:
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000,
                disable=True if not settings.progress_enabled() else None, leave=False)

"""The loss curve as a PNG (landing pages show raster images inline, never SVG): drawn by matplotlib when it
is installed, otherwise rasterised here (axes and the two lines, no text; the page's caption says what is
shown)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hpcfair import png

WIDTH, HEIGHT, MARGIN = 480, 300, 24
TRAIN, VALIDATION, AXES = (31, 119, 180), (255, 127, 14), (120, 120, 120)


def caption(history: list[dict[str, Any]]) -> str:
    """What the curve shows in words, in the epochs' order: each loss at the first and last epoch, then its
    lowest and when (a range "from min to max" read as if the loss rose)."""
    if not history:
        return "No epochs were run."
    first, last = history[0]["epoch"], history[-1]["epoch"]
    said = []
    for key, name in (("train_loss", "training"), ("val_loss", "validation")):
        rows = [r for r in history if key in r]
        if rows:
            low = min(rows, key=lambda r: r[key])
            said.append(f"{name} {rows[0][key]:.4g} at epoch {rows[0]['epoch']}, {rows[-1][key]:.4g} at epoch "
                        f"{rows[-1]['epoch']} (lowest {low[key]:.4g}, epoch {low['epoch']})")
    return (f"Loss per epoch ({first} to {last}), training in blue, validation in orange: {'; '.join(said)}."
            if said else "No losses were recorded.")


def write(history: list[dict[str, Any]], path: Path) -> Path:
    """Draw train and validation loss over the epochs into ``path`` (a PNG)."""
    epochs = [r["epoch"] for r in history]
    series = {"training": [r["train_loss"] for r in history], "validation": [r["val_loss"] for r in history]}
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
    except ImportError:
        path.write_bytes(png.encode(_raster(epochs, series)))
        return path
    figure, axes = plt.subplots(figsize=(6, 3.75), dpi=80)
    for (name, values), colour in zip(series.items(), (TRAIN, VALIDATION), strict=True):
        axes.plot(epochs, values, marker="o", label=name, color=[c / 255 for c in colour])
    axes.set_xlabel("epoch")
    axes.set_ylabel("loss")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, format="png", metadata={"Software": None})
    plt.close(figure)
    return path


def _raster(epochs: list[int], series: dict[str, list[float]]) -> np.ndarray:
    image = np.full((HEIGHT, WIDTH, 3), 255, dtype=np.uint8)
    image[HEIGHT - MARGIN, MARGIN:WIDTH - MARGIN] = AXES
    image[MARGIN:HEIGHT - MARGIN, MARGIN] = AXES
    values = [v for line in series.values() for v in line]
    if not values:
        return image
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    first, last = min(epochs), max(epochs)

    def point(epoch: int, value: float) -> tuple[int, int]:
        x = MARGIN + (epoch - first) / ((last - first) or 1) * (WIDTH - 3 * MARGIN) + MARGIN // 2
        y = HEIGHT - MARGIN - MARGIN // 2 - (value - low) / span * (HEIGHT - 3 * MARGIN)
        return int(round(x)), int(round(y))

    for line, colour in zip(series.values(), (TRAIN, VALIDATION), strict=True):
        points = [point(e, v) for e, v in zip(epochs, line, strict=True)]
        for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
            steps = max(abs(x1 - x0), abs(y1 - y0), 1)
            for t in np.linspace(0, 1, steps + 1):
                _dot(image, x0 + (x1 - x0) * t, y0 + (y1 - y0) * t, colour, 1)
        for x, y in points:
            _dot(image, x, y, colour, 3)
    return image


def _dot(image: np.ndarray, x: float, y: float, colour: tuple[int, int, int], radius: int) -> None:
    x, y = int(round(x)), int(round(y))
    image[max(y - radius, 0):y + radius + 1, max(x - radius, 0):x + radius + 1] = colour


"""`make install`'s package step with a progress line each: "packages N of M", the large ones named, the
time so far and an estimate of what is left (issue 55: the first `make run` printed only pip's own lines for
minutes). Installs exactly the lock's pins, hashes checked, in batches of small packages and the large ones
alone; ``pip`` and its arguments come from the command line (``install_packages.py PIP... -- LOCK...``)."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Wheels of tens to hundreds of MB: each goes alone and is named, and counts for more in the estimate.
LARGE = {"torch": 40, "tensorflow-cpu": 30, "onnxruntime": 6, "onnxruntime-genai": 6, "scipy": 6, "pyarrow": 6,
         "playwright": 6, "transformers": 4, "pandas": 4, "grpcio": 3, "numpy": 3, "xgboost-cpu": 4, "lightgbm": 2,
         "keras": 2, "sympy": 2, "onnx": 2, "h5py": 2, "scikit-learn": 3, "tokenizers": 2, "granian": 2}
BATCH = 25


def entries(paths: list[str]) -> list[tuple[str, str]]:
    """(name, requirement text with its hashes) per pinned package of the lock files, in their order."""
    found: list[tuple[str, str]] = []
    for path in paths:
        block: list[str] = []
        for line in Path(path).read_text().splitlines():
            if block:
                block.append(line)
                if not line.rstrip().endswith("\\"):
                    found.append((block[0].split("==")[0].strip().lower(), "\n".join(block)))
                    block = []
            elif re.match(r"^[A-Za-z0-9_.\-\[\]]+==", line):
                block = [line]
                if not line.rstrip().endswith("\\"):
                    found.append((line.split("==")[0].strip().lower(), line))
                    block = []
    return found


def batches(pinned: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    small: list[tuple[str, str]] = []
    for entry in pinned:
        if entry[0] in LARGE:
            out.append([entry])
        else:
            small.append(entry)
            if len(small) == BATCH:
                out.append(small)
                small = []
    return out + ([small] if small else [])


def clock(seconds: float) -> str:
    return f"{int(seconds) // 60}m{int(seconds) % 60:02d}s"


def main(argv: list[str]) -> int:
    split = argv.index("--")
    pip, locks = argv[:split], argv[split + 1:]
    pinned = entries(locks)
    weight = {name: LARGE.get(name, 1) for name, _ in pinned}
    total, total_weight = len(pinned), sum(weight.values())
    done = done_weight = 0
    started = time.monotonic()
    print(f"[install] packages: {total} pinned in the lock, {len(LARGE)} of them large "
          f"(about 3-10 minutes the first time, seconds once pip's cache holds them)", flush=True)
    for group in batches(pinned):
        names = [name for name, _ in group]
        what = (f"{names[0]} (large)" if names[0] in LARGE else names[0] if len(names) == 1
                else f"{names[0]} … {names[-1]}")
        elapsed = time.monotonic() - started
        left = (f", about {clock(elapsed / done_weight * (total_weight - done_weight))} left"
                if done_weight and elapsed > 5 else "")
        print(f"[install] packages {done + 1}-{done + len(group)} of {total}: {what} · {clock(elapsed)}{left}",
              flush=True)
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as part:
            part.write("\n".join(text for _, text in group) + "\n")
            part.flush()
            answer = subprocess.run([*pip, "-r", part.name], check=False)
        if answer.returncode != 0:
            print(f"[install] pip failed on {', '.join(names)}", file=sys.stderr, flush=True)
            return answer.returncode
        done += len(group)
        done_weight += sum(weight[name] for name in names)
    print(f"[install] packages: all {total} in place · {clock(time.monotonic() - started)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

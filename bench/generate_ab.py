"""Generation through two versions of the hub's code, in alternating rounds: do tokens/s through the hub change?

    git worktree add --detach /tmp/hub-before 7f677f3
    .venv/bin/python bench/generate_ab.py /tmp/hub-before [--rounds 3] [--size tiny] [--tokens 64] [--runs 3]

Each round runs ``bench/generate.py`` of each tree in turn (the side that goes first alternates between rounds):
its own embedded hub (``manage.py hub_serve`` of that tree: its worker, its generation engine, its channel to
the engine), its own build of the same random model, and its floor (the same build run by onnxruntime-genai in
the bench's process). Printed per side: the hub's tokens/s (``POST …/generate`` read as server-sent events) and
its ratio to that run's floor, the median over rounds; then after/before for both. The ratio to the floor is
the figure to read on a noisy machine: each run's floor was measured beside its hub (issue 60: generation
tokens/s unchanged within 5 %). For a model as small as ``tiny``, whose tokens come faster than the path can carry
them one by one, the rate after the first token is the transport's and can exceed the floor (pieces read in a
burst once the first arrives late): read the whole answer's time (the first token, then ``--tokens - 1`` at that
rate) there.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HUB_ROW = re.compile(r"\|\s*(?:\d+\s*\|\s*)?hub: POST …/generate, SSE, client side\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|"
                     r"\s*([\d.]+)x")


def run_side(tree: Path, args: argparse.Namespace) -> tuple[float, float, float]:
    """(time to first token s, tokens/s, x floor) of the hub row of ``tree``'s bench/generate.py."""
    command = [sys.executable, str(tree / "bench" / "generate.py"), "--size", args.size, "--tokens",
               str(args.tokens), "--runs", str(args.runs)]
    out = subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=3600,
                         env={**os.environ, "PYTHONPATH": f"{tree}:{tree / 'client'}"})
    found = HUB_ROW.search(out.stdout)
    if out.returncode or found is None:
        sys.exit(f"{tree}/bench/generate.py failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return float(found[1]), float(found[2]), float(found[3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="the other tree (run with this tree's .venv)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": ROOT}
    found: dict[str, list[tuple[float, float, float]]] = {"before": [], "after": []}
    print(f"# bench/generate_ab.py {time.strftime('%Y-%m-%d %H:%M')}: before {trees['before']}, after {ROOT}; "
          f"--size {args.size} --tokens {args.tokens} --runs {args.runs}, {args.rounds} rounds; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    for round_ in range(args.rounds):
        for side in (("before", "after") if round_ % 2 == 0 else ("after", "before")):
            found[side].append(run_side(trees[side], args))
            first, rate, ratio = found[side][-1]
            print(f"round {round_ + 1}, {side}: first token {first:.3f} s, {rate:.1f} tok/s, {ratio:.2f}x its floor, "
                  f"the answer {first + (args.tokens - 1) / rate:.3f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    print("\n| side | time to first token, s | tokens/s | x its floor | the whole answer, s |")
    print("|---|---:|---:|---:|---:|")
    medians = {side: [*(statistics.median(row[i] for row in rows) for i in range(3)),
                      statistics.median(row[0] + (args.tokens - 1) / row[1] for row in rows)]
               for side, rows in found.items()}
    for side, (first, rate, ratio, whole) in medians.items():
        print(f"| {side} | {first:.3f} | {rate:.1f} | {ratio:.2f} | {whole:.3f} |")
    print("| after / before | " + " | ".join(f"{medians['after'][i] / medians['before'][i]:.2f}" for i in range(4))
          + " |")


if __name__ == "__main__":
    main()

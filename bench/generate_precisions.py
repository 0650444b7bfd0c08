"""Generation builds at each precision through the hub: a random Llama (``bench/generate.py``'s shapes) with a
realistic vocabulary, its fp32 build (the job that follows publishing) and its int8 and int4 builds
(``POST …/optimize`` with ``precision``), then tokens/s of each over ``POST …/generate``, interleaved, and the
resident memory of each build open and generating.

    .venv/bin/python bench/generate_precisions.py [--size 600m] [--vocab 32000] [--tokens 64] [--runs 3]
                                                  [--threads 2] [--no-hub]

``--no-hub``: onnxruntime-genai's builder alone at each precision (no check), and each build run in a child
process of its own per run, interleaved (the floor the hub's engine runs at; minutes instead of an hour).

The vocabulary is the test tokenizer's ~300 trained tokens plus added ones up to ``--vocab`` (the embedding and
the output layer are ``--vocab`` wide, as a real model's). The baseline is the fp32 build, measured in the same
run: each precision's tokens/s is given as a ratio to it. Resident memory: the peak resident set (``VmHWM``: a
forked child's ``ru_maxrss`` keeps its parent's) of a child process that opens the build with
onnxruntime-genai (as the hub's engine does) and generates ``--tokens`` tokens."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

from bench import generate  # noqa: E402
from bench.generate import PROMPT, SIZES, hub_run, start_hub  # noqa: E402

PRECISIONS = ("fp32", "int8", "int4")


def make_folder(folder: Path, size: str, vocab: int) -> int:
    """A random Llama of ``size`` whose tokenizer (and so embedding and output layer) holds ``vocab`` tokens."""
    return generate.make_folder(folder, size, "float32", "llama", vocab)


def wait_job(api, job_id: str) -> dict:
    while True:
        job = api.client.request("GET", f"jobs/{job_id}/").json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            if job["state"] != "succeeded":
                raise SystemExit(f"{job['params']}: {job.get('error_code')}: {job.get('error_detail')}")
            return job
        time.sleep(3)


def resident_mib(folder: Path, threads: int, tokens: int) -> float:
    """Peak resident MiB of a child that opens ``folder`` and generates ``tokens`` tokens."""
    code = ("from pathlib import Path; from hpcfair.generate import GenerateRequest, generate, "
            f"open_model; m = open_model(Path({str(folder)!r}), {threads}); "
            f"list(generate(m, GenerateRequest(prompt={PROMPT!r}, max_new_tokens={tokens}, temperature=0))); "
            "print(int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}"})
    return float(done.stdout.strip().splitlines()[-1])


def floor_child(folder: Path, threads: int, tokens: int) -> tuple[float, float, float, float]:
    """(time to first token, tokens/s after it, the same, peak resident MiB) of ``folder`` in a fresh child."""
    code = ("import json; from pathlib import Path; from hpcfair.generate import open_model; "
            "from bench.generate import floor_run; "
            f"m = open_model(Path({str(folder)!r}), {threads}); floor_run(m, 4); t = floor_run(m, {tokens}); "
            "print(json.dumps([*t, *t, int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}"})
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


def floor_only(args, work: Path, loads: list[float]) -> dict:
    """--no-hub: the builder alone, then interleaved children."""
    from hpcfair.generate.build import run_builder

    rows = {}
    for precision in PRECISIONS:
        started = time.monotonic()
        run_builder(work / "src", work / precision, precision)
        size = sum(p.stat().st_size for p in (work / precision).iterdir() if p.is_file())
        rows[precision] = {"build_s": time.monotonic() - started, "size": size, "method": {}, "runs": [],
                           "comparison": None}
        print(f"{precision}: builder {rows[precision]['build_s']:.0f} s, {size / 2**20:.0f} MiB", flush=True)
    loads.append(os.getloadavg()[0])
    for run in range(args.runs):
        for precision in PRECISIONS:
            rows[precision]["runs"].append(floor_child(work / precision, args.threads, args.tokens))
        print(f"run {run + 1}: " + ", ".join(f"{p} {rows[p]['runs'][-1][1]:.1f} tok/s" for p in PRECISIONS),
              flush=True)
    for row in rows.values():
        row["rss"] = statistics.median(r[4] for r in row["runs"])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="600m")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-hub", action="store_true", help="the builder and onnxruntime-genai in children only")
    args = parser.parse_args()
    loads = [os.getloadavg()[0]]
    work = Path(tempfile.mkdtemp(prefix="bench-precisions-"))
    os.environ["HUB_GENERATE_MODELS"] = str(len(PRECISIONS))  # every build stays open in the one engine
    server = log = None
    try:
        params = make_folder(work / "src", args.size, args.vocab)
        print(f"{args.size} llama, vocabulary {args.vocab}: {params / 1e6:.0f} M parameters", flush=True)
        if args.no_hub:
            rows = floor_only(args, work, loads)
            loads.append(os.getloadavg()[0])
            return print_table(args, loads, rows)
        server, log, port, token = start_hub(work, args.threads)
        from hpcfair import modelAPI

        api = modelAPI(f"http://127.0.0.1:{port}", token)
        meta = {"title": "bench llama", "description": "bench", "creators": [{"name": "bench"}], "license": "MIT",
                "framework": "pytorch", "task": "text-generation"}
        published = api.client.publish("bench-llama", {p.name: p for p in sorted((work / "src").iterdir())}, meta)
        info = api.client.resolve(published["pid"])
        first = api.client.request("GET", "jobs/", params={"kind": "generation"}).json()["results"][0]
        builds = {"fp32": wait_job(api, first["id"])}
        for precision in PRECISIONS[1:]:
            builds[precision] = wait_job(api, api.client.optimize(info["pid"], precision=precision)["id"])
        refs, rows = {}, {}
        for precision, job in builds.items():
            report = job["result"]["generation"]
            refs[precision] = job["result"]["pid"]
            folder = work / "dl" / precision
            api.client.download(refs[precision], folder)
            rows[precision] = {"build_s": float(job.get("duration") or 0), "size": report["size_bytes"],
                               "verified": report["verification"]["passed"], "method": report["verification"],
                               "rss": resident_mib(folder, args.threads, args.tokens), "runs": [],
                               "comparison": report.get("comparison")}
            print(f"{precision}: build job {rows[precision]['build_s']:.0f} s, {report['size_bytes'] / 2**20:.0f} MiB, "
                  f"verified {rows[precision]['verified']}, resident {rows[precision]['rss']:.0f} MiB", flush=True)
            hub_run(api, refs[precision], 4)  # the engine opens it
        loads.append(os.getloadavg()[0])
        for run in range(args.runs):
            for precision in PRECISIONS:
                rows[precision]["runs"].append(hub_run(api, refs[precision], args.tokens))
            print(f"run {run + 1}: " + ", ".join(f"{p} {rows[p]['runs'][-1][1]:.1f} tok/s" for p in PRECISIONS),
                  flush=True)
        loads.append(os.getloadavg()[0])
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
            log.close()
        shutil.rmtree(work, ignore_errors=True)
    print_table(args, loads, rows)


def print_table(args, loads: list[float], rows: dict) -> None:
    print(f"\nmachine: {platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}; {args.threads} "
          f"threads; {args.tokens} new tokens, greedy, {args.runs} runs interleaved; load average "
          + " / ".join(f"{x:.1f}" for x in loads) + " (start / before the runs / end)")
    where = "onnxruntime-genai in a child" if args.no_hub else "the hub, POST …/generate"
    print(f"paths: {where}")
    print("| build | size, MiB | resident, MiB | time to first token, s | tokens/s (client) | tokens/s (engine) "
          "| vs fp32 | greedy check |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    base = statistics.median(r[3] for r in rows["fp32"]["runs"])
    for precision, row in rows.items():
        engine = statistics.median(r[3] for r in row["runs"])
        check = row["method"]
        tokens = "/".join(str(c["matched"]) for c in check.get("prompts", [])) or "n/a"
        first, client = (statistics.median(r[i] for r in row["runs"]) for i in (0, 1))
        print(f"| {precision} | {row['size'] / 2**20:.0f} | {row['rss']:.0f} | {first:.3f} | {client:.1f} "
              f"| {engine:.1f} | {engine / base:.2f}x | {tokens} of 16 |")
    for precision, row in rows.items():
        if row["comparison"]:
            c = row["comparison"]
            print(f"{precision}: perplexity {c['perplexity']:.2f} (fp32 {c['full_perplexity']:.2f})")
    print(json.dumps({p: {k: v for k, v in r.items() if k != "method"} for p, r in rows.items()}), file=sys.stderr)


if __name__ == "__main__":
    main()

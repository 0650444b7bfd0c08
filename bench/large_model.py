"""A model past protobuf's 2 GiB through the local conversion and through the hub (issue 36, point 1): a
randomly initialised Llama of ~620 M parameters saved by transformers in float32 (2.3 GiB of safetensors).

    .venv/bin/python bench/large_model.py [--folder /tmp/llama-620m] [--skip-hub]

1. The local conversion, ``hpcfair.convert.convert_file`` (the sandbox, the same code as the hub's workers):
   wall time, the sandboxed child's peak resident memory (``RUSAGE_CHILDREN``), the files written and the
   verification's largest difference.
2. The hub: ``hub_serve`` (the embedded default: SQLite, a real Celery worker, filesystem store) on a free
   port; the folder is published with the client, the worker converts it (its weights go into
   ``model.onnx.data``), then one inference of 2 x 16 tokens through the gateway. Wall times, and the peak of
   the hub's whole process tree's resident memory sampled every 0.5 s.

Check ``free -g`` first: the conversion holds the model in torch and maps the ONNX weights (~2-3x the
checkpoint). Everything started is stopped by its PID; the folder is kept for a rerun, the hub's files are
removed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

from tests.ports import free_port  # noqa: E402

LIMITS = {"cpu_seconds": 4 * 3600, "wall_seconds": 3600}


def build(folder: Path) -> None:
    """A Llama of hidden 1536, 18 layers, vocabulary 32000 (untied head): ~620 M parameters in float32."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=1536, intermediate_size=4224, num_hidden_layers=18,
                         num_attention_heads=12, num_key_value_heads=12, max_position_embeddings=2048)
    model = LlamaForCausalLM(config)
    print(f"built {sum(p.numel() for p in model.parameters()) / 1e6:.0f} M parameters")
    model.save_pretrained(str(folder))


def tree_rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and every process below it."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        todo += [int(child) for child in children]
    return total


def local(folder: Path, work: Path) -> None:
    from hpcfair.convert import Limits, convert_file

    started = time.perf_counter()
    report = convert_file(folder, work / "local" / "model.onnx", limits=Limits(**LIMITS))
    elapsed = time.perf_counter() - started
    peak = report["peak_memory_mb"] / 1024  # the sandboxed child's own peak resident memory
    sizes = {p.name: p.stat().st_size for p in (work / "local").iterdir()}
    check = report["verification"]
    print(f"local conversion: {elapsed:.0f} s, sandboxed child's peak RSS {peak:.1f} GiB; files "
          + ", ".join(f"{name} {size / 2**30:.3f} GiB" for name, size in sorted(sizes.items()) if size > 2**20)
          + f"; verified {check['passed']}, max abs diff {check['max_abs_diff']:.3g} (atol {check['atol']}); "
          f"{report['parameters'] / 1e6:.0f} M parameters, dtype {report.get('dtype')}")
    shutil.rmtree(work / "local")


def hub(folder: Path, work: Path) -> None:
    import numpy as np
    from hpcfair import HubClient

    port = free_port()
    env = {**os.environ, "HUB_VAR_DIR": str(work / "var"), "HUB_PUBLIC_URL": f"http://127.0.0.1:{port}",
           "HUB_LOG_LEVEL": "WARNING", "HUB_CONVERT_CPU_S": str(LIMITS["cpu_seconds"]),
           "HUB_CONVERT_WALL_S": str(LIMITS["wall_seconds"]), "HUB_GATEWAY_CACHE_MB": "6144",
           "HUB_INFER_SYNC_S": "300",  # the first request loads the model: answered, not turned into a job
           "HUB_CUBE_ON_CONVERT": "off"}
    for key in ("DATABASE_URL", "HUB_BROKER_URL"):
        env.pop(key, None)
    python = sys.executable
    serve = subprocess.Popen([python, "manage.py", "hub_serve", "--bind", f"127.0.0.1:{port}", "--no-demo"],
                             cwd=ROOT, env=env, stdout=open(work / "serve.log", "w"), stderr=subprocess.STDOUT)
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.5):
            peak[0] = max(peak[0], tree_rss_kib(serve.pid))

    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or serve.poll() is not None:
                    raise SystemExit("the hub did not start")
                time.sleep(0.5)
        token = subprocess.run([python, "manage.py", "hub_token", "bench", "--create", "--scope", "write"],
                               cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout.strip()
        client = HubClient(f"http://127.0.0.1:{port}", token)
        idle = tree_rss_kib(serve.pid)
        threading.Thread(target=sample, daemon=True).start()
        files = {p.name: p for p in folder.iterdir() if p.is_file()}
        started = time.perf_counter()
        client.publish("llama-620m", files, {"title": "llama-620m", "description": "random weights, bench",
                                             "creators": [{"name": "Bench"}], "license": "MIT",
                                             "task": "text-generation"})
        uploaded = time.perf_counter() - started
        jobs = [j for j in client.jobs() if j["kind"] in ("convert", "verify")]
        job = client.wait(jobs[0]["id"], timeout=LIMITS["wall_seconds"] + 600)
        converted = time.perf_counter() - started - uploaded
        version = client.request("GET", "artifacts/bench/llama-620m/versions/1-onnx/").json()
        files_out = {f["path"]: f["size"] for f in version["files"]}
        print(f"hub: publish (upload) {uploaded:.0f} s, conversion job {converted:.0f} s ({job['state']}); files "
              + ", ".join(f"{n} {s / 2**30:.3f} GiB" for n, s in sorted(files_out.items()) if s > 2**20))
        ids = np.random.default_rng(0).integers(0, 32000, (2, 16)).astype(np.int64)
        started = time.perf_counter()
        outputs, info = client.infer("bench/llama-620m@1-onnx", {"input_ids": ids, "attention_mask": np.ones_like(ids)},
                                     mode="sync")
        first = time.perf_counter() - started
        started = time.perf_counter()
        client.infer("bench/llama-620m@1-onnx", {"input_ids": ids, "attention_mask": np.ones_like(ids)},
                                     mode="sync")
        second = time.perf_counter() - started
        print(f"hub: inference 2 x 16 tokens, logits {list(outputs['logits'].shape)}: first {first:.1f} s (loads "
              f"the model: links the version's files, maps the weights), then {second:.2f} s")
        stop.set()
        print(f"hub: the process tree's peak RSS {peak[0] / 2**20:.1f} GiB (idle {idle / 2**20:.1f} GiB)")
        client.close()
    finally:
        stop.set()
        if serve.poll() is None:
            os.kill(serve.pid, signal.SIGTERM)
            serve.wait(timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()) / "llama-620m")
    parser.add_argument("--skip-hub", action="store_true")
    parser.add_argument("--skip-local", action="store_true")
    args = parser.parse_args()
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    print(f"{platform.node()}, {os.cpu_count()} CPUs, {memory:.0f} GiB, {time.strftime('%Y-%m-%d')}")
    if not (args.folder / "model.safetensors").exists() and not any(args.folder.glob("model-*.safetensors")):
        args.folder.mkdir(parents=True, exist_ok=True)
        build(args.folder)
    print(f"folder: {sum(p.stat().st_size for p in args.folder.iterdir()) / 2**30:.2f} GiB")
    work = Path(tempfile.mkdtemp(prefix="bench-large-"))
    try:
        if not args.skip_local:
            local(args.folder, work)
        if not args.skip_hub:
            hub(args.folder, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Text generation: building a Llama-architecture model (or, ``--family gpt2``, a GPT-2 one: the general route)
for generation, and tokens per second through the hub next to the same runner called in this process (the
floor: onnxruntime-genai for Llama, ``hpcfair.generate.onnx_loop`` for GPT-2) and transformers ``generate``
in PyTorch.

    .venv/bin/python bench/generate.py [--family llama|gpt2] [--size tiny|600m|1.1b] [--dtype float32|bfloat16]
                                       [--vocab 32000] [--precisions fp32,int8,int4] [--llama f32,f16,q8_0,q4_0]
                                       [--tokens 64] [--runs 3] [--threads 1,2] [--no-hub] [--no-torch] [--lean]

Makes a random folder of ``--size`` parameters (saved in ``--dtype``; a byte-level BPE tokenizer trained here,
so the vocabulary is small and the parameters are in the layers), then:

- **build**: ``hpcfair.generate.build.build`` in a child process (onnxruntime-genai's builder or the general
  route's export, then the greedy-token check against transformers): wall time and peak memory (the largest
  resident set of the child and its builder);
- **floor**: ``hpcfair.generate.generate`` on the built folder in this process;
- **the hub's smaller builds** (``--precisions``, Llama): onnxruntime-genai's builder at int8 and int4 (no check,
  as ``bench/generate_precisions.py --no-hub``), run as the floor is;
- **llama.cpp** (``--llama``, where llama-server and llama.cpp's converter are installed: scripts/llama-server.sh):
  the same weights converted by llama.cpp's own ``convert_hf_to_gguf.py`` at f32, f16, q8_0 (and ``llama-quantize``
  from the f32 file for q4_0: ``hpcfair.generate.gguf_build.write_gguf``), each served by ``llama-server`` as the
  hub serves a GGUF model (``hpcfair.generate.llama.LlamaServer``: a unix socket, streamed ``/completion``);
- **PyTorch**: transformers ``generate`` (greedy, KV cache) in this process, in the checkpoint's dtype;
- **hub**: the embedded hub (``manage.py hub_serve``: SQLite, its Celery worker and generation engine, files
  in a scratch folder); the folder is published, its generation build (the job) is timed from the job's
  record, and ``POST …/generate`` is read as server-sent events by the client.

Every path decodes greedily ``--tokens`` new tokens from the same prompt with each of ``--threads`` thread counts;
time to first token and tokens per second after it are medians over ``--runs`` runs, alternating the paths;
resident memory is what each build adds to this process once loaded and warmed (measured one at a time, at the
first thread count) and each llama-server's whole resident set after its warm-up; the ratio is to the floor
(the hub's fp32 build in process) of the same thread count. ``--vocab`` widens the vocabulary with added tokens
(the embedding and output layer as wide as a real model's), as ``bench/generate_precisions.py`` does. The hub
(``POST …/generate``) runs at the largest thread count only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

from tests.ports import free_port  # noqa: E402

SIZES = {  # LlamaConfig fields; the vocabulary is the trained tokenizer's (~300)
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2},
    "600m": {"hidden_size": 1536, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 12,
             "num_key_value_heads": 4},
    "1.1b": {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 25, "num_attention_heads": 32,
             "num_key_value_heads": 4},
}
GPT2_SIZES = {  # GPT2Config fields: tiny, GPT-2 large's width at 30 layers, GPT-2 XL's shape
    "tiny": {"n_embd": 64, "n_layer": 2, "n_head": 4},
    "600m": {"n_embd": 1280, "n_layer": 30, "n_head": 20},
    "1.1b": {"n_embd": 1600, "n_layer": 36, "n_head": 25},
}
PROMPT = "the hub converts models to onnx and"


def make_folder(folder: Path, size: str, dtype: str, family: str = "llama", vocab: int = 0) -> int:
    """A random Llama (or GPT-2) of ``size`` saved in ``dtype``, its tokenizer widened to ``vocab`` tokens by added
    ones; its parameter count."""
    import torch
    import transformers

    from tests.generation.lm import tokenizer

    fast = tokenizer()
    fast.add_tokens([f"<w{i}>" for i in range(vocab - len(fast))])
    torch.manual_seed(0)
    if family == "gpt2":
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=len(fast), n_positions=2048, bos_token_id=1, eos_token_id=2, **GPT2_SIZES[size]))
    else:
        config = transformers.LlamaConfig(vocab_size=len(fast), max_position_embeddings=2048, bos_token_id=1,
                                          eos_token_id=2, **SIZES[size])
        model = transformers.LlamaForCausalLM(config)
    model = model.to(getattr(torch, dtype))
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


def parameters(folder: Path) -> int:
    """The parameters a folder's safetensors files hold (their headers, no weights read)."""
    import math

    from safetensors import safe_open

    total = 0
    for path in folder.glob("*.safetensors"):
        with safe_open(path, "np") as weights:
            total += sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())  # noqa: SIM118
    return total


def gguf_files(source: Path, work: Path, types: list[str], threads: int) -> dict[str, Path]:
    """``source`` converted by llama.cpp's own tools at each of ``types`` (a 4-bit type quantized from the f32
    file): {type: file}; a type (or all) left out with a line that says why when its tool is not installed."""
    from hpcfair.compute.errors import CodedError
    from hpcfair.generate.gguf_build import CONVERTER_FILES, CONVERTER_TYPES, quantize, write_gguf

    converter = Path(os.environ.get("HUB_LLAMA_CONVERT") or Path(sys.prefix) / "share" / "llama.cpp")
    if not all((converter / name).exists() for name in CONVERTER_FILES):
        print(f"no llama.cpp rows: no convert_hf_to_gguf.py in {converter} (scripts/llama-server.sh)", flush=True)
        return {}
    files: dict[str, Path] = {}
    for outtype in sorted(types, key=lambda t: t not in CONVERTER_TYPES):  # the converter's first: f32 for q4_0
        started, path = time.monotonic(), work / f"model-{outtype}.gguf"
        try:
            if path.is_file():  # --work: made by an earlier run
                pass
            elif outtype in CONVERTER_TYPES:
                write_gguf(source, path, outtype, converter)
            else:
                if not (work / "model-f32.gguf").is_file():
                    write_gguf(source, work / "model-f32.gguf", "f32", converter)
                quantize(work / "model-f32.gguf", path, outtype, server=os.environ.get("HUB_LLAMA_SERVER", ""),
                         threads=threads)
        except CodedError as exc:
            print(f"no gguf {outtype}: {exc.detail}", flush=True)
            continue
        files[outtype] = path
        print(f"gguf {outtype}: {time.monotonic() - started:.0f} s, {path.stat().st_size / 2**30:.2f} GiB", flush=True)
    return files


def build_in_child(source: Path, out: Path, threads: int) -> tuple[float, float, dict]:
    """(seconds, peak resident MiB of the child and its builder, report)."""
    code = ("import json, sys; from pathlib import Path; from hpcfair.generate.build import build; "
            f"print(json.dumps(build(Path({str(source)!r}), Path({str(out)!r}), threads={threads})))")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"build failed:\n{done.stderr[-3000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return seconds, peak, json.loads(done.stdout.strip().splitlines()[-1])


def floor_run(loaded, tokens: int) -> tuple[float, float]:
    """(time to first token, tokens/s after it) of onnxruntime-genai in this process."""
    from hpcfair.generate import GenerateRequest, generate

    return _timed(generate(loaded, GenerateRequest(prompt=PROMPT, max_new_tokens=tokens, temperature=0)))


def _timed(pieces) -> tuple[float, float]:
    for piece in pieces:
        if piece.done:
            rate = (piece.completion_tokens - 1) / max(piece.seconds - piece.seconds_to_first, 1e-9)
            return piece.seconds_to_first, rate
    raise RuntimeError("no last piece")


def torch_run(model, tokenizer, tokens: int) -> tuple[float, float]:
    import torch

    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        started = time.perf_counter()
        model.generate(ids, max_new_tokens=1, do_sample=False)
        first = time.perf_counter() - started
        started = time.perf_counter()
        model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
        whole = time.perf_counter() - started
    return first, (tokens - 1) / max(whole - first, 1e-9)


def hub_run(api, ref: str, tokens: int) -> tuple[float, float, float, float]:
    """(client's time to first text, client's tokens/s after it, the engine's own ttft and tokens/s)."""
    started = time.perf_counter()
    first, count, last = 0.0, 0, {}
    for piece in api.client.generate(ref, prompt=PROMPT, max_new_tokens=tokens, temperature=0):
        if piece.get("done"):
            last = piece
        elif piece.get("text") and not first:
            first = time.perf_counter() - started
    whole = time.perf_counter() - started
    count = last["completion_tokens"]
    engine = (count - 1) / max(last["seconds"] - last["seconds_to_first"], 1e-9)
    return first, (count - 1) / max(whole - first, 1e-9), last["seconds_to_first"], engine


def start_hub(work: Path, threads: int):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"}}
    env.update(HUB_VAR_DIR=str(work / "var"), HUB_PUBLIC_URL=f"http://127.0.0.1:{port}", HUB_CUBE_ON_CONVERT="off",
               HUB_GENERATE_THREADS=str(threads), HUB_CONVERT_THREADS=str(threads),
               PYTHONPATH=f"{ROOT}:{ROOT / 'client'}")
    log = open(work / "serve.log", "w")  # noqa: SIM115 - closed by the caller
    server = subprocess.Popen([sys.executable, "manage.py", "hub_serve", "--bind", f"127.0.0.1:{port}"], cwd=ROOT,
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline and server.poll() is None, (work / "serve.log").read_text()[-2000:]
            time.sleep(0.5)
    token = subprocess.run([sys.executable, "manage.py", "hub_token", "demo", "--scope", "write"], cwd=ROOT, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    return server, log, port, token


def publish_and_build(api, folder: Path) -> tuple[str, float, dict]:
    """Publish the folder; wait for its generation build. (reference, job seconds, the job)."""
    meta = {"title": "bench llama", "description": "bench", "creators": [{"name": "bench"}], "license": "MIT",
            "framework": "pytorch", "task": "text-generation"}
    files = {path.name: path for path in sorted(folder.iterdir()) if path.is_file()}
    published = api.client.publish("bench-llama", files, meta)
    ref = published["pid"]
    deadline = time.monotonic() + 7200
    while time.monotonic() < deadline:
        jobs = [j for j in api.client.request("GET", "jobs/", params={"kind": "generation"}).json()["results"]]
        done = [j for j in jobs if j["state"] in ("succeeded", "failed", "cancelled")]
        if done:
            job = done[0]
            if job["state"] != "succeeded":
                raise SystemExit(f"the hub's build failed: {job.get('error_code')}: {job.get('error_detail')}")
            return ref, float(job.get("duration") or 0), job
        time.sleep(2)
    raise SystemExit("the hub's build did not finish")


def resident_mib(pid: int | str = "self") -> float:
    """A process's resident set now (``VmRSS``), MiB."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def llama_run(server, tokens: int) -> tuple[float, float]:
    """(time to first token, tokens/s after it) of llama-server, asked as the hub's engine asks it."""
    from hpcfair.generate import GenerateRequest

    return _timed(server.generate(GenerateRequest(prompt=PROMPT, max_new_tokens=tokens, temperature=0)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=["llama", "gpt2"], default="llama")
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--vocab", type=int, default=0, help="widen the vocabulary to this many tokens")
    parser.add_argument("--precisions", default="fp32", help="the hub's builds (Llama): fp32[,int8,int4]")
    parser.add_argument("--llama", default="f32,f16,q8_0,q4_0", help="llama.cpp's GGUF types ('' for none)")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", default="2", help="thread counts, e.g. 1,2")
    parser.add_argument("--no-hub", action="store_true", help="no embedded hub (POST …/generate)")
    parser.add_argument("--work", default="", help="a folder kept between runs: what it holds is not made again "
                        "(--runs 0: make it, measure nothing)")
    parser.add_argument("--no-torch", action="store_true", help="no transformers rows")
    parser.add_argument("--lean", action="store_true", help="PyTorch's runs first, its model freed before the "
                        "others (one copy of the weights fewer at once; PyTorch is then not interleaved)")
    args = parser.parse_args()
    import torch
    from hpcfair.compute.errors import CodedError
    from hpcfair.generate import open_model
    from hpcfair.generate.build import run_builder
    from hpcfair.generate.llama import LlamaServer, server_binary
    from transformers import AutoModelForCausalLM, AutoTokenizer

    threads = [int(t) for t in args.threads.split(",")]
    smaller = [p for p in args.precisions.split(",") if p and p != "fp32"] if args.family == "llama" else []
    loads = os.getloadavg()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-generate-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[tuple[int, str], list[tuple[float, ...]]] = {}
    resident: dict[str, float] = {}  # MiB each path holds: a build's addition to this process, a server's whole process
    hub = None
    try:
        if not (work / "src" / "config.json").is_file():
            make_folder(work / "src", args.size, args.dtype, args.family, args.vocab)
        params = parameters(work / "src")
        size_gib = sum(p.stat().st_size for p in (work / "src").iterdir()) / 2**30
        print(f"{args.size} {args.family}: {params / 1e6:.0f} M parameters, {args.dtype}, {size_gib:.2f} GiB",
              flush=True)
        if not (work / "genai" / "genai_config.json").is_file():
            build_s, peak, report = build_in_child(work / "src", work / "genai", max(threads))
            print(f"build: {build_s:.1f} s, peak {peak:.0f} MiB, verified {report['verification']['passed']}, "
                  f"{report['size_bytes'] / 2**30:.2f} GiB", flush=True)
        for precision in [p for p in smaller if not (work / p / "genai_config.json").is_file()]:
            started = time.monotonic()
            run_builder(work / "src", work / precision, precision)
            print(f"{precision} build (builder only): {time.monotonic() - started:.0f} s", flush=True)
        types = [t for t in args.llama.split(",") if t] if args.family == "llama" else []
        gguf = gguf_files(work / "src", work, types, max(threads)) if types else {}
        try:
            llama = bool(gguf) and bool(server_binary(os.environ.get("HUB_LLAMA_SERVER", "")))
        except CodedError:
            print("no llama.cpp rows: llama-server is not installed (scripts/llama-server.sh)", flush=True)
            llama = False
        if args.runs == 0:
            print(f"prepared in {work}", flush=True)
            return
        if not args.no_hub:
            server, log, port, token = start_hub(work, max(threads))
            from hpcfair import modelAPI

            api = modelAPI(f"http://127.0.0.1:{port}", token)
            hub = (server, log, api, None)
            ref, job_s, job = publish_and_build(api, work / "src")
            hub = (server, log, api, ref)
            print(f"hub build job: {job_s:.1f} s", flush=True)
            hub_run(api, ref, 4)  # the engine opens the model
        tokenizer = AutoTokenizer.from_pretrained(work / "src")
        model = None if args.no_torch else AutoModelForCausalLM.from_pretrained(work / "src",
                                                                                dtype=getattr(torch, args.dtype))
        if args.lean and model is not None:
            for count in threads:
                torch.set_num_threads(count)
                results[(count, "torch")] = [torch_run(model, tokenizer, args.tokens) for _ in range(args.runs)]
            model = None
        for count in threads:
            torch.set_num_threads(count)
            builds = {"fp32": work / "genai", **{p: work / p for p in smaller}}
            loaded = {}
            for precision, folder in builds.items():  # one at a time: what each adds to this process's memory
                before = resident_mib()
                loaded[precision] = open_model(folder, count)
                floor_run(loaded[precision], 4)
                resident.setdefault(f"floor {precision}", resident_mib() - before)
            servers = {t: LlamaServer(path, threads=count, context=2048) for t, path in gguf.items()} if llama else {}
            try:
                for outtype, one in servers.items():
                    llama_run(one, 4)  # started, its model loaded
                    resident.setdefault(f"llama {outtype}", resident_mib(one.process.pid))
                for run in range(args.runs):
                    for precision, one in loaded.items():
                        results.setdefault((count, f"floor {precision}"), []).append(floor_run(one, args.tokens))
                    for outtype, one in servers.items():
                        results.setdefault((count, f"llama {outtype}"), []).append(llama_run(one, args.tokens))
                    if model is not None:
                        results.setdefault((count, "torch"), []).append(torch_run(model, tokenizer, args.tokens))
                    if hub and count == max(threads):
                        results.setdefault((count, "hub"), []).append(hub_run(hub[2], hub[3], args.tokens))
                    print(f"{count} threads, run {run + 1}: " + ", ".join(
                        f"{k[1]} {v[-1][1]:.1f} tok/s" for k, v in results.items() if k[0] == count and
                        len(v) == run + 1), flush=True)
            finally:
                for one in servers.values():
                    one.close()
                loaded.clear()
    finally:
        if hub:
            hub[0].send_signal(signal.SIGTERM)
            hub[0].wait(timeout=60)
            hub[1].close()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\nmachine: {platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}; threads "
          f"{args.threads}; {args.tokens} new tokens, greedy, {args.runs} runs interleaved; load average "
          f"{loads[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    print("| threads | path | time to first token, s | tokens/s | vs floor | resident, MiB |")
    print("|---:|---|---:|---:|---:|---:|")
    runner = "onnxruntime-genai" if args.family == "llama" else "hpcfair onnx_loop (ONNX Runtime)"
    names = {"torch": f"transformers generate (PyTorch, {args.dtype})", "hub": "hub: POST …/generate, SSE, client side",
             "floor fp32": f"hub's fp32 build, {runner} in process (floor)"}
    for count in threads:
        floor = statistics.median(r[1] for r in results[(count, "floor fp32")])
        for (at, key), rows in results.items():
            if at != count:
                continue
            name = names.get(key) or (f"hub's {key.split()[1]} build, {runner} in process" if key.startswith("floor")
                                      else f"llama-server, GGUF {key.split()[1]} (llama.cpp's converter)")
            rate = statistics.median(r[1] for r in rows)
            held = f"{resident[key]:,.0f}" if key in resident else ""
            print(f"| {count} | {name} | {statistics.median(r[0] for r in rows):.3f} | {rate:.1f} | "
                  f"{rate / floor:.2f}x | {held} |")
            if key == "hub":
                engine = statistics.median(r[3] for r in rows)
                print(f"| {count} | hub: the engine's own count | {statistics.median(r[2] for r in rows):.3f} | "
                      f"{engine:.1f} | {engine / floor:.2f}x |")


if __name__ == "__main__":
    main()

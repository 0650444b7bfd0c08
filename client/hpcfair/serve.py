"""A served model's own OpenAI-compatible server, on the node a ``serve`` job runs on (``hpcfair.slurm_runner``'s
``serve`` compute; the hub's side is ``hub.generation.serving``). Nothing here imports Django.

One front answers ``/v1/chat/completions``, ``/v1/completions`` and ``/v1/models`` to the hub alone (the job's
secret as the bearer token, from ``FOLDER/secret``), counts the requests and stops the server once none came for
``idle_s`` seconds. Behind it, by the job's ``engine``:

- ``onnx``: the hub's own generation engine on the version's generation build (``hpcfair.generate``);
- ``llama``: llama.cpp's ``llama-server`` on a GGUF file (``hpcfair.generate.llama``), where it is installed;
- ``vllm``: vLLM's OpenAI server on a Hugging Face folder, on a node with a GPU (``vllm_command``), on 127.0.0.1
  behind the front, which passes the requests and answers through.

The front binds a port of the job's range and writes ``FOLDER/out/address.json`` (its URL): the hub's poller
reads it and routes ``/v1/*`` for the model there while the job lives.
"""

from __future__ import annotations

import hmac
import http.client
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hpcfair.compute.errors import CodedError
from hpcfair.generate import openai

START_S = 600.0  # how long vLLM may take to load a model
BODY_BYTES = 4 << 20  # the largest request body the front reads


def gpus(environ: dict[str, str] | None = None) -> list[str]:
    """The GPUs this node gives the job: Slurm's ``CUDA_VISIBLE_DEVICES`` (``--gres=gpu``), else ``nvidia-smi -L``."""
    environ = os.environ if environ is None else environ
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d for d in visible.split(",") if d.strip() and d.strip() not in ("-1", "NoDevFiles")]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(listed.stdout.splitlines()) if line.startswith("GPU ")]


def vllm_command(folder: Path, name: str, port: int, devices: list[str], python: str = sys.executable) -> list[str]:
    """The command that serves the Hugging Face ``folder`` with vLLM on ``devices`` (tensor parallel over them), on
    127.0.0.1:``port`` as model ``name``; its API key comes in ``VLLM_API_KEY`` (never on a command line)."""
    return [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder), "--served-model-name", name,
            "--host", "127.0.0.1", "--port", str(port), "--tensor-parallel-size", str(max(1, len(devices)))]


def engine_check(engine: str, device: str, devices: list[str], has_vllm: bool) -> None:
    """Refuse, in words, an engine this node cannot run: vLLM needs a GPU here and vLLM installed; a job that asked
    for a GPU gets one."""
    node = platform.node()
    if device == "gpu" and not devices:
        raise CodedError("not_runnable", f"The serve job asked for a GPU, but node {node} shows none "
                                         "(CUDA_VISIBLE_DEVICES, nvidia-smi): check the GPU partition's --gres.")
    if engine == "vllm" and not devices:
        raise CodedError("not_runnable", f"vLLM serves on GPU nodes only; node {node} has none.")
    if engine == "vllm" and not has_vllm:
        raise CodedError("not_runnable", f"vLLM is not installed in node {node}'s Python ({sys.executable}): "
                                         "install it there, or serve the model's generation build on a CPU node.")


def bind(host: str, ports: list[int], backend: Pieces | Upstream, *, name: str, secret: str) -> Front:
    """The front on ``host``, on the first free port of the range ``[first, last]`` (an empty range: any)."""
    first, last = (ports[0], ports[-1]) if ports else (0, 0)
    for port in range(first, last + 1):
        try:
            return Front((host, port), backend, name=name, secret=secret)
        except OSError:
            continue
    raise CodedError("not_runnable", f"No port of {first}-{last} is free on {host} (HUB_SERVE_PORTS).")


class Pieces:
    """The hub's engines behind the front: ``generate(request)`` yields pieces (dicts); one request at a time."""

    def __init__(self, generate: Callable[..., Iterator[Any]], *, max_tokens: int, seconds: float,
                 close: Callable[[], None] = lambda: None) -> None:
        self.generate, self.max_tokens, self.seconds, self.close = generate, max_tokens, seconds, close
        self.lock = threading.Lock()

    def answer(self, handler: Handler, route: str, body: Any) -> None:
        chat = route == "chat/completions"
        try:
            asked = openai.parse(body, chat=chat, max_tokens=self.max_tokens)
        except CodedError as exc:
            handler.reply(400, openai.error(exc.code, exc.detail))
            return
        ident, created = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}", int(time.time())
        model = handler.server.name
        with self.lock:
            pieces = (p.to_dict() for p in self.generate(asked.request, deadline=time.monotonic() + self.seconds))
            try:
                if asked.stream:
                    handler.stream(openai.chunks(pieces, chat=chat, ident=ident, created=created, model=model,
                                                 usage=asked.usage))
                else:
                    answer = openai.collect(pieces)
                    handler.reply(200, openai.completion(answer, chat=chat, ident=ident, created=created, model=model))
            except CodedError as exc:
                handler.fail(400 if exc.code in ("invalid", "prompt_too_long") else 422, exc.code, exc.detail)
            except (BrokenPipeError, ConnectionResetError):
                raise
            except Exception as exc:  # noqa: BLE001 - answered in words, its trace in the job's log
                traceback.print_exc()
                handler.fail(422, "run_failed", f"The model could not generate from this request "
                                                f"({type(exc).__name__}); nothing was kept.")


class Upstream:
    """An OpenAI server of its own behind the front (vLLM on 127.0.0.1): requests and answers passed through."""

    def __init__(self, process: subprocess.Popen, port: int, secret: str, seconds: float) -> None:
        self.process, self.port, self.secret, self.seconds = process, port, secret, seconds

    def wait(self, start_s: float = START_S) -> None:
        deadline = time.monotonic() + start_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise CodedError("not_runnable", f"vLLM ended (status {self.process.returncode}) before it served "
                                                 "the model; the job's log has its words.")
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            try:
                connection.request("GET", "/health")
                if connection.getresponse().status == 200:
                    return
            except OSError:
                pass
            finally:
                connection.close()
            time.sleep(0.5)
        raise CodedError("worker_timeout", f"vLLM did not load the model within {start_s:.0f} s.")

    def answer(self, handler: Handler, route: str, body: Any) -> None:
        if not isinstance(body, dict):
            handler.reply(400, openai.error("invalid", "Send a JSON object."))
            return
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.seconds)
        try:
            try:
                connection.request("POST", f"/v1/{route}", json.dumps({**body, "model": handler.server.name}).encode(),
                                   {"Content-Type": "application/json", "Authorization": f"Bearer {self.secret}"})
                response = connection.getresponse()
            except OSError:
                handler.reply(502, openai.error("no_worker", "The model's server behind this node's front does not "
                                                             "answer; the job's log says why."))
                return
            handler.send_response(response.status)
            handler.send_header("Content-Type", response.getheader("Content-Type", "application/json"))
            handler.end_headers()
            while data := response.read1(65536):
                handler.wfile.write(data)
                handler.wfile.flush()
        finally:
            connection.close()

    def close(self) -> None:
        from hpcfair.generate.llama import stop

        stop(self.process, grace=30)


class Handler(BaseHTTPRequestHandler):
    server: Front
    streaming = False  # the answer is a stream that has begun

    def log_message(self, format: str, *args: Any) -> None:  # one line a request, in the job's log
        print(f"[{time.strftime('%H:%M:%S')}] {self.command} {self.path} {args[1] if len(args) > 1 else ''}",
              flush=True)

    def reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def fail(self, status: int, code: str, detail: str) -> None:
        """An error in OpenAI's shape: the answer, or the stream's last event once a stream has begun."""
        if self.streaming:
            self.wfile.write(b"data: " + json.dumps(openai.error(code, detail)).encode() + b"\n\n")
        else:
            self.reply(status, openai.error(code, detail))

    def stream(self, chunks: Iterator[bytes]) -> None:
        self.streaming = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()

    def allowed(self) -> bool:
        given = self.headers.get("Authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {self.server.secret}".encode()):
            return True  # only the hub's requests count, and keep the server from its idle stop
        self.reply(401, openai.error("unauthorized", "This server answers the hub only."))
        return False

    def do_GET(self) -> None:
        if not self.allowed():
            return
        with self.server.busy():
            if self.path.rstrip("/") in ("/v1/models", "/health"):
                self.reply(200, {"object": "list", "data": [{"id": self.server.name, "object": "model",
                                                             "owned_by": "hpcfair"}]})
            else:
                self.reply(404, openai.error("not_found", f"No route {self.path}."))

    def do_POST(self) -> None:
        if not self.allowed():
            return
        with self.server.busy():
            route = self.path.removeprefix("/v1/").rstrip("/")
            if route not in ("chat/completions", "completions"):
                self.reply(404, openai.error("not_found", f"No route {self.path}."))
                return
            size = int(self.headers.get("Content-Length") or 0) if self.headers.get("Content-Length", "0").isdigit() \
                else BODY_BYTES + 1
            if size > BODY_BYTES:
                self.reply(413, openai.error("request_too_large", f"The body is over {BODY_BYTES} bytes."))
                return
            try:
                body = json.loads(self.rfile.read(size) or b"null")
            except ValueError:
                self.reply(400, openai.error("invalid", "Send a JSON object."))
                return
            try:
                self.server.backend.answer(self, route, body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the hub's reader went away


class Front(ThreadingHTTPServer):
    """The front: the secret, the model's name, the backend, and the idle clock."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], backend: Pieces | Upstream, *, name: str, secret: str) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, Handler)
        self.backend, self.name, self.secret = backend, name, secret
        self.requests, self.active, self.last = 0, 0, time.monotonic()
        self.lock = threading.Lock()

    @contextmanager
    def busy(self) -> Iterator[None]:
        """A request in progress: the idle clock stands still, and starts again at its end."""
        with self.lock:
            self.active += 1
            self.requests += 1
        try:
            yield
        finally:
            with self.lock:
                self.active -= 1
                self.last = time.monotonic()

    def idle_for(self) -> float:
        with self.lock:
            return 0.0 if self.active else time.monotonic() - self.last


def open_backend(folder: Path, spec: dict[str, Any], secret: str) -> Pieces | Upstream:
    """The engine the job names, loaded: the hub's ONNX engine, llama.cpp or vLLM (checked for this node first)."""
    import importlib.util

    engine, model = spec["engine"], folder / spec["model"]
    devices = gpus()
    engine_check(engine, spec.get("device", "cpu"), devices, importlib.util.find_spec("vllm") is not None)
    threads = int(spec.get("threads") or 1)
    if engine == "onnx":
        from functools import partial

        from hpcfair.generate import generate, open_model

        return Pieces(partial(generate, open_model(model, threads)), max_tokens=int(spec["max_tokens"]),
                      seconds=float(spec["seconds"]))
    if engine == "llama":
        from hpcfair.generate.llama import LlamaServer

        server = LlamaServer(model / spec["gguf"], threads=threads, context=int(spec.get("context") or 4096),
                             memory=int(spec.get("memory") or 0), binary=spec.get("llama_server") or "")
        server.start()
        return Pieces(server.generate, max_tokens=int(spec["max_tokens"]), seconds=float(spec["seconds"]),
                      close=server.close)
    if engine == "vllm":
        with socket.socket() as probe:  # a free port for vLLM on 127.0.0.1, behind the front
            probe.bind(("127.0.0.1", 0))
            number = probe.getsockname()[1]
        env = {**os.environ, "VLLM_API_KEY": secret}
        process = subprocess.Popen(vllm_command(model, spec["name"], number, devices), env=env,
                                   stdin=subprocess.DEVNULL)
        upstream = Upstream(process, number, secret, float(spec["seconds"]))
        try:
            upstream.wait()
        except BaseException:
            upstream.close()
            raise
        return upstream
    raise CodedError("not_runnable", f"This node has no engine {engine!r} (onnx, llama, vllm).")


def serve(folder: Path, spec: dict[str, Any], say: Callable[[str], None] = print) -> dict[str, Any]:
    """Serve the job's model until it is idle for ``spec["idle_s"]`` or stopped (SIGTERM); what it served."""
    secret = (folder / "secret").read_text().strip()
    started = time.monotonic()
    backend = open_backend(folder, spec, secret)
    host = spec.get("host") or socket.getfqdn()
    try:
        front = bind(host, list(spec.get("ports") or []), backend, name=spec["name"], secret=secret)
    except BaseException:
        backend.close()
        raise
    port = front.server_address[1]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    ended = {"why": "idle"}

    def on_term(signum, frame) -> None:
        ended["why"] = "stopped"
        threading.Thread(target=front.shutdown, daemon=True).start()

    if threading.current_thread() is threading.main_thread():  # the runner's: scancel, or the worker's stop
        signal.signal(signal.SIGTERM, on_term)

    def watch() -> None:
        idle = float(spec["idle_s"])
        while ended["why"] == "idle":
            if front.idle_for() > idle:
                front.shutdown()
                return
            time.sleep(min(0.5, idle / 4))

    temporary = folder / "out" / "address.tmp"
    temporary.write_text(json.dumps({"url": url, "engine": spec["engine"], "name": spec["name"],
                                     "node": platform.node(), "loaded_s": round(time.monotonic() - started, 3)}))
    temporary.replace(folder / "out" / "address.json")
    say(f"serving {spec['name']} with {spec['engine']} at {url}; stopping after {spec['idle_s']} s without a request")
    threading.Thread(target=watch, daemon=True).start()
    try:
        front.serve_forever(poll_interval=0.2)
    finally:
        front.server_close()
        backend.close()
    say(f"stopped ({ended['why']}) after {front.requests} requests")
    return {"requests": front.requests, "ended": ended["why"], "url": url, "engine": spec["engine"],
            "served_s": round(time.monotonic() - started, 3)}

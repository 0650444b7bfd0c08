"""A worker's generation engine: a child process (``python -m hub.generation.engine FD``) that serves only its
parent, the ``Keeper`` thread of the worker's door ``generate-<device>`` (``hub.gateway.channel``): the keeper
sends it one request at a time over a socket pair and forwards each piece of the answer to the caller
(``hub.gateway.channel.stream``); an embedding request (``/v1/embeddings``, ``hpcfair.embed``) gets one
answer. The keeper stops it past its deadline, tells it when the caller went away, answers for it when it
dies and starts another.

A request names the generation model's files (path, blob, size); the engine puts them in a folder of its
cache (``VAR_DIR/generation/<digest>``, hard links to a filesystem store's blobs, else copies) and keeps the
last ``HUB_GENERATE_MODELS`` models open. Messages are JSON: a piece ``{"text": …}``, the last one with
``"done": true`` and the totals, or ``{"error": code, "detail": …}``."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from hub.gateway import wire
from hub.gateway.engine import EXIT_MEMORY, GRACE_S, START_S, data_bytes

log = logging.getLogger(__name__)
CANCEL_EVERY_S = 0.25  # how often a running generation looks whether its reader went away


def model_folder(files: list[list[Any]], root: Path) -> Path:
    """The model's files as a folder under ``root`` (made once per set of files), each at its path in the
    version (``hub.storage.place``: hard links to a filesystem store's blobs, else copies; nothing is written
    into a blob, and two files on one path are refused)."""
    from hpcfair.compute import CodedError

    from hub.gateway import localcache
    from hub.storage import get_blob_store
    from hub.storage.place import inside, place

    digest = hashlib.sha256(orjson.dumps(sorted(files))).hexdigest()[:24]
    folder = root / digest
    try:
        wanted = [(inside(folder, path), sha256) for path, sha256, _ in files]
    except ValueError:
        raise CodedError("not_runnable", "The generation model names a file outside its folder.") from None
    if (folder / localcache.MANIFEST).is_file() and all(target.is_file() for target, _ in wanted):
        localcache.touch(folder)
        return folder
    shutil.rmtree(folder, ignore_errors=True)  # made by an older engine, or in part
    store = get_blob_store()
    partial = root / f".{digest}.{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        for target, sha256 in wanted:
            target = partial / target.relative_to(folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            # A hard link where it can (ONNX Runtime refuses weights a symbolic link leads out of the folder to).
            place(target, local=store.local_path(sha256), opener=lambda sha256=sha256: store.open(sha256))
    except FileExistsError:
        shutil.rmtree(partial, ignore_errors=True)
        raise CodedError("not_runnable", "The generation model has two files on one path.") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    localcache.write_manifest(partial, [sha256 for _, sha256, _ in files])
    try:
        os.rename(partial, folder)
    except OSError:  # another engine made it meanwhile
        shutil.rmtree(partial, ignore_errors=True)
    localcache.enforce()  # a new copy: the others make room (least recently used first)
    return folder


class Models:
    """The last few generation models used, open, each with a hold on its folder (``hub.gateway.localcache``:
    no sweep removes a folder an engine has open)."""

    def __init__(self, size: int, threads: int) -> None:
        self.size, self.threads = max(1, size), threads
        self.open: OrderedDict[tuple[Path, str], tuple[Any, Any]] = OrderedDict()

    def get(self, folder: Path, encoder: str = "", gguf: str = ""):
        """The generation model in ``folder``, or with ``encoder`` (an ONNX file's path in it), that text
        encoder (``hpcfair.embed``), or with ``gguf`` (a GGUF file's path in it), llama.cpp's server on it
        (``hpcfair.generate.llama``, started at its first request)."""
        from hpcfair.embed import open_encoder
        from hpcfair.generate import open_model

        from hub.gateway import localcache

        key = (folder, encoder or gguf and f"gguf:{gguf}")
        if key in self.open:
            self.open.move_to_end(key)
            return self.open[key][0]
        while len(self.open) >= self.size:
            _, (evicted, held) = self.open.popitem(last=False)
            getattr(evicted, "close", lambda: None)()  # a llama-server stops
            if held is not None:
                held.release()
        held = localcache.hold(folder)
        try:
            if gguf:
                loaded = self.llama(folder / gguf)
            else:
                loaded = open_encoder(folder, encoder, self.threads) if encoder else open_model(folder, self.threads)
        except BaseException:
            if held is not None:
                held.release()
            raise
        self.open[key] = (loaded, held)
        return loaded

    def llama(self, path: Path):
        from django.conf import settings
        from hpcfair.generate.llama import LlamaServer

        return LlamaServer(path, threads=self.threads, context=settings.HUB_LLAMA_CONTEXT,
                           memory=settings.HUB_GENERATE_MEMORY_BYTES, binary=settings.HUB_LLAMA_SERVER)


def handle(sock: socket.socket, message: bytes, models: Models, root: Path, memory: int = 0) -> None:
    """Answer one request piece by piece on ``sock`` (to the keeper); ``memory``: what the request may add to
    the process's data past its model's loading (``RLIMIT_DATA``)."""
    from hpcfair.compute import CodedError
    from hpcfair.generate import GenerateRequest, generate

    def send(payload: dict[str, Any]) -> None:
        wire.send_frame(sock, {}, orjson.dumps(payload))

    looked, stop = [0.0], [False]

    def cancelled() -> bool:
        """Whether the keeper said the caller went away (a ``cancel`` frame), looked at every CANCEL_EVERY_S."""
        now = time.monotonic()
        if not stop[0] and now - looked[0] > CANCEL_EVERY_S:
            looked[0] = now
            while select.select([sock], [], [], 0)[0]:
                found = wire.recv_frame(sock)
                stop[0] = stop[0] or found is None or bool(found[0].get("cancel"))
                if found is None:
                    break
        return stop[0]

    try:
        body = orjson.loads(message)
        deadline = time.time() + float(body.get("seconds", 300))  # every phase: folder, template, tokens, decoder
        if "embed" in body:  # /v1/embeddings: one answer with every vector
            encoder = models.get(model_folder(body["files"], root), str(body["embed"]["onnx"]))
            with data_limit(memory):
                vectors, count = encoder.embed(body["embed"]["inputs"], int(body.get("max_tokens", 0)))
            send({"done": True, "vectors": base64.b64encode(vectors.astype("<f4").tobytes()).decode(),
                  "shape": list(vectors.shape), "prompt_tokens": count})
            return
        request = GenerateRequest.parse(body["request"], max_tokens=int(body.get("max_tokens", 4096)))
        loaded = models.get(model_folder(body["files"], root), gguf=str(body.get("gguf", "")))
        run = loaded.generate if body.get("gguf") else partial(generate, loaded)  # llama.cpp's, or the hub's
        with data_limit(memory):
            for piece in run(request, cancelled=cancelled, deadline=time.monotonic() + max(deadline - time.time(), 0)):
                send(piece.to_dict())
    except CodedError as exc:
        send({"error": exc.code, "detail": exc.detail})
    except MemoryError:
        try:
            send({"error": "memory_limit", "detail": memory_message(memory)})
        except MemoryError:
            os._exit(EXIT_MEMORY)  # the keeper answers for us
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a tokenizer's panic too (a BaseException): answered, logged
        log.exception("generation request failed")
        send({"error": "run_failed", "detail": f"The model could not generate from this request "
                                               f"({type(exc).__name__}); nothing was kept. A tokenizer or chat "
                                               "template that fails on some text fails so."})


def memory_message(limit: int) -> str:
    return (f"The generation needed more memory than one request may use on this hub: {limit / 2**20:.0f} MiB "
            "(HUB_GENERATE_MEMORY_MB) past its model. Ask for fewer tokens or a shorter prompt; a chat template "
            "or tokenizer that builds huge strings is stopped so.")


@contextmanager
def data_limit(extra: int) -> Iterator[None]:
    """The process's data (``RLIMIT_DATA``) capped at what it holds now plus ``extra`` bytes while the block
    runs (no cap for 0): an allocation past it fails (``MemoryError`` in Python, a failed allocation in the
    libraries). The model is loaded before, under no cap: its size is the hub's own build's."""
    if extra <= 0:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    ceiling = data_bytes() + extra
    resource.setrlimit(resource.RLIMIT_DATA, (ceiling if hard == resource.RLIM_INFINITY else min(ceiling, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


# --- the keeper: the worker's door handler that owns an engine and stops it past its deadline ---------------

TIMEOUT = {"error": "worker_timeout", "detail": "The generation was stopped at its time limit (HUB_GENERATE_S); "
                                                "nothing was kept. Ask for fewer tokens, or a shorter prompt."}


class Keeper:
    """One generation engine of a worker, a door handler of ``generate-<device>`` (``hub.gateway.channel``):
    it sends each call to its child and forwards the pieces; past the call's deadline by ``GRACE_S`` it kills
    the child and answers ``worker_timeout``; for a child that died, ``memory_limit`` when it ran out of
    memory; when the caller goes away, it tells the child to stop. A new child is started when idle."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.sock: socket.socket | None = None

    def idle(self) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        if self.process is not None:
            log.error("generation engine %s ended (status %s); starting another", self.process.pid,
                      self.process.returncode)
        self.close()
        ours, theirs = socket.socketpair()
        try:
            self.process = subprocess.Popen([sys.executable, "-m", "hub.generation.engine", str(theirs.fileno())],
                                            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.sock = ours
        ready = select.select([ours], [], [], START_S)[0] and wire.recv_frame(ours)
        if not ready or ready[0].get("state") != "ready":
            raise OSError(f"the generation engine did not start (exit status {self.close()})")

    def __call__(self, call) -> None:
        run_s = float(call.control.get("seconds") or 0)  # from when its engine takes it, as the engine counts
        self.idle()
        assert self.sock is not None
        wire.send_frame(self.sock, {}, call.body[0].buffer)
        deadline, told = time.time() + run_s, False  # from now: a new engine's start is not the request's time
        while True:
            if call.cancelled and not told:
                wire.send_frame(self.sock, {"cancel": True}, b"")
                told = True
            left = deadline + GRACE_S - time.time()
            if left <= 0:
                log.error("generation engine %s stopped: a request ran past its deadline", self.process.pid)
                self.process.kill()
                self.close()
                call.reply(orjson.dumps(TIMEOUT))
                return self.idle()  # a new engine now, before the next request
            if not select.select([self.sock], [], [], min(left, CANCEL_EVERY_S))[0]:
                continue
            try:
                found = wire.recv_frame(self.sock)
            except OSError:
                found = None
            if found is None:
                return call.reply(orjson.dumps(self._died(self.close())))
            if found[0].get("end"):
                return None
            if not told:
                call.reply(bytes(found[1]))

    @staticmethod
    def _died(status: int | None) -> dict[str, Any]:
        from django.conf import settings

        log.error("generation engine ended (status %s) during a request", status)
        if status in (EXIT_MEMORY, -signal.SIGABRT, -signal.SIGKILL):
            return {"error": "memory_limit", "detail": memory_message(settings.HUB_GENERATE_MEMORY_BYTES)}
        return {"error": "run_failed", "detail": f"The generation engine ended (status {status}) before it "
                                                 "answered; nothing was kept. Try again."}

    def close(self) -> int | None:
        """Stop the child (and a llama-server it started); its exit status."""
        from hpcfair.generate.llama import stop

        if self.sock is not None:
            self.sock.close()
            self.sock = None
        process, self.process = self.process, None
        if process is None:
            return None
        stop(process)
        return process.wait()


def serve(fd: int) -> None:
    """Answer the keeper's requests until it goes away."""
    from django.conf import settings

    sock = socket.socket(fileno=fd)
    root = settings.VAR_DIR / "generation"
    root.mkdir(parents=True, exist_ok=True)
    models = Models(settings.HUB_GENERATE_MODELS, settings.HUB_GENERATE_THREADS)
    log.info("generation engine %s serving its worker", os.getpid())
    wire.send_frame(sock, {"state": "ready"}, b"")
    while (found := wire.recv_frame(sock)) is not None:
        if found[0].get("cancel"):
            continue  # for a request that has ended already
        handle(sock, bytes(found[1]), models, root, settings.HUB_GENERATE_MEMORY_BYTES)
        wire.send_frame(sock, {"end": True}, b"")


def main() -> int:
    from hub.runtime import die_with_parent

    die_with_parent()  # a worker killed while this engine loads or runs a model does not leave it behind
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    import django

    django.setup()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s generation %(levelname)s %(message)s")
    serve(int(sys.argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

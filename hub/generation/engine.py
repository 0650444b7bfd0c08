"""A worker's generation engine: a child process (``python -m hub.generation.engine QUEUE``) that takes
generation requests from the lane ``QUEUE`` (``generate-cpu``) and streams each answer back piece by piece
(``hub.gateway.lane.stream``). The Celery worker's gateway step starts it and starts another when it dies
(``workers.gateway``).

A request names the generation model's files (path, blob, size); the engine puts them in a folder of its
cache (``VAR_DIR/generation/<digest>``, hard links to a filesystem store's blobs, else copies) and keeps the
last ``HUB_GENERATE_MODELS`` models open. Messages are JSON: a piece ``{"text": …}``, the last one with
``"done": true`` and the totals, or ``{"error": code, "detail": …}``."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import socket
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger(__name__)
CANCEL_EVERY_S = 0.25  # how often a running generation looks whether its reader went away


def model_folder(files: list[list[Any]], root: Path) -> Path:
    """The model's files as a folder under ``root`` (made once per set of files)."""
    from hub.gateway import localcache
    from hub.storage import get_blob_store

    digest = hashlib.sha256(orjson.dumps(sorted(files))).hexdigest()[:24]
    folder = root / digest
    if (folder / localcache.MANIFEST).is_file() and all((folder / Path(path).name).is_file() for path, _, _ in files):
        localcache.touch(folder)
        return folder
    shutil.rmtree(folder, ignore_errors=True)  # made by an older engine, or in part
    store = get_blob_store()
    partial = root / f".{digest}.{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for path, sha256, _size in files:
        target = partial / Path(path).name
        local = store.local_path(sha256)
        try:  # a hard link (ONNX Runtime refuses weights a symbolic link leads out of the folder to)
            os.link(local, target) if local is not None else None
        except OSError:
            local = None  # another file system
        if local is None:
            with store.open(sha256) as body, target.open("wb") as out:
                shutil.copyfileobj(body, out, 1 << 20)
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
        self.open: OrderedDict[Path, tuple[Any, Any]] = OrderedDict()

    def get(self, folder: Path):
        from hpcfair.generate import open_model

        from hub.gateway import localcache

        if folder in self.open:
            self.open.move_to_end(folder)
            return self.open[folder][0]
        while len(self.open) >= self.size:
            _, (_, held) = self.open.popitem(last=False)
            if held is not None:
                held.release()
        held = localcache.hold(folder)
        try:
            loaded = open_model(folder, self.threads)
        except BaseException:
            if held is not None:
                held.release()
            raise
        self.open[folder] = (loaded, held)
        return loaded


def handle(lane, request_id: str, message: bytes, models: Models, root: Path) -> None:
    """Answer one request on ``lane``, piece by piece."""
    from hpcfair.compute import CodedError
    from hpcfair.generate import GenerateRequest, generate

    seq = 0

    def send(payload: dict[str, Any]) -> None:
        nonlocal seq
        lane.send(request_id, seq, orjson.dumps(payload))
        seq += 1

    looked, stop = [0.0], [False]

    def cancelled() -> bool:
        now = time.monotonic()
        if not stop[0] and now - looked[0] > CANCEL_EVERY_S:
            looked[0] = now
            stop[0] = lane.cancelled(request_id)
        return stop[0]

    try:
        body = orjson.loads(message)
        request = GenerateRequest.parse(body["request"], max_tokens=int(body.get("max_tokens", 4096)))
        loaded = models.get(model_folder(body["files"], root))
        deadline = time.monotonic() + float(body.get("seconds", 300))
        for piece in generate(loaded, request, cancelled=cancelled, deadline=deadline):
            send(piece.to_dict())
    except CodedError as exc:
        send({"error": exc.code, "detail": exc.detail})
    except Exception as exc:  # noqa: BLE001 - the reader is answered; the log has the trace
        log.exception("generation request %s failed", request_id)
        send({"error": "internal_error", "detail": f"Generation failed unexpectedly ({type(exc).__name__})."})


def serve(queue: str) -> None:
    """Take ``queue``'s requests until the parent (the worker) goes away."""
    from django.conf import settings

    from hub.gateway.lane import ANNOUNCE_S, get_lane

    lane = get_lane()
    root = settings.VAR_DIR / "generation"
    root.mkdir(parents=True, exist_ok=True)
    models = Models(settings.HUB_GENERATE_MODELS, settings.HUB_GENERATE_THREADS)
    me = f"{socket.gethostname()}:{os.getpid()}"
    parent = os.getppid()

    def announce() -> None:
        while os.getppid() == parent:
            try:
                lane.announce(queue, me)
            except Exception:  # noqa: BLE001 - a broker hiccup; try again at the next beat
                log.warning("generation engine: could not announce", exc_info=True)
            time.sleep(ANNOUNCE_S)
        os._exit(0)  # the worker is gone

    lane.announce(queue, me)
    threading.Thread(target=announce, daemon=True).start()
    log.info("generation engine %s serving %s", me, queue)
    try:
        while True:
            found = lane.pop([queue], 1.0)
            if found is not None:
                handle(lane, found[0], found[1], models, root)
    finally:
        lane.withdraw(queue, me)


def main() -> int:
    from hub.runtime import die_with_parent

    die_with_parent()  # a worker killed while this engine loads or runs a model does not leave it behind
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    import django

    django.setup()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s generation %(levelname)s %(message)s")
    serve(sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())

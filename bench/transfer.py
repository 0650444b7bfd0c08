"""Upload and download one large file, in one run: the machine's own baseline, then the hub's client on the
embedded default (filesystem store) and on the S3 backend (SeaweedFS); MB/s, % of the baseline, and the web
workers' memory growth.

    .venv/bin/python bench/transfer.py [--size-mib 1024] [--repeat 3]

Baseline: a plain static file server (``socket.sendfile``) answering ``curl -o FILE`` followed by
``sha256sum FILE`` (download), and ``curl -T FILE`` to a plain receiving server that writes the body to
disk in 8 MiB blocks (upload). The hub: ``hub_serve`` (granian + a Celery worker, SQLite) on a free
127.0.0.1 port, with ``HubClient.upload_file`` (sha256 computed while sending, checked by the hub before the
upload completes) and ``HubClient.download_file(cache=False)`` (sha256 checked before the file appears).
The S3 hub uses SeaweedFS started by ``scripts/services.sh start-s3``; its uploads go straight to the object
store by presigned multipart URLs and its downloads are redirected to presigned URLs. SeaweedFS's own speed
(``curl`` on presigned URLs) is printed beside it. Each figure is the
median of ``--repeat`` runs, each run starting after ``os.sync()``. Everything started is stopped by its PID
and the files are removed.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))

from hpcfair import HubClient  # noqa: E402

from tests.ports import free_port, free_ports  # noqa: E402

BLOCK = 8 * 1024 * 1024
METADATA = {"title": "bench blob", "description": "random bytes for bench/transfer.py", "creators": [{"name": "Bench"}],
            "license": "CC0-1.0"}


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def web_workers(serve_pid: int) -> list[int]:
    """The web server's worker processes: the children of hub_serve's granian child."""
    workers = []
    for child in children_of(serve_pid):
        if b"granian" in Path(f"/proc/{child}/cmdline").read_bytes():
            workers.extend(children_of(child))
    return workers


def timed(action: Callable[[], object], repeat: int, before: Callable[[], object] = lambda: None) -> float:
    """Median seconds of ``action`` over ``repeat`` runs, each after ``before`` and ``os.sync()``."""
    times = []
    for _ in range(repeat):
        before()
        os.sync()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# --- the baseline: plain servers and curl ---------------------------------------------------------------


def plain_server(root: Path) -> tuple[ThreadingHTTPServer, int]:
    """GET sends ``root/<name>`` with sendfile; PUT writes the body to ``root/<name>`` in 8 MiB blocks."""

    class Plain(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            path = root / self.path.lstrip("/")
            with open(path, "rb") as handle:
                self.send_response(200)
                self.send_header("Content-Length", str(path.stat().st_size))
                self.end_headers()
                self.connection.sendfile(handle)

        def do_PUT(self) -> None:
            remaining = int(self.headers["Content-Length"])
            buffer = memoryview(bytearray(BLOCK))
            with open(root / self.path.lstrip("/"), "wb") as out:
                while remaining > 0:
                    got = self.rfile.readinto(buffer[:min(BLOCK, remaining)])
                    if not got:
                        break
                    out.write(buffer[:got])
                    remaining -= got
            self.send_response(201)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def baseline(work: Path, source: Path, repeat: int) -> tuple[float, float]:
    """(download s, upload s) of the plain servers with curl; the download includes ``sha256sum``."""
    served = work / "served"
    served.mkdir()
    os.link(source, served / "file.bin")
    server, port = plain_server(served)
    out = work / "curl.bin"
    try:
        def download() -> None:
            subprocess.run(["curl", "-sSf", "-o", str(out), f"http://127.0.0.1:{port}/file.bin"], check=True)
            subprocess.run(["sha256sum", str(out)], check=True, capture_output=True)

        def upload() -> None:
            subprocess.run(["curl", "-sSf", "-T", str(source), "-o", "/dev/null",
                            f"http://127.0.0.1:{port}/received.bin"], check=True)

        down = timed(download, repeat, before=lambda: out.unlink(missing_ok=True))
        up = timed(upload, repeat, before=lambda: (served / "received.bin").unlink(missing_ok=True))
    finally:
        server.shutdown()
        shutil.rmtree(served, ignore_errors=True)
        out.unlink(missing_ok=True)
    return down, up


# --- the hub ------------------------------------------------------------------------------------------


def start_s3(work: Path) -> tuple[dict[str, str], dict[str, str]]:
    """SeaweedFS through scripts/services.sh: (the hub's S3 settings, the services' environment)."""
    env = {**os.environ, "HUB_TEST_RUN_DIR": str(work / "services"), "HUB_TEST_S3_PORT": str(free_ports(8))}
    out = subprocess.run([str(ROOT / "scripts" / "services.sh"), "start-s3"], env=env, capture_output=True,
                         text=True, check=True).stdout
    exported = dict(line.removeprefix("export ").split("=", 1) for line in out.splitlines())
    from minio import Minio

    store = Minio(exported["HUB_TEST_S3_ENDPOINT"], access_key=exported["HUB_TEST_S3_ACCESS_KEY"],
                  secret_key=exported["HUB_TEST_S3_SECRET_KEY"], secure=False)
    for bucket in ("raw", "bench"):  # SeaweedFS grows a bucket's first volume on its first write: not timed
        store.make_bucket(bucket)
        store.put_object(bucket, "warm-up", io.BytesIO(bytes(1 << 20)), 1 << 20)
        store.remove_object(bucket, "warm-up")
    return {"HUB_STORAGE": "s3", "HUB_S3_ENDPOINT": exported["HUB_TEST_S3_ENDPOINT"], "HUB_S3_BUCKET": "bench",
            "HUB_S3_ACCESS_KEY": exported["HUB_TEST_S3_ACCESS_KEY"],
            "HUB_S3_SECRET_KEY": exported["HUB_TEST_S3_SECRET_KEY"]}, env


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def store_run(work: Path, storage: dict[str, str], source: Path, repeat: int,
              weed: int) -> tuple[float, float, float]:
    """(download s, upload s, CPU s of ``weed`` per upload) of SeaweedFS itself with curl on presigned URLs:
    the store's own speed, and what one upload costs it in CPU (its ceiling on this machine's cores)."""
    from datetime import timedelta

    from minio import Minio

    store = Minio(storage["HUB_S3_ENDPOINT"], access_key=storage["HUB_S3_ACCESS_KEY"],
                  secret_key=storage["HUB_S3_SECRET_KEY"], secure=False)
    put = store.get_presigned_url("PUT", "raw", "file.bin", expires=timedelta(hours=1))
    get = store.get_presigned_url("GET", "raw", "file.bin", expires=timedelta(hours=1))
    out = work / "store.bin"

    def download() -> None:
        subprocess.run(["curl", "-sSf", "-o", str(out), get], check=True)
        subprocess.run(["sha256sum", str(out)], check=True, capture_output=True)

    cpu_before = cpu_seconds(weed)
    up = timed(lambda: subprocess.run(["curl", "-sSf", "-T", str(source), "-o", "/dev/null", put], check=True), repeat)
    cpu = (cpu_seconds(weed) - cpu_before) / repeat
    down = timed(download, repeat, before=lambda: out.unlink(missing_ok=True))
    out.unlink(missing_ok=True)
    store.remove_object("raw", "file.bin")
    return down, up, cpu


def hub_run(work: Path, name: str, storage: dict[str, str], source: Path, repeat: int) -> tuple[float, float, float]:
    """(download s, upload s, web workers' peak RSS growth in MB) of the hub's client on one backend."""
    port = free_port()
    var = work / f"var-{name}"
    env = {**os.environ, "HUB_VAR_DIR": str(var), "HUB_PUBLIC_URL": f"http://127.0.0.1:{port}",
           "HUB_LOG_LEVEL": "WARNING", **storage}
    for key in ("DATABASE_URL", "HUB_BROKER_URL"):
        env.pop(key, None)  # the embedded default's SQLite and broker; only the store differs
    python = sys.executable
    serve = subprocess.Popen([python, "manage.py", "hub_serve", "--bind", f"127.0.0.1:{port}", "--no-demo"],
                             cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or serve.poll() is not None:
                    raise SystemExit(f"the hub ({name}) did not start")
                time.sleep(0.2)
        token = subprocess.run([python, "manage.py", "hub_token", "bench", "--create", "--scope", "write"],
                               cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout.strip()
        client = HubClient(f"http://127.0.0.1:{port}", token)
        client.create_artifact("dataset", "bench-blob")
        workers = web_workers(serve.pid)
        assert workers, "no web worker processes found"
        rss_before = {pid: status_kib(pid, "VmRSS") for pid in workers}
        uploads: list[dict] = []

        def forget_blob() -> None:
            """Each upload starts from an empty store, as the baseline's receiver deletes its last file: the
            previous upload's blob and its staged copy go (no dedup shortcut, no pile of unwritten files)."""
            if not uploads:
                return
            sha = uploads[-1]["sha256"]
            key = f"{sha[:2]}/{sha[2:4]}/{sha}"
            (var / "uploads" / f"{uploads[-1]['id']}.part").unlink(missing_ok=True)
            if storage.get("HUB_STORAGE") != "s3":
                (var / "blobs" / key).unlink(missing_ok=True)  # a blob once a version holds it
                return
            from minio import Minio

            store = Minio(storage["HUB_S3_ENDPOINT"], access_key=storage["HUB_S3_ACCESS_KEY"],
                          secret_key=storage["HUB_S3_SECRET_KEY"], secure=False)
            data = store.stat_object("bench", key).metadata.get("x-amz-meta-hub-data")  # a direct upload's pointer
            store.remove_object("bench", key)
            if data:
                store.remove_object("bench", data)

        up = timed(lambda: uploads.append(client.upload_file(source)), repeat, before=forget_blob)
        assert all(u["state"] == "completed" for u in uploads)
        client.request("POST", "artifacts/bench/bench-blob/versions/",
                       json={"files": [{"path": "blob.bin", "upload": uploads[-1]["id"]}], "metadata": METADATA})
        dest = work / f"hub-{name}.bin"
        down = timed(lambda: client.download_file("bench/bench-blob", "latest", "blob.bin", dest, cache=False),
                     repeat, before=lambda: dest.unlink(missing_ok=True))
        assert dest.stat().st_size == source.stat().st_size
        dest.unlink()
        growth = max(status_kib(pid, "VmHWM") - rss_before[pid] for pid in workers) / 1024
        client.close()
    finally:
        if serve.poll() is None:
            os.kill(serve.pid, signal.SIGTERM)
            serve.wait(timeout=60)
    return down, up, growth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    size = args.size_mib * 1024 * 1024
    os.environ.setdefault("HPCFAIR_NO_PROGRESS", "1")
    work = Path(tempfile.mkdtemp(prefix="hub-bench-", dir=ROOT / "var" if (ROOT / "var").is_dir() else None))
    services = None
    try:
        source = work / "source.bin"
        with open(source, "wb") as out:
            for _ in range(size // BLOCK):
                out.write(os.urandom(BLOCK))
            out.write(os.urandom(size % BLOCK))
        base_down, base_up = baseline(work, source, args.repeat)
        fs = hub_run(work, "filesystem", {"HUB_STORAGE": "filesystem"}, source, args.repeat)
        s3_storage, services = start_s3(work)
        weed = int((Path(services["HUB_TEST_RUN_DIR"]) / "s3" / "weed.pid").read_text())
        raw = store_run(work, s3_storage, source, args.repeat, weed)
        s3 = hub_run(work, "s3", s3_storage, source, args.repeat)
    finally:
        if services is not None:
            subprocess.run([str(ROOT / "scripts" / "services.sh"), "stop-s3"], env=services, check=False)
        shutil.rmtree(work, ignore_errors=True)
    mb = size / 1e6
    print(f"# transfer of {args.size_mib} MiB on {platform.node()} ({os.cpu_count()} cores), "
          f"{time.strftime('%Y-%m-%d %H:%M')}, median of {args.repeat}")
    print(f"{'measure':54s} {'MB/s':>8s} {'of baseline':>12s}")
    rows = [("baseline download: curl -o + sha256sum", base_down, base_down),
            ("baseline upload: curl -T", base_up, base_up),
            ("hub client, filesystem: download (sha256 checked)", fs[0], base_down),
            ("hub client, filesystem: upload (sha256 checked)", fs[1], base_up),
            ("SeaweedFS itself: curl -o + sha256sum, presigned", raw[0], base_down),
            ("SeaweedFS itself: curl -T, presigned", raw[1], base_up),
            ("hub client, S3 (SeaweedFS): download (sha256 checked)", s3[0], base_down),
            ("hub client, S3 (SeaweedFS): upload (sha256 checked)", s3[1], base_up)]
    for name, seconds, reference in rows:
        print(f"{name:54s} {mb / seconds:8.0f} {reference / seconds:12.0%}")
    print(f"{'web worker peak RSS growth, filesystem / S3':54s} {fs[2]:6.1f} MB / {s3[2]:.1f} MB")
    cores = os.cpu_count() or 1
    print(f"hub client's S3 upload: {raw[1] / s3[1]:.0%} of SeaweedFS's own curl -T. SeaweedFS used {raw[2]:.1f} "
          f"CPU s per upload ({raw[2] / raw[1]:.1f} of {cores} cores), so {cores} cores cap its ingest near "
          f"{mb * cores / raw[2]:.0f} MB/s ({mb * cores / raw[2] / (mb / base_up):.0%} of the baseline upload)")


if __name__ == "__main__":
    main()

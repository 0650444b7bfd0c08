"""``snapshot_download`` (huggingface_hub, ``HF_ENDPOINT`` at the hub) against ``hpcfair``'s own download of the
same version, in one run on one hub: MB/s of each and the ratio (the target of issue 53: >= 85 %).

    .venv/bin/python bench/hf_download.py [--size-mib 1024] [--files 4] [--repeat 3]

The hub: ``hub_serve`` (granian + a Celery worker, SQLite, filesystem store) on a free 127.0.0.1 port. The
version: ``--files`` files of random bytes, ``--size-mib`` in all, published with the hpcfair client. hpcfair:
``HubClient.download_file(cache=False)`` per file (its ranged connections, sha256 checked). huggingface_hub:
``snapshot_download(local_dir=…)`` of the version by its label (its own workers, one stream per file), in this
process (``HF_ENDPOINT`` set before huggingface_hub is imported) as the hpcfair client is. Each figure
is the median of ``--repeat`` runs, each into an emptied folder after ``os.sync()``. The hub is stopped by its PID
and the files are removed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "client"), str(ROOT / "bench")]

from hpcfair import HubClient  # noqa: E402
from transfer import BLOCK, timed  # noqa: E402

from tests.ports import free_port  # noqa: E402

METADATA = {"title": "bench version", "description": "random bytes for bench/hf_download.py",
            "creators": [{"name": "Bench"}], "license": "CC0-1.0"}


def start_hub(var: Path) -> tuple[subprocess.Popen, str, dict[str, str]]:
    port = free_port()
    env = {**os.environ, "HUB_VAR_DIR": str(var), "HUB_PUBLIC_URL": f"http://127.0.0.1:{port}",
           "HUB_LOG_LEVEL": "WARNING", "HUB_STORAGE": "filesystem", "HUB_THROTTLE_ANON": "off",
           "HUB_THROTTLE_USER": "off"}
    for key in ("DATABASE_URL", "HUB_BROKER_URL"):
        env.pop(key, None)
    serve = subprocess.Popen([sys.executable, "manage.py", "hub_serve", "--bind", f"127.0.0.1:{port}", "--no-demo"],
                             cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return serve, f"http://127.0.0.1:{port}", env
        except OSError:
            if time.monotonic() > deadline or serve.poll() is not None:
                raise SystemExit("the hub did not start")
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("HPCFAIR_NO_PROGRESS", "1")
    work = Path(tempfile.mkdtemp(prefix="hub-bench-hf-"))
    serve = None
    try:
        serve, url, env = start_hub(work / "var")
        token = subprocess.run([sys.executable, "manage.py", "hub_token", "bench", "--create", "--scope", "write"],
                               cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout.strip()
        client = HubClient(url, token)
        client.create_artifact("dataset", "bench-version")
        each = args.size_mib * 1024 * 1024 // args.files
        names = [f"part-{i}.bin" for i in range(args.files)]
        uploads = []
        for name in names:
            source = work / name
            with open(source, "wb") as out:
                for _ in range(each // BLOCK):
                    out.write(os.urandom(BLOCK))
                out.write(os.urandom(each % BLOCK))
            uploads.append({"path": name, "upload": client.upload_file(source)["id"]})
            source.unlink()
        client.request("POST", "artifacts/bench/bench-version/versions/",
                       json={"files": uploads, "metadata": METADATA, "version": "1.0"})

        mine, theirs = work / "hpcfair", work / "hf"

        def empty(folder: Path) -> None:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()

        def hpcfair_download() -> None:
            for name in names:
                client.download_file("bench/bench-version", "1.0", name, mine / name, cache=False)

        # huggingface_hub reads HF_ENDPOINT when it is imported: set first, imported here, in this process as the
        # hpcfair client is (neither run pays a process's start).
        os.environ.update(HF_ENDPOINT=url, HF_TOKEN=token, HF_HOME=str(work / "hf-home"),
                          HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_TELEMETRY="1")
        from huggingface_hub import snapshot_download

        def hf_download() -> None:
            snapshot_download("bench/bench-version", repo_type="dataset", revision="1.0", local_dir=theirs)

        ours = timed(hpcfair_download, args.repeat, before=lambda: empty(mine))
        hf = timed(hf_download, args.repeat, before=lambda: empty(theirs))
        for name in names:
            assert (mine / name).read_bytes() == (theirs / name).read_bytes(), name
        client.close()
    finally:
        if serve is not None and serve.poll() is None:
            os.kill(serve.pid, signal.SIGTERM)
            serve.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    mb = args.size_mib * 1.048576
    print(f"version: {args.files} files, {args.size_mib} MiB; median of {args.repeat}")
    print(f"hpcfair download       {mb / ours:8.1f} MB/s ({ours:.2f} s)")
    print(f"snapshot_download      {mb / hf:8.1f} MB/s ({hf:.2f} s)")
    print(f"snapshot_download / hpcfair: {ours / hf:.0%} (target >= 85%)")


if __name__ == "__main__":
    main()

"""``podman pull`` of an image from the hub's OCI registry against ``podman load`` of the same image from a local
archive, in one run on one hub: seconds and MB/s of each and the ratio (the target of issue 53: >= 85 %).

    .venv/bin/python bench/oci_pull.py [--size-mib 256] [--repeat 3]

The hub: ``hub_serve`` (granian + a Celery worker, SQLite, filesystem store) on a free 127.0.0.1 port, as in
``bench/hf_download.py``. The image: a rootfs of ``--size-mib`` random bytes (one file) and a text file, made with
``podman import``, saved with ``podman save`` (docker-archive) and pushed to the hub with ``podman push``
(its layer gzip-compressed, as a worker's push is). Each figure is the median of ``--repeat`` runs, each after the
image is removed from podman's store and ``os.sync()``. The image, the archive and the hub are removed after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "client"), str(ROOT / "bench")]

from hf_download import start_hub  # noqa: E402
from transfer import BLOCK, timed  # noqa: E402

CONTAINERS_CONF = str(ROOT / "deploy" / "podman" / "containers.conf")


def podman(*args: str) -> str:
    done = subprocess.run(["podman", *args], capture_output=True, text=True,
                          env={**os.environ, "CONTAINERS_CONF": CONTAINERS_CONF}, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"podman {args[0]} failed: {done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hub-bench-oci-"))
    local = f"localhost/hpcfair-bench/oci-pull:{os.getpid()}"
    serve = remote = None
    try:
        serve, url, env = start_hub(work / "var")
        token = subprocess.run([sys.executable, "manage.py", "hub_token", "bench", "--create", "--scope", "write"],
                               cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout.strip()
        root = work / "rootfs"
        root.mkdir()
        (root / "hello.txt").write_text("bench/oci_pull.py\n")
        with open(root / "payload.bin", "wb") as out:
            for _ in range(args.size_mib * 1024 * 1024 // BLOCK):
                out.write(os.urandom(BLOCK))
        with tarfile.open(work / "rootfs.tar", "w") as tar:
            tar.add(root, arcname=".")
        shutil.rmtree(root)
        podman("import", str(work / "rootfs.tar"), local)
        (work / "rootfs.tar").unlink()
        archive = work / "image.tar"
        podman("save", "--format", "docker-archive", "-o", str(archive), local)
        remote = f"{url.removeprefix('http://')}/bench/oci-pull:1"
        podman("push", "--tls-verify=false", "--creds", f"bench:{token}", local, f"docker://{remote}")
        podman("rmi", "--force", local)

        def clear() -> None:
            subprocess.run(["podman", "rmi", "--force", local, remote], capture_output=True,
                           env={**os.environ, "CONTAINERS_CONF": CONTAINERS_CONF})

        load = timed(lambda: podman("load", "-i", str(archive)), args.repeat, before=clear)
        loaded = json.loads(podman("image", "inspect", local))[0]["RootFS"]["Layers"]
        pull = timed(lambda: podman("pull", "--tls-verify=false", "--creds", f"bench:{token}", remote),
                     args.repeat, before=clear)
        pulled = json.loads(podman("image", "inspect", remote))[0]["RootFS"]["Layers"]
        assert pulled == loaded, (pulled, loaded)  # the same layer contents (diff ids)
        size = archive.stat().st_size
    finally:
        subprocess.run(["podman", "rmi", "--force", local, *([remote] if remote else [])], capture_output=True,
                       env={**os.environ, "CONTAINERS_CONF": CONTAINERS_CONF})
        if serve is not None and serve.poll() is None:
            os.kill(serve.pid, signal.SIGTERM)
            serve.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    mb = size / 1e6
    print(f"image: {args.size_mib} MiB of random bytes in one layer ({mb:.0f} MB archive); median of {args.repeat}")
    print(f"podman load (archive)  {mb / load:8.1f} MB/s ({load:.2f} s)")
    print(f"podman pull (the hub)  {mb / pull:8.1f} MB/s ({pull:.2f} s)")
    print(f"podman pull / podman load: {load / pull:.0%} (target >= 85%)")


if __name__ == "__main__":
    main()

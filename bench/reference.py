"""Registering a large referenced file costs no more than reading it once (issue 58): in one run, a plain sha256
read of the file (the baseline: ``hashlib`` over 8 MiB blocks, what ``sha256sum`` does) against the hub's whole
registration, the ``reference`` job (the code a worker runs, here in this process) reading it where it lives for
its size and sha256, and publishing a version that takes it without a copy.

    .venv/bin/python bench/reference.py [--size-gib 10] [--repeat 1]

The file is sparse (``truncate``): no disk is used, and both sides read the same zero pages from the kernel, so
the figure is the hashing path's, not the disk's. The hub runs on SQLite in a temporary folder (migrated first,
not timed); the baseline and the registration alternate, each the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "client"))
BLOCK = 8 * 1024 * 1024


def plain_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gib", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-reference-"))
    lustre = scratch / "lustre"
    lustre.mkdir()
    os.environ.update({"HUB_VAR_DIR": str(scratch / "var"), "HUB_REFERENCE_ROOTS": str(lustre),
                       "DJANGO_SETTINGS_MODULE": "hub.settings"})
    for name in ("DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from hub.jobs import kinds
    from hub.jobs.models import Job
    from hub.jobs.runner import execute
    from hub.registry import services, uploads
    from hub.registry.models import Upload

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench")  # no password: it never signs in
    artifact = services.create_artifact(user, kind="dataset", name="campaign")
    big = lustre / "simulation.bin"
    with open(big, "wb") as handle:
        handle.truncate(int(args.size_gib * 1024**3))
    size = big.stat().st_size
    metadata = {"title": "Bench", "description": "bench/reference.py", "creators": [{"name": "Bench"}],
                "license": "CC0-1.0"}

    def register(run: int) -> str:
        upload = uploads.open_upload(user, 0, big.name)
        Upload.objects.filter(pk=upload.pk).update(source=str(big), reference=True)
        job = Job.objects.create(kind="reference", requester=user, params={"upload": str(upload.pk)})
        execute(str(job.pk), kinds.get("reference").run)
        job.refresh_from_db()
        assert job.state == "succeeded", (job.error_code, job.error)
        version = services.create_version(artifact, user, files=uploads.completed_files(user, "simulation.bin",
                                                                                       str(upload.pk)),
                                          label=f"r{run}", metadata=metadata)
        services.delete_version(version)  # the next run publishes the same content again
        return job.result["sha256"]

    plain, hub = [], []
    for run in range(args.repeat):
        os.sync()
        started = time.perf_counter()
        expected = plain_sha256(big)
        plain.append(time.perf_counter() - started)
        started = time.perf_counter()
        got = register(run)
        hub.append(time.perf_counter() - started)
        assert got == expected
    base, ours = statistics.median(plain), statistics.median(hub)
    print(f"file: {size / 1024**3:.1f} GiB, sparse; median of {args.repeat}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"plain sha256 read        {size / base / 1e6:8.1f} MB/s ({base:.2f} s)")
    print(f"registering by reference {size / ours / 1e6:8.1f} MB/s ({ours:.2f} s)")
    print(f"registration / one read: {ours / base:.2f} (target <= 1.00)")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Server time of the web pages on the seeded demo (the embedded default, as `make run` serves it).

    .venv/bin/python bench/web.py [--extra 200] [--repeat 30]

1. Starts `manage.py hub_serve` on a fresh var/ folder and waits until the demo's jobs (the demo model's
   conversion and its MLCube) are done, then stops it.
2. Adds ``--extra`` public models (one version each, with a model card) so that browsing has pages.
3. Times each page in this process through Django's whole stack (middleware, view, queries, template)
   on the same SQLite file, ``--repeat`` times after one warm-up, as the demo user or a visitor.

Printed: p50/p95/max per page in ms and p50 as a ratio to the login page (the simplest page, the
baseline measured in the same run). Target: no page's p95 above 300 ms.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ports import free_port  # noqa: E402

TARGET_MS = 300.0


def serve_demo(var: Path, timeout: float = 600) -> None:
    """Run the embedded hub until the demo content and its jobs are ready."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"}}
    env.update(HUB_VAR_DIR=str(var), HUB_CUBE_ON_CONVERT="generate")
    log = open(var / "serve.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "manage.py", "hub_serve", "--bind", f"127.0.0.1:{free_port()}"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        import sqlite3

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(2)
            try:
                with sqlite3.connect(var / "hub.sqlite3") as db:
                    states = [row[0] for row in db.execute("select state from jobs_job")]
            except sqlite3.Error:
                continue
            if len(states) >= 2 and all(s in {"succeeded", "failed"} for s in states):
                print(f"demo ready: jobs {states}")
                return
        raise SystemExit("the demo's jobs did not finish in time; see " + str(var / "serve.log"))
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()


def seed(extra: int) -> None:
    from django.contrib.auth.models import User

    from hub.registry import services
    from hub.registry.uploads import StagedFile

    owner, _ = User.objects.get_or_create(username="bench")
    folder = Path(tempfile.mkdtemp(prefix="bench-web-"))
    for i in range(extra):
        artifact = services.create_artifact(owner, kind="model", name=f"model-{i:04d}", title=f"Bench model {i}",
                                            description=f"Synthetic model number {i} for page timing.")
        card = (f"---\nlicense: MIT\n---\n# Bench model {i}\n\nA card with a table.\n\n"
                f"| a | b |\n|---|---|\n| {i} | 2 |\n")
        staged = []
        for path, data in (("weights.bin", os.urandom(256)), ("README.md", card.encode())):
            target = folder / f"{i}-{path}"
            target.write_bytes(data)
            staged.append(StagedFile(path=path, staged=target, sha256=hashlib.sha256(data).hexdigest(),
                                     size=len(data)))
        services.create_version(artifact, owner, files=staged, label="1", metadata={
            "description": f"Synthetic model {i}.", "creators": [{"name": "Bench"}], "framework": "pytorch",
            "task": ["regression", "segmentation", "forecasting"][i % 3], "keywords": ["bench", f"k{i % 7}"]})


def time_page(client, url: str, repeat: int) -> list[float]:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    var = Path(tempfile.mkdtemp(prefix="bench-web-var-"))
    for name in ("DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"):
        os.environ.pop(name, None)
    os.environ.update(HUB_VAR_DIR=str(var), DJANGO_SETTINGS_MODULE="hub.settings")
    serve_demo(var)
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.test import Client

    from hub.jobs.models import Job
    from hub.registry.models import Artifact

    seed(args.extra)
    demo = User.objects.get(username="demo")
    visitor, user = Client(), Client()
    user.force_login(demo)
    model = Artifact.objects.get(owner=demo, name="iris-classifier")
    job = Job.objects.filter(requester=demo).first()
    pages = [
        ("login (baseline)", visitor, "/accounts/login/"),
        ("home", visitor, "/"),
        ("home, signed in", user, "/"),
        ("browse", visitor, "/browse/"),
        ("browse: text + facet", visitor, "/browse/?q=model&kind=model&task=regression"),
        ("browse: page 5 by name", visitor, "/browse/?sort=name&page=5"),
        ("landing: model (concept)", visitor, "/landing/" + model.pid),
        ("landing: model, signed in", user, "/landing/" + model.pid),
        ("landing: uploaded version", user, "/landing/" + model.versions.get(label="1.0").pid),
        ("landing: dataset", visitor, "/landing/" + Artifact.objects.get(name="synthetic-iris").pid),
        ("landing: project", visitor, "/landing/" + Artifact.objects.get(name="linear-regression-project").pid),
        ("publish form", user, "/publish/"),
        ("jobs", user, "/jobs/"),
        ("job", user, f"/jobs/{job.pk}/"),
        ("account", user, "/account/"),
    ]
    print(f"# web pages, {platform.node()}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"SQLite, demo + {args.extra} models, {args.repeat} requests each")
    print(f"{'page':32} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'x login':>8}")
    baseline = None
    worst = 0.0
    for label, client, url in pages:
        times = sorted(time_page(client, url, args.repeat))
        p50, p95 = statistics.median(times), times[int(0.95 * (len(times) - 1))]
        baseline = baseline or p50
        worst = max(worst, p95)
        print(f"{label:32} {p50:8.1f} {p95:8.1f} {times[-1]:8.1f} {p50 / baseline:8.1f}")
    verdict = "met" if worst < TARGET_MS else "NOT met"
    print(f"slowest p95: {worst:.1f} ms (target: under {TARGET_MS:.0f} ms) -> {verdict}")


if __name__ == "__main__":
    main()

"""Two versions of the hub's code side by side on the synchronous path: which one answers faster.

    git worktree add /tmp/hub-before main   # or: git archive main | tar -x -C /tmp/hub-before
    .venv/bin/python bench/infer_ab.py /tmp/hub-before [--single 1000]

One scratch hub (as ``bench/infer.py`` sets it up, with its functions), one Celery worker of this tree, and
two granian servers with the express path: one serving the tree named on the command line ("before"), one
this tree ("after"). The same requests go to both in alternating blocks of 100, so that a noisy machine's
slow periods fall on both alike; p50 and p95 per model and body. Set ``AB_ORDER=after-first`` to send each
block to this tree first. Useful for a change of the web side that must not slow it down (bench/RESULTS.md,
issue 28). Needs the lane's message format (``hub/gateway/wire.py``) to be the same in both trees.

With ``--workers-too`` each tree also has its own Celery worker, on a lane of its own (Redis database 5 for
"before", ``HUB_GATEWAY_URL``): for a change of the worker side (issue 38's engine processes).

With ``--orgs 10000 --memberships 100000`` (issue 52) this tree's code also seeds that many organizations and
memberships, and "after" runs the same models published by the organization ``lab`` at the ``organization``
visibility, the bench's person a member with the read role (the read rule's organization path), while
"before" runs them as their owner's, as the code before organizations knows them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import infer as bench  # noqa: E402 - after the path is set


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="the other tree (with its .venv or this one's)")
    parser.add_argument("--single", type=int, default=1000, help="requests per series")
    parser.add_argument("--workers-too", action="store_true", help="a worker of each tree, on its own lane")
    parser.add_argument("--orgs", type=int, default=0, help="seed organizations; after runs an organization's models")
    parser.add_argument("--memberships", type=int, default=100_000, help="with --orgs: memberships to seed")
    args = parser.parse_args()
    from hub.web.server import web_command

    before = args.before.resolve()
    env = bench.services_env()
    env.update({"HUB_STORAGE": "filesystem", "HUB_LOG_LEVEL": "WARNING", "HUB_CUBE_ON_CONVERT": "off",
                **bench.RATES})
    work = Path(tempfile.mkdtemp(prefix="hub-bench-ab-"))
    env.update({"HUB_VAR_DIR": str(work / "var"), "HUB_STORAGE_DIR": str(work / "blobs")})
    bench.psql(env, f"DROP DATABASE IF EXISTS {bench.DB}")
    bench.psql(env, f"CREATE DATABASE {bench.DB}")
    python = str(ROOT / ".venv/bin/python")
    here = {**env, "PYTHONPATH": f"{ROOT}:{ROOT / 'client'}"}
    procs: list[subprocess.Popen] = []
    try:
        token = bench.setup_hub(here, work)
        owners = {"before": "bench", "after": "bench"}
        if args.orgs:
            seed_orgs(here, work, args.orgs, args.memberships)
            owners["after"] = "lab"
        lanes = {"after": env["HUB_BROKER_URL"], "before": env["HUB_BROKER_URL"]}
        if args.workers_too:
            lanes["before"] = env["HUB_BROKER_URL"].rsplit("/", 1)[0] + "/5"
        for side, tree in (("after", ROOT), ("before", before))[:2 if args.workers_too else 1]:
            procs.append(subprocess.Popen([python, "-m", "celery", "-A", "workers", "worker", "-Q", "convert,cpu",
                                           "--concurrency", "1", "--loglevel", "WARNING", "--hostname",
                                           f"{side}@%h"], cwd=tree,
                                          env={**here, "PYTHONPATH": f"{tree}:{tree / 'client'}",
                                               "HUB_GATEWAY_URL": lanes[side]},
                                          stdout=open(work / f"worker-{side}.log", "w"), stderr=subprocess.STDOUT))
        port = 19000 + os.getpid() % 500
        ports = {"after": port, "before": port + 1}
        for tree, web_port in ((ROOT, ports["after"]), (before, ports["before"])):
            procs.append(subprocess.Popen(web_command(python, f"127.0.0.1:{web_port}", 2), cwd=tree,
                                          env={**env, "PYTHONPATH": f"{tree}:{tree / 'client'}",
                                               "HUB_GATEWAY_EXPRESS": "1",
                                               "HUB_GATEWAY_URL": lanes["before" if tree == before else "after"]},
                                          stdout=open(work / f"web-{web_port}.log", "w"), stderr=subprocess.STDOUT))
            bench.wait_port(web_port, timeout=300)  # granian starting on a loaded machine
        for url in set(lanes.values()):
            bench.wait_worker(url)
        bench.wait_jobs(env)
        order = ["after", "before"] if os.environ.get("AB_ORDER") == "after-first" else ["before", "after"]
        print(f"# bench/infer_ab.py {time.strftime('%Y-%m-%d %H:%M')}: before {before}, after {ROOT}"
              f"{' (web and worker)' if args.workers_too else ' (web; one worker of this tree)'}; "
              f"{args.single} requests per series, blocks of 100, {order[0]} first; load {os.getloadavg()}")
        print("| model | body | before p50 ms | after p50 ms | before p95 ms | after p95 ms |")
        print("|---|---|---|---|---|---|")
        for name, shape, input_name in (("mlp", (1, 784), "x"), ("cnn", (1, 1, 28, 28), "image")):
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            for kind in ("npy", "json"):
                body, content_type = bench.request_body(kind, input_name, x)
                paths = {side: f"/api/v1/artifacts/{owners[side]}/{name}/versions/latest/infer" for side in order}
                series = bench.interleaved_targets(
                    [bench.Target(side, ports[side], paths[side], token, body, content_type) for side in order],
                    args.single, f"see {work}")
                series = {ports[side]: series[side] for side in order}
                was, now = series[ports["before"]][0], series[ports["after"]][0]
                figures = [bench.percentile(times, q) * 1e3 for q in (.5, .95) for times in (was, now)]
                print(f"| {name} | {kind} | " + " | ".join(f"{value:.3f}" for value in figures) + " |", flush=True)
        print(f"# load at the end {os.getloadavg()}")
    finally:
        bench.stop_all(procs, env)


SEED_ORGS = """
import random, sys
import onnx
sys.path.insert(0, '.')
from pathlib import Path
from django.contrib.auth import get_user_model
from hub.orgs.models import Membership, Organization
from hub.orgs.services import create_organization
from hub.registry import services
from hub.registry.uploads import StagedFile, sha256_of_file
from tests.gateway import models
User = get_user_model()
rng = random.Random(7)
bench = User.objects.get(username='bench')
lab = create_organization(bench, 'lab')
Membership.objects.filter(org=lab, user=bench).update(role='read')
accounts = User.objects.bulk_create([User(username=f'org{i}') for i in range(ORGS - 1)], batch_size=5000)
Organization.objects.bulk_create([Organization(account=a) for a in accounts], batch_size=5000)
people = User.objects.bulk_create([User(username=f'member{i}') for i in range(10000)], batch_size=5000)
pairs = {(a.pk, bench.pk) for a in rng.sample(accounts, 49)}
while len(pairs) < MEMBERSHIPS - 1:
    pairs.add((rng.choice(accounts).pk, rng.choice(people).pk))
Membership.objects.bulk_create([Membership(org_id=o, user_id=u, role=rng.choice(['read', 'write', 'admin']))
                                for o, u in pairs], batch_size=10000)
for name, build in (('mlp', models.mlp), ('cnn', models.cnn)):
    path = Path(WORK) / f'{name}-lab.onnx'
    model = onnx.load_from_string(build())
    model.doc_string = 'lab'  # the same network, not the same bytes (a version identical to one is refused)
    path.write_bytes(model.SerializeToString())
    artifact = services.create_artifact(lab.account, kind='model', name=name, title=name, visibility='organization')
    services.create_version(artifact, bench, files=[StagedFile(f'{name}.onnx', path, sha256_of_file(path),
                            path.stat().st_size)], metadata={'title': name, 'description': 'bench',
                            'creators': [{'name': 'B'}], 'license': 'MIT', 'framework': 'onnx',
                            'task': 'classification'})
print(Organization.objects.count(), Membership.objects.count())
"""


def seed_orgs(env: dict[str, str], work: Path, orgs: int, memberships: int) -> None:
    """``orgs`` organizations and ``memberships`` members (10,000 people; the bench's person in 50, read in
    ``lab``), and the bench's models published again by ``lab`` at the organization visibility."""
    script = SEED_ORGS.replace("ORGS", str(orgs)).replace("MEMBERSHIPS", str(memberships)).replace(
        "WORK", repr(str(work)))
    out = subprocess.run([str(ROOT / ".venv/bin/python"), "manage.py", "shell", "-c", script], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"seeding the organizations failed:\n{out.stderr[-3000:]}")
    print(f"# seeded organizations and memberships: {out.stdout.split()[-2:]}", flush=True)


if __name__ == "__main__":
    main()

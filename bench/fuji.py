"""F-UJI 3.5.1 (FAIRsFAIR metrics v0.5), offline, on every kind of public landing page of the demo hub.

    .venv/bin/python bench/fuji.py install --source PATH   # once: .venv-fuji with F-UJI 3.5.1, pinned
    .venv/bin/python bench/fuji.py [--json out.json] [--keep]

F-UJI is not on PyPI (the ``fuji`` there is another project): ``--source`` is a checkout of
https://github.com/pangaea-data-publisher/fuji at tag v3.5.1 (commit 9227fab…). ``install`` makes a
separate virtual environment, ``.venv-fuji`` (git-ignored; F-UJI pins numpy 1.26 and lxml 5.3), installs the
versions ``bench/fuji-requirements.txt`` names and then F-UJI itself without dependencies.

The run:
1. starts ``manage.py hub_serve`` on 127.0.0.1 (a fresh var/ folder, the demo content: a dataset, two models,
   a project) and waits until the demo's conversions are done (the ONNX versions);
2. starts F-UJI's own server from ``.venv-fuji`` on 127.0.0.1 (its ``debug_mode``: no downloads of external
   lists; this machine reaches no registry anyway, so re3data, DataCite and GitHub look-ups find nothing);
3. asks F-UJI to assess the PID URL of every public page: each version of the dataset, the models (and
   their ONNX versions) and the project, and each artifact's concept PID (which points to its latest version);
4. publishes, as the demo user over the API, three versions of a held-out random forest (a pickle and a
   ``.npy`` of sample inputs) with YAML metadata and no card: one open (the hub writes its README.md, issue
   55), one whose files are restricted and one embargoed for a year (issue 54: metadata open, bytes not), and
   assesses their PID URLs too;
5. prints each page's FAIR score (per cent of the metrics' points), each metric's points (with the tests
   not passed), the size of the page's Link header, and the target: every page at least 91.7 %.
"""

from __future__ import annotations

import argparse
import configparser
import io
import json
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ports import free_port  # noqa: E402

VENV = ROOT / ".venv-fuji"
PINS = ROOT / "bench" / "fuji-requirements.txt"
VERSION = "3.5.1"
TARGET = 91.7
USER, PASSWORD = "marvel", "wonderwoman"  # F-UJI's built-in user (fuji_server/config/users.py)


def install(source: Path) -> None:
    """``.venv-fuji`` with F-UJI ``VERSION`` from ``source`` and the pinned versions of its dependencies."""
    text = (source / "pyproject.toml").read_text()
    if f'version = "{VERSION}"' not in text or 'name = "fuji"' not in text:
        raise SystemExit(f"{source} is not F-UJI {VERSION} (git checkout v{VERSION} in a clone of "
                         "https://github.com/pangaea-data-publisher/fuji)")
    if not VENV.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    # F-UJI reads its own version from the pyproject.toml beside its package: keep the source with the venv.
    copy = VENV / "src" / "fuji"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".git", "tests", "docs"))
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "-r", str(PINS)], check=True)
    subprocess.run([*pip, "--no-deps", "-e", str(copy)], check=True)
    print(f"F-UJI {VERSION} installed in {VENV}")


def wait_for_demo(var: Path, base: str, proc: subprocess.Popen, timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"hub_serve stopped; see {var / 'serve.log'}")
        time.sleep(2)
        try:
            with sqlite3.connect(var / "hub.sqlite3") as db:
                states = [row[0] for row in db.execute("select state from jobs_job")]
            ready = requests.get(f"{base}/healthz", timeout=5).status_code == 200
        except (sqlite3.Error, requests.RequestException):
            continue
        if ready and states and all(s in {"succeeded", "failed"} for s in states):
            print(f"demo ready: jobs {states}")
            return
    raise SystemExit(f"the demo's jobs did not finish in time; see {var / 'serve.log'}")


KINDS = ["dataset", "model", "onnx version", "project", "concept"]


def pages(base: str) -> list[tuple[str, str]]:
    """(kind of page, PID URL) of every public version (dataset, model, ONNX version, project) and every
    artifact's concept PID (which always points to its latest version)."""
    found: list[tuple[str, str]] = []
    artifacts = requests.get(f"{base}/api/v1/artifacts/", params={"page_size": 100}, timeout=30).json()
    for artifact in artifacts.get("results", artifacts) if isinstance(artifacts, dict) else artifacts:
        owner, name = artifact["owner"], artifact["name"]
        data = requests.get(f"{base}/api/v1/artifacts/{owner}/{name}/versions/", timeout=30).json()
        for version in data.get("results", data) if isinstance(data, dict) else data:
            fmt = str((version.get("metadata") or {}).get("format", "")).lower()
            kind = "onnx version" if artifact["kind"] == "model" and fmt == "onnx" else artifact["kind"]
            found.append((kind, version["pid_url"]))
        found.append(("concept", artifact["pid_url"]))
    missing = [kind for kind in KINDS if kind not in {k for k, _ in found}]
    if missing:
        raise SystemExit(f"the demo has no public {', '.join(missing)}")
    return sorted(found, key=lambda page: KINDS.index(page[0]))


FOREST_YAML = """\
title: Held-out random forest ({access})
description: A random forest fitted on a held-out split of random measurements, published by bench/fuji.py.
creators:
  - name: Demo Researcher
license: CC0-1.0
keywords: [tabular, classification, random-forest]
framework: scikit-learn
task: classification
"""
# (kind of page, artifact name, its files access): the same model, three ways of giving its files.
HELD_OUT = (("open, no card", "forest-open", {}), ("restricted", "forest-restricted", {"files_access": "restricted"}),
            ("embargoed", "forest-embargoed", {"files_access": "embargoed"}))


def forest(seed: int) -> dict[str, bytes]:
    """A fitted random forest as a pickle, and sample inputs as .npy (another seed: other bytes)."""
    import pickle

    import numpy as np
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(120, 4)).astype("float32")
    model = RandomForestClassifier(n_estimators=8, max_depth=4, random_state=seed).fit(x, (x[:, 0] > 0).astype(int))
    sample = io.BytesIO()
    np.save(sample, x[:4])
    return {"model.pkl": pickle.dumps(model), "sample_inputs.npy": sample.getvalue()}


def publish_held_out(base: str, env: dict[str, str]) -> list[tuple[str, str]]:
    """Publish the ``HELD_OUT`` versions as the demo user; (kind of page, PID URL) of each."""
    token = subprocess.run([sys.executable, "manage.py", "hub_token", "demo", "--scope", "write", "--name", "fuji"],
                           cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout.split()[-1]
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    api, found = f"{base}/api/v1/artifacts", []
    for seed, (kind, name, access) in enumerate(HELD_OUT):
        session.post(f"{api}/", json={"kind": "model", "name": name}, timeout=30).raise_for_status()
        published = session.post(f"{api}/demo/{name}/versions/", data={"metadata": FOREST_YAML.format(access=kind)},
                                 files=[("files", (path, data)) for path, data in forest(seed).items()], timeout=300)
        published.raise_for_status()
        if access:
            if access["files_access"] == "embargoed":
                access = {**access, "embargo_until": (datetime.now(UTC) + timedelta(days=365)).isoformat()}
            session.put(f"{api}/demo/{name}/versions/1/access", json=access, timeout=30).raise_for_status()
        files = sorted(f["path"] for f in published.json()["files"])
        print(f"published demo/{name}@1 ({kind}): {', '.join(files)}")
        found.append((kind, published.json()["pid_url"]))
    return found


def start_fuji(work: Path) -> tuple[subprocess.Popen, str]:
    package = VENV / "src" / "fuji" / "fuji_server"
    if not (VENV / "bin" / "python").exists() or not package.exists():
        raise SystemExit("no .venv-fuji: run bench/fuji.py install --source <F-UJI 3.5.1 checkout>")
    config = configparser.ConfigParser()
    config.read(package / "config" / "server.ini")
    port = free_port()
    config["SERVICE"].update(service_host="127.0.0.1", service_port=str(port), debug_mode="true",
                             rate_limit="1000 per minute")
    ini = work / "fuji.ini"
    with ini.open("w") as out:
        config.write(out)
    log = (work / "fuji.log").open("w")
    proc = subprocess.Popen([str(VENV / "bin" / "python"), "-m", "fuji_server", "-c", str(ini)], cwd=work,
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/fuji/api/v1"
    for _ in range(120):
        time.sleep(1)
        if proc.poll() is not None:
            raise SystemExit(f"F-UJI stopped; see {work / 'fuji.log'}")
        try:
            requests.get(f"{url}/metrics", auth=(USER, PASSWORD), timeout=5)
            return proc, url
        except requests.RequestException:
            continue
    raise SystemExit(f"F-UJI did not start; see {work / 'fuji.log'}")


def assess(fuji: str, target: str) -> dict:
    body = {"object_identifier": target, "test_debug": True, "metadata_service_endpoint": "",
            "metadata_service_type": "oai_pmh", "use_datacite": False, "use_github": False,
            "metric_version": "metrics_v0.5"}
    response = requests.post(f"{fuji}/evaluate", json=body, auth=(USER, PASSWORD), timeout=900)
    response.raise_for_status()
    return response.json()


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def report(kind: str, url: str, result: dict) -> float:
    score = float(result["summary"]["score_percent"]["FAIR"])
    print(f"\n{kind}: {url}\n  FAIR {score:.1f} %  (F {result['summary']['score_percent']['F']}, "
          f"A {result['summary']['score_percent']['A']}, I {result['summary']['score_percent']['I']}, "
          f"R {result['summary']['score_percent']['R']})")
    for metric in result["results"]:
        earned, total = metric["score"]["earned"], metric["score"]["total"]
        failed = [test["metric_test_name"] for test in metric.get("metric_tests", {}).values()
                  if test.get("metric_test_status") != "pass"]
        note = f"  not passed: {'; '.join(failed)}" if failed and earned < total else ""
        print(f"  {metric['metric_identifier']:<16} {earned}/{total}{note}")
    return score


def run(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-fuji-"))
    var = work / "var"
    var.mkdir()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"}}
    env.update(HUB_VAR_DIR=str(var), HUB_PUBLIC_URL=base)
    log = (var / "serve.log").open("w")
    hub = subprocess.Popen([sys.executable, "manage.py", "hub_serve", "--bind", f"127.0.0.1:{port}"], cwd=ROOT,
                           env=env, stdout=log, stderr=subprocess.STDOUT)
    fuji = None
    try:
        wait_for_demo(var, base, hub)
        listed = pages(base) + publish_held_out(base, env)
        fuji, fuji_url = start_fuji(work)
        print(f"F-UJI {VERSION}, metrics v0.5, offline; hub {base}; {platform.node()}, "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        results, scores = {}, []
        for kind, url in listed:
            start = time.monotonic()
            results[url] = assess(fuji_url, url)
            scores.append((kind, url, report(kind, url, results[url])))
            link = requests.get(url, headers={"Accept": "text/html"}, timeout=30).headers.get("Link", "")
            print(f"  the landing page's Link header: {len(link.encode())} bytes")
            print(f"  ({time.monotonic() - start:.0f} s)")
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
        print(f"\nFAIR score per page (target >= {TARGET} %, F-UJI's own figure to one decimal):")
        for kind, url, score in scores:
            print(f"  {kind:<14} {score:5.1f} %  {'ok' if round(score, 1) >= TARGET else 'BELOW'}  {url}")
        return 0 if all(round(score, 1) >= TARGET for *_, score in scores) else 1
    finally:
        if fuji is not None:
            stop(fuji)
        stop(hub)
        log.close()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    setup = sub.add_parser("install", help="make .venv-fuji with F-UJI 3.5.1")
    setup.add_argument("--source", type=Path, required=True, help="a checkout of F-UJI at tag v3.5.1")
    parser.add_argument("--json", help="write F-UJI's whole answers here")
    parser.add_argument("--keep", action="store_true", help="keep the hub's and F-UJI's folders and logs")
    args = parser.parse_args()
    if args.command == "install":
        install(args.source)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())

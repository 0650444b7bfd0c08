"""Search latency at scale: seeds N artifacts, each with one version, into a PostgreSQL database of its
own, then times a mix of queries through the whole API stack (view, search, facet counts, serializers).

    eval "$(scripts/services.sh start)"; .venv/bin/python bench/search.py [--versions 100000] [--queries 200]
    .venv/bin/python bench/search.py --sqlite [--versions 200000]   # the embedded default (FTS5)
    HUB_SEARCH_ENGINE=words .venv/bin/python bench/search.py --sqlite --reuse   # its word matching (LIKE)

The database ``hpcfair_bench`` (on the server of DATABASE_URL) is dropped and rebuilt unless
``--reuse`` is given and it already holds the corpus; with ``--sqlite`` the corpus is an SQLite file under
``var/bench-sqlite/`` instead (the embedded default's database). Text is drawn from a Zipf-distributed
vocabulary, so some words are common and most are rare, as in real catalogues. The query mix: full
text (1-2 words), full text + a facet filter, facet filters only, a tag filter, and plain browsing;
every query also computes the facet counts. Printed: p50/p95/max per kind and over all queries, and the
time and memory it takes the host's indexer to build and publish the search index's base
(``hub.search.index_copy``, ``hub.search.mapped``), the base's size on disk (memory per host), what a web
process that starts takes to map it and how much memory of its own it then holds, and what the first query
after 1, 100 and 500 changed entries costs (it loads them as a delta).

Organizations (issue 52): ``--orgs 10000 --memberships 100000`` also seeds that many organizations and
memberships; the organizations own 40 % of the artifacts, and the visibility levels are spread by artifact id
(60 % public, 10 % internal, 20 % the organization's members, 10 % private). ``--compare TREE`` then times the
query mix, anonymously and signed in as ``user0`` (a member of 50 of the organizations: the read rule's
expensive path), in child processes that alternate between this tree's code and TREE's (for example the code
before issue 52, ``git worktree add --detach /tmp/base52 7f677f3``), on the same database, and prints the
ratios. TREE's code reads the organizations' rows as it reads any owner, and the new visibility levels as
private (the only other level it knows):

    .venv/bin/python bench/search.py --versions 1000000 --replicate 10 --orgs 10000 --memberships 100000 \
        --compare /tmp/base52 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = Path(os.environ.get("BENCH_TREE") or ROOT)  # whose hub/ a --compare child imports
sys.path.insert(0, str(CODE))

FRAMEWORKS = ["pytorch", "tensorflow", "keras", "scikit-learn", "onnx", "jax"]
TASKS = ["image-classification", "segmentation", "regression", "forecasting", "text-generation",
         "object-detection", "anomaly-detection", "surrogate-model"]
LICENSES = ["MIT", "Apache-2.0", "CC-BY-4.0", "BSD-3-Clause", "GPL-3.0-only", "CC0-1.0"]
FORMATS = {"pytorch": "torchscript", "tensorflow": "savedmodel", "keras": "keras", "scikit-learn": "joblib",
           "onnx": "onnx", "jax": "msgpack"}
GPUS = ["A100", "H100", "V100", "MI250X"]
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zen", "phy", "chem", "bio", "geo", "astro", "quant",
             "neur", "hydro", "cli", "mat", "flu", "plas", "seis", "gen", "prot", "cosm"]


def vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def zipf_pick(rng: random.Random, words: list[str], weights: list[float], k: int) -> list[str]:
    return rng.choices(words, weights=weights, k=k)


def rss_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (peak since reset_peak_rss) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def reset_peak_rss() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM (Linux)


def setup_database(url: str, reuse: bool, name: str = "hpcfair_bench") -> str:
    import psycopg2

    base, _, _ = url.rpartition("/")
    bench_url = f"{base}/{name}"
    conn = psycopg2.connect(f"{base}/postgres")
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        exists = cur.fetchone() is not None
        if exists and not reuse:
            cur.execute(f"DROP DATABASE {name}")
            exists = False
        if not exists:
            cur.execute(f"CREATE DATABASE {name}")
    conn.close()
    return bench_url


def seed(n: int, rng: random.Random) -> tuple[list[str], list[float]]:
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from hub.registry.models import Artifact, Version
    from hub.search.index import vector
    from hub.search.models import FacetValue, SearchEntry

    words = vocabulary(rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    User = get_user_model()
    owners = [User.objects.create(username=f"user{i}") for i in range(200)]
    start = timezone.now()
    batch = 5000
    for first in range(0, n, batch):
        artifacts, versions, entries, facets = [], [], [], []
        with transaction.atomic():
            for i in range(first, min(first + batch, n)):
                kind = rng.choices(["model", "dataset", "project"], weights=[6, 3, 1])[0]
                owner = rng.choice(owners)
                title = " ".join(zipf_pick(rng, words, weights, rng.randint(3, 6)))
                description = " ".join(zipf_pick(rng, words, weights, rng.randint(20, 60)))
                keywords = sorted(set(zipf_pick(rng, words[:300], weights[:300], rng.randint(1, 5))))
                artifacts.append(Artifact(kind=kind, owner=owner, name=f"a{i}", title=title, pid=f"ark:/99999/b{i}",
                                          description=description, created=start))
                meta = {"title": title, "description": description, "keywords": keywords,
                        "creators": [{"name": "Bench"}], "license": rng.choice(LICENSES), "kind": kind}
                if kind == "model":
                    framework = rng.choice(FRAMEWORKS)
                    meta.update(framework=framework, format=FORMATS[framework], task=rng.choice(TASKS))
                    if rng.random() < 0.2:
                        meta["benchmarks"] = [{"hardware": {"kind": "gpu", "gpu_model": rng.choice(GPUS)},
                                               "batch_size": 1, "median_ms": 1.0, "p95_ms": 2.0}]
                elif kind == "dataset":
                    meta.update(format=rng.choice(["csv", "parquet", "hdf5", "netcdf"]))
                versions.append(meta)
            Artifact.objects.bulk_create(artifacts)
            created = Version.objects.bulk_create([
                Version(artifact=a, label="1", pid=f"ark:/99999/v{a.name}", metadata=meta,
                        content_digest=hashlib.sha256(a.name.encode()).hexdigest(),
                        created=start - timedelta(seconds=rng.randint(0, 10**7)))
                for a, meta in zip(artifacts, versions, strict=True)])
            for artifact, version in zip(artifacts, created, strict=True):
                meta = version.metadata
                entries.append(SearchEntry(
                    artifact=artifact, version=version, kind=artifact.kind, visibility="public", owner=artifact.owner,
                    title=meta["title"], keywords=" ".join(meta["keywords"]),
                    text=f"{artifact.name}\n{meta['description']}\nBench", updated=version.created))
                values = {("kind", artifact.kind), ("owner", artifact.owner.username), ("license", meta["license"])}
                values |= {(k, meta[k]) for k in ("framework", "format", "task") if k in meta}
                values |= {("keyword", w) for w in meta["keywords"]}
                for item in meta.get("benchmarks", []):
                    values |= {("hardware", "gpu"), ("hardware", item["hardware"]["gpu_model"])}
                facets.extend(FacetValue(entry_id=artifact.pk, facet=f, value=v) for f, v in values)
            SearchEntry.objects.bulk_create(entries)
            FacetValue.objects.bulk_create(facets)
        print(f"  seeded {min(first + batch, n)}/{n}", flush=True)
    if connection.vendor == "postgresql":
        SearchEntry.objects.update(search_vector=vector())
    with connection.cursor() as cur:  # SQLite's FTS5 index was filled by its triggers as the entries went in
        cur.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
    return words, weights


def replicate(times: int) -> None:
    """PostgreSQL: copy the seeded corpus ``times - 1`` more times in SQL (new ids, names and PIDs; the same
    text, facet values and stored vectors), so a 1M catalogue is seeded in minutes instead of an hour."""
    from django.db import connection, transaction

    from hub.registry.models import Artifact, Version
    from hub.search.models import FacetValue, SearchEntry

    plan = [(Artifact, "a", {"id": "a", "follows_id": "a"}, ("name", "pid")),
            (Version, "v", {"id": "v", "artifact_id": "a"}, ("pid",)),
            (SearchEntry, "a", {"artifact_id": "a", "version_id": "v", "parent_id": "a"}, ()),
            (FacetValue, "f", {"id": "f", "entry_id": "a"}, ())]
    with connection.cursor() as cur:
        spans = {}
        for model, key in (("registry_artifact", "a"), ("registry_version", "v"), ("search_facetvalue", "f")):
            cur.execute(f"SELECT max(id) FROM {model}")  # noqa: S608 - constant names
            spans[key] = cur.fetchone()[0]
        for copy in range(1, times):
            with transaction.atomic():
                for model, span_key, shifted, suffixed in plan:
                    table = model._meta.db_table
                    columns = [f.column for f in model._meta.concrete_fields]
                    values = [f"{c} + {copy * spans[shifted[c]]}" if c in shifted else
                              f"{c} || '-r{copy}'" if c in suffixed else c for c in columns]
                    first = "id" if "id" in columns else "artifact_id"
                    cur.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(values)} "  # noqa: S608
                                f"FROM {table} WHERE {first} <= {spans[span_key]}")
            print(f"  copied the corpus: {copy + 1}/{times}", flush=True)
        for table in ("registry_artifact", "registry_version", "search_facetvalue"):
            cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "  # noqa: S608 - constant names
                        f"(SELECT max(id) FROM {table}))")
        cur.execute("VACUUM ANALYZE")


MEMBER_OF = 50  # organizations the signed-in viewer (user0) is a member of
ORG_OWNED = (3, 7, 8, 9)  # artifact id % 10 owned by an organization
LEVEL_SQL = ("CASE WHEN a.id % 10 < 6 THEN 'public' WHEN a.id % 10 = 6 THEN 'internal' "
             "WHEN a.id % 10 IN (7, 8) THEN 'organization' ELSE 'private' END")


def seed_orgs(orgs: int, memberships: int, rng: random.Random) -> None:
    """``orgs`` organizations (``hub.orgs``) and ``memberships`` members over 10,000 more people (user0 in
    MEMBER_OF of them, with every role); then, in SQL over the whole corpus, the organizations own the artifacts
    whose id % 10 is in ORG_OWNED (spread over all of them) and the visibility levels follow LEVEL_SQL, in the
    registry, the search entries and the owner facet alike."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.db import connection, transaction

    from hub.orgs.models import Membership, Organization, Role

    User = get_user_model()
    unusable = make_password(None)
    with transaction.atomic():
        accounts = User.objects.bulk_create([User(username=f"org{i}", password=unusable) for i in range(orgs)],
                                            batch_size=5000)
        Organization.objects.bulk_create([Organization(account=a, title=a.username) for a in accounts],
                                         batch_size=5000)
        people = User.objects.bulk_create([User(username=f"member{i}") for i in range(10_000)], batch_size=5000)
        viewer = User.objects.get(username="user0")
        roles = [Role.READ] * 35 + [Role.WRITE] * 10 + [Role.ADMIN] * 5
        pairs = {(a.pk, viewer.pk): role for a, role in zip(rng.sample(accounts, MEMBER_OF), roles, strict=True)}
        while len(pairs) < memberships:
            pairs.setdefault((rng.choice(accounts).pk, rng.choice(people).pk),
                             rng.choices([Role.READ, Role.WRITE, Role.ADMIN], weights=[7, 2, 1])[0])
        Membership.objects.bulk_create([Membership(org_id=o, user_id=u, role=r) for (o, u), r in pairs.items()],
                                       batch_size=10_000)
        owned = ", ".join(map(str, ORG_OWNED))
        with connection.cursor() as cur:
            cur.execute("CREATE TEMP TABLE bench_org AS SELECT account_id, "
                        "(row_number() OVER (ORDER BY account_id)) - 1 "
                        "AS n FROM orgs_organization")
            cur.execute(f"UPDATE registry_artifact a SET visibility = {LEVEL_SQL}")  # noqa: S608 - constants
            cur.execute(f"UPDATE registry_artifact a SET owner_id = o.account_id FROM bench_org o "  # noqa: S608
                        f"WHERE a.id % 10 IN ({owned}) AND o.n = (a.id * 7919) % {orgs}")
            cur.execute("UPDATE search_searchentry e SET visibility = a.visibility, owner_id = a.owner_id "
                        "FROM registry_artifact a WHERE e.artifact_id = a.id")
            cur.execute(f"UPDATE search_facetvalue f SET value = u.username FROM registry_artifact a "  # noqa: S608
                        f"JOIN auth_user u ON u.id = a.owner_id WHERE f.entry_id = a.id AND f.facet = 'owner' "
                        f"AND a.id % 10 IN ({owned})")
            cur.execute("DROP TABLE bench_org")
    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE")
    print(f"  seeded {orgs} organizations and {len(pairs)} memberships; they own their share of the artifacts",
          flush=True)


def queries(rng: random.Random, words: list[str], weights: list[float], count: int) -> list[tuple[str, dict]]:
    out = []
    for _ in range(count):
        roll = rng.random()
        q = " ".join(zipf_pick(rng, words, weights, rng.choice([1, 1, 2])))
        if roll < 0.4:
            out.append(("text", {"q": q}))
        elif roll < 0.6:
            out.append(("text+facet", {"q": q, "framework": rng.choice(FRAMEWORKS), "kind": "model"}))
        elif roll < 0.8:
            out.append(("facets", {"framework": rng.choice(FRAMEWORKS), "license": rng.choice(LICENSES)}))
        elif roll < 0.9:
            out.append(("tag", {"keyword": rng.choice(words[:50])}))
        else:
            out.append(("browse", {"kind": rng.choice(["model", "dataset"]), "hardware": "gpu"}
                        if rng.random() < 0.5 else {}))
    return out


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def time_mix(client, mix: list[tuple[str, dict]]) -> tuple[dict[str, list[float]], list[int]]:
    """Each query of ``mix`` through the API (after 10 to warm caches and connections): ms by kind and "all",
    and each answer's count."""
    for _, params in mix[:10]:
        client.get("/api/v1/artifacts/", params)
    timings: dict[str, list[float]] = {}
    results: list[int] = []
    for kind, params in mix:
        t0 = time.perf_counter()
        response = client.get("/api/v1/artifacts/", params)
        elapsed = (time.perf_counter() - t0) * 1000
        assert response.status_code == 200, response.content[:300]
        body = response.json()
        assert "facets" in body
        results.append(body["count"])
        timings.setdefault(kind, []).append(elapsed)
        timings.setdefault("all", []).append(elapsed)
    return timings, results


KINDS = ("text", "text+facet", "facets", "tag", "browse", "all")


def child(words: list[str], weights: list[float], count: int) -> None:
    """A --compare child: map (or build) this code's base, sign a client in as user0, warm both clients, say
    ``BENCH READY``; then for each line ``[viewer, first, last]`` on stdin time those queries of the mix and
    answer ``BENCH [[kind, ms, hits], ...]``."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from hub.runtime import settle
    from hub.search import index_copy

    settle()
    t0 = time.perf_counter()
    index_copy.current()
    index_s = time.perf_counter() - t0
    mix = queries(random.Random(11), words, weights, count)
    clients = {"anonymous": Client(), "member": Client()}
    clients["member"].force_login(get_user_model().objects.get(username="user0"))
    for client in clients.values():
        time_mix(client, mix[:10])
    print(f"BENCH READY {index_s:.1f}", flush=True)
    for line in sys.stdin:
        viewer, first, last = json.loads(line)
        out = []
        for kind, params in mix[first:last]:
            t0 = time.perf_counter()
            response = clients[viewer].get("/api/v1/artifacts/", params)
            elapsed = (time.perf_counter() - t0) * 1000
            assert response.status_code == 200, response.content[:300]
            out.append([kind, elapsed, response.json()["count"]])
        print("BENCH " + json.dumps(out), flush=True)


BLOCK = 10  # queries a child answers before the other code's child answers the same ones


def compare(tree: Path, args: argparse.Namespace) -> None:
    """Two long-lived children over the same database and mix, TREE's code ("before") and this tree's ("after"),
    answering the same blocks of BLOCK queries in turn (which goes first alternates), so that a loaded machine's
    slow minutes fall on both alike; print p50/p95 per viewer and kind and the ratios after/before."""
    sides = {"before": tree.resolve(), "after": ROOT}
    var = {side: code / "var" / f"bench-{args.database}" for side, code in sides.items()}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--versions", str(args.versions),
               "--queries", str(args.queries)]
    procs: dict[str, subprocess.Popen] = {}

    def answer(side: str) -> str:
        for line in procs[side].stdout:
            if line.startswith("BENCH "):
                return line.removeprefix("BENCH ")
        sys.exit(f"the {side} child ended: see {var[side] / 'child.log'}")

    try:
        for side, code in sides.items():  # one after the other: each builds its code's base from the rows as now
            if not args.keep_bases:
                shutil.rmtree(var[side] / "search-index", ignore_errors=True)
            var[side].mkdir(parents=True, exist_ok=True)
            procs[side] = subprocess.Popen(command, env={**os.environ, "BENCH_TREE": str(code),
                                                         "HUB_VAR_DIR": str(var[side])},
                                           cwd=code, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=open(var[side] / "child.log", "w"), text=True, bufsize=1)
            print(f"  {side}: index ready (built or mapped) in {answer(side).split()[1]} s", flush=True)
        loads = [os.getloadavg()[0]]
        times: dict[tuple[str, str, str], list[float]] = {}
        hits: dict[tuple[str, str], list[int]] = {}
        # Which side answers a block first alternates between rounds, not only between blocks: the second side
        # finds the database's pages the first one read, so a block must not have the same side first every round.
        blocks = [(round_, (viewer, first, first + BLOCK)) for round_ in range(args.rounds)
                  for viewer in ("anonymous", "member") for first in range(0, args.queries, BLOCK)]
        for i, (round_, block) in enumerate(blocks):
            for side in (("before", "after") if (round_ + block[1] // BLOCK) % 2 == 0 else ("after", "before")):
                procs[side].stdin.write(json.dumps(block) + "\n")
                procs[side].stdin.flush()
                for kind, ms, count in json.loads(answer(side)):
                    for name in (kind, "all"):
                        times.setdefault((block[0], name, side), []).append(ms)
                    hits.setdefault((block[0], side), []).append(count)
            if i % 20 == 19:
                loads.append(os.getloadavg()[0])
    finally:
        for proc in procs.values():
            proc.stdin.close()
            proc.wait(timeout=60)
    print(f"\n{args.versions} versions, {args.orgs} organizations, {args.memberships} memberships; {args.rounds} "
          f"rounds of the {args.queries} queries per viewer and side, in alternating blocks of {BLOCK}; load "
          f"{min(loads):.1f}-{max(loads):.1f}; before: {sides['before']}")
    print(f"{'viewer':<10}{'kind':<12}{'n':>5}{'before p50':>12}{'after p50':>11}{'before p95':>12}"
          f"{'after p95':>11}{'p50 ratio':>11}{'p95 ratio':>11}{'hits b/a':>16}")
    for viewer in ("anonymous", "member"):
        for kind in KINDS:
            if (viewer, kind, "after") not in times:
                continue
            b50, a50, b95, a95 = (pct(times[viewer, kind, side], q) for q in (50, 95) for side in ("before", "after"))
            print(f"{viewer:<10}{kind:<12}{len(times[viewer, kind, 'after']):>5}{b50:>12.1f}{a50:>11.1f}"
                  f"{b95:>12.1f}{a95:>11.1f}{a50 / b50:>11.2f}{a95 / b95:>11.2f}"
                  + (f"{statistics.median(hits[viewer, 'before']):>8.0f}/"
                     f"{statistics.median(hits[viewer, 'after']):.0f}" if kind == "all" else ""))

def freshness(client, params: dict, steps: tuple[int, ...] = (1, 100, 500)) -> list[tuple[int, float, float]]:
    """Reindex the first artifacts (cumulatively up to each step) and time the next two queries."""
    from hub.registry.models import Artifact
    from hub.search.index import reindex

    artifacts = list(Artifact.objects.select_related("owner").order_by("pk")[:max(steps)])
    out, done = [], 0
    for step in steps:
        for artifact in artifacts[done:step]:
            reindex(artifact)
        done = step
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            assert client.get("/api/v1/artifacts/", params).status_code == 200
            times.append((time.perf_counter() - t0) * 1000)
        out.append((step, *times))
    return out


def engines(mix: list[tuple[str, dict]], pct) -> None:
    """SQLite only: the text matching step alone, FTS5 against LIKE word matching, over the same queries in the
    same run (what each engine hands the in-memory index: artifact ids and scores)."""
    from django.db import connection

    from hub.search import fts
    from hub.search.engines.words import match_words

    texts = [params["q"] for kind, params in mix if "q" in params]
    timings: dict[str, list[float]] = {"FTS5": [], "LIKE": []}
    hits: dict[str, list[int]] = {"FTS5": [], "LIKE": []}
    for q in texts:
        for name, run in (("FTS5", lambda q=q: fts.matches(connection, q)[0]),
                          ("LIKE", lambda q=q: list(match_words(q).values_list("artifact_id", "rank")))):
            t0 = time.perf_counter()
            found = run()
            timings[name].append((time.perf_counter() - t0) * 1000)
            hits[name].append(len(found))
    print(f"\ntext matching alone, {len(texts)} queries of the mix, the same run")
    print(f"{'engine':<8}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}{'median hits':>14}")
    for name, values in timings.items():
        print(f"{name:<8}{pct(values, 50):>10.1f}{pct(values, 95):>10.1f}{max(values):>10.1f}"
              f"{statistics.median(hits[name]):>14.0f}")


PROBE = """
import json, os, time
t0 = time.perf_counter()
import django
django.setup()
from django.test import Client
from hub.search import index_copy
t1 = time.perf_counter()
index_copy.current()
t2 = time.perf_counter()
client = Client()
client.get("/api/v1/artifacts/", {"q": os.environ["PROBE_WORD"]})
t3 = time.perf_counter()
for word in os.environ["PROBE_WORDS"].split():
    client.get("/api/v1/artifacts/", {"q": word})
memory = {}
for line in open("/proc/self/smaps_rollup"):
    name, _, rest = line.partition(":")
    if name in ("Rss", "Anonymous"):
        memory[name] = int(rest.split()[0]) / 1024
print(json.dumps({"setup_s": t1 - t0, "map_s": t2 - t1, "first_ms": (t3 - t2) * 1000,
                  "own_mb": memory["Anonymous"], "file_mb": memory["Rss"] - memory["Anonymous"]}))
"""


def fresh_process() -> dict[str, float]:
    """Start a web process's Python (Django set up, the index mapped, 21 searches) and read what it took."""
    env = {**os.environ, "PROBE_WORD": "model", "PROBE_WORDS": " ".join(vocabulary(random.Random(7))[:20])}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True,
                          cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--reuse", action="store_true", help="keep an existing bench database")
    parser.add_argument("--replicate", type=int, default=1,
                        help="PostgreSQL: seed versions/K and copy that corpus K times in SQL (1M in minutes)")
    parser.add_argument("--no-freshness", dest="freshness", action="store_false",
                        help="skip timing queries after 1-500 changed entries (reindexes 500 artifacts)")
    parser.add_argument("--database", default="hpcfair_bench", help="PostgreSQL: the bench database's name")
    parser.add_argument("--orgs", type=int, default=0, help="PostgreSQL: also seed this many organizations")
    parser.add_argument("--memberships", type=int, default=100_000, help="with --orgs: memberships to seed")
    parser.add_argument("--compare", type=Path, metavar="TREE",
                        help="time the mix against TREE's code (the same database), alternating child processes")
    parser.add_argument("--rounds", type=int, default=3, help="with --compare: rounds per side")
    parser.add_argument("--keep-bases", action="store_true",
                        help="with --compare: map the bases an earlier --compare built (the rows unchanged since)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sqlite", action="store_true",
                        help="the embedded default: an SQLite file under var/bench-sqlite/ (FTS5; HUB_SEARCH_ENGINE="
                             "words for its word matching)")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if args.sqlite:
        var = ROOT / "var" / "bench-sqlite"
        if not args.reuse:
            for name in ("hub.sqlite3", "hub.sqlite3-wal", "hub.sqlite3-shm"):
                (var / name).unlink(missing_ok=True)
        var.mkdir(parents=True, exist_ok=True)
        os.environ.pop("DATABASE_URL", None)
        os.environ["HUB_VAR_DIR"] = str(var)
    elif not url.startswith("postgres"):
        sys.exit("bench/search.py needs PostgreSQL: run `eval \"$(scripts/services.sh start)\"` first")
    elif not args.child:  # a child is handed the bench database's URL
        os.environ["DATABASE_URL"] = setup_database(url, args.reuse, args.database)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    os.environ.setdefault("HUB_VAR_DIR", str(ROOT / "var" / "bench"))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test import Client

    from hub.search.models import SearchEntry

    rng = random.Random(7)
    if args.child:  # the other code's migrations are not run: its index format would rebuild every entry
        words = vocabulary(rng)
        return child(words, [1 / (rank + 1) for rank in range(len(words))], args.queries)
    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    if SearchEntry.objects.count() != args.versions:
        print(f"seeding {args.versions} versions into hpcfair_bench ...", flush=True)
        words, weights = seed(args.versions // args.replicate, rng)
        if args.replicate > 1:
            replicate(args.replicate)
    else:
        words = vocabulary(rng)
        weights = [1 / (rank + 1) for rank in range(len(words))]
    if args.orgs:
        from hub.orgs.models import Organization

        have = Organization.objects.count()
        if have not in (0, args.orgs):
            sys.exit(f"hpcfair_bench holds {have} organizations: drop it (run without --reuse) to seed {args.orgs}")
        if not have:
            seed_orgs(args.orgs, args.memberships, rng)
    print(f"corpus ready in {time.perf_counter() - started:.0f} s", flush=True)
    if args.compare:
        return compare(args.compare, args)
    from hub.runtime import settle
    from hub.search import index_copy, mapped

    settle()  # as hub/wsgi.py does in every web worker
    index_root = Path(settings.HUB_SEARCH_INDEX_DIR)
    for old in index_root.glob("base-*"):  # time the host's first build, not a base left by an earlier run
        shutil.rmtree(old)
    (index_root / mapped.POINTER).unlink(missing_ok=True)
    index_copy.forget()
    reset_peak_rss()
    rss_before = rss_mb("VmRSS")
    t0 = time.perf_counter()
    index_copy.current()
    build_s = time.perf_counter() - t0
    gc.collect()
    on_disk = mapped.size_on_disk(index_root) / 2**20
    started = fresh_process()
    index_figures = (
        f"base (the host's indexer, once per {index_copy.DELTA_LIMIT} changes): built and published in "
        f"{build_s:.1f} s, peak {rss_mb('VmHWM') - rss_before:.0f} MB above the start while building\n"
        f"memory per host: the base's files, {on_disk:.0f} MB, in the page cache once for every process\n"
        f"a web process that starts: Django set up in {started['setup_s']:.2f} s, the base mapped in "
        f"{started['map_s'] * 1000:.0f} ms, first search {started['first_ms']:.0f} ms; after 20 searches it holds "
        f"{started['own_mb']:.0f} MB of its own (heap: Python, Django, numpy, its delta) and reads "
        f"{started['file_mb']:.0f} MB of files through the host's page cache (the base's pages it touched, libraries)")
    print(index_figures, flush=True)
    client = Client()
    mix = queries(random.Random(11), words, weights, args.queries)
    timings, results = time_mix(client, mix)

    from django.db import connection

    print(f"\nmachine: {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()}")
    print(f"database: {connection.vendor}; HUB_SEARCH_ENGINE={settings.HUB_SEARCH_ENGINE}")
    print(f"{args.versions} versions, {len(mix)} queries through GET /api/v1/artifacts/ (facet counts included)")
    print(f"{'kind':<12}{'n':>5}{'p50 ms':>10}{'p95 ms':>10}{'max ms':>10}{'median hits':>14}")
    for kind in ("text", "text+facet", "facets", "tag", "browse", "all"):
        values = timings.get(kind, [])
        if values:
            print(f"{kind:<12}{len(values):>5}{pct(values, 50):>10.1f}{pct(values, 95):>10.1f}{max(values):>10.1f}"
                  f"{statistics.median(results):>14.0f}" if kind == "all" else
                  f"{kind:<12}{len(values):>5}{pct(values, 50):>10.1f}{pct(values, 95):>10.1f}{max(values):>10.1f}")
    print(index_figures)
    if connection.vendor == "sqlite":
        engines(mix, pct)
    if args.freshness:
        print("\nfreshness: entries changed (reindexed, as publishing does) since the in-memory base was built, and"
              "\nthe next two queries: the first loads the changes as a delta, the second reuses it")
        print(f"{'changed':>8}{'first ms':>10}{'second ms':>11}")
        for changed, first, second in freshness(client, {"q": words[3], "kind": "model"}):
            print(f"{changed:>8}{first:>10.1f}{second:>11.1f}")
    print(f"\ntargets: all queries p95 < 50 ms at 100k: {'met' if pct(timings['all'], 95) < 50 else 'NOT met'}; "
          f"text+facet p95 < 100 ms at 1M (issue 35): "
          f"{'met' if pct(timings.get('text+facet', [0]), 95) < 100 else 'NOT met'} (this run: {args.versions})")


if __name__ == "__main__":
    main()

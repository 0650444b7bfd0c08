"""SPARQL at catalogue scale (issue 35, point 1): the Oxigraph store kept current per change, on the embedded
store (pyoxigraph, ``make run``) and on the shared server (``oxigraph serve``, the full stack), against the way
before (an rdflib graph of every public version, rebuilt in every web process after any change, after counts over
all versions to know whether anything changed). Seeds N artifacts of one version each with bench/search.py's
corpus into PostgreSQL (``hpcfair_bench``).

    eval "$(scripts/services.sh start)"; .venv/bin/python bench/sparql.py [--versions 100000] [--backend both]

Prints, per backend: the store's first build (time, disk, the bench process's peak memory), each query's check
when nothing changed, a real publish (``create_version``) until a query through the endpoint answers with its
title (the target: within 1 s), and p50/p95 of the query page's examples through the endpoint (Django's test
client: parse, sync check, then a forked child that opens the embedded store read-only, or an HTTP request to the
server). For the embedded store it also times opening the store read-only alone, which each query's child does.
The old way's rebuild is timed on at most ``--old-max`` versions (0: skipped) and scaled by its rate.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_USER = "sparql-bench"  # owns what the bench publishes (removed at the end, kept out of the corpus count)


def timed(call) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = call()
    return (time.perf_counter() - t0) * 1000, out


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def disk_mib(folder: Path | None) -> str:
    if folder is None or not folder.exists():
        return "?"
    return f"{sum(f.stat().st_size for f in folder.rglob('*') if f.is_file()) / 2**20:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--old-max", type=int, default=0, help="versions the old rebuild is timed on (0: skipped)")
    parser.add_argument("--backend", choices=["embedded", "server", "both"], default="both")
    parser.add_argument("--runs", type=int, default=20, help="runs of each example query (after one warm-up)")
    parser.add_argument("--server-data", type=Path, default=None,
                        help="the server's --location, for its disk (default: services.sh's under HUB_TEST_RUN_DIR)")
    parser.add_argument("--compare", type=int, default=2000,
                        help="artifacts loaded both ways (SPARQL Updates of 200, as each change; the bulk loader, as "
                             "a first build) into scratch embedded stores, in the same run (0: skipped)")
    parser.add_argument("--reuse", action="store_true", help="keep an existing bench database")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        sys.exit("bench/sparql.py needs PostgreSQL: run `eval \"$(scripts/services.sh start)\"` first")
    server_url = os.environ.get("HUB_TEST_SPARQL_URL", "")
    backends = ["embedded", "server"] if args.backend == "both" else [args.backend]
    if "server" in backends and not server_url:
        sys.exit("the server backend needs `oxigraph serve`: scripts/services.sh starts one (HUB_TEST_SPARQL_URL)")
    from bench.search import reset_peak_rss, rss_mb, seed, setup_database

    os.environ["DATABASE_URL"] = setup_database(url, args.reuse)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    os.environ.setdefault("HUB_VAR_DIR", str(ROOT / "var" / "bench"))
    store_dir = ROOT / "var" / "bench" / f"sparql-{args.versions}"
    os.environ["HUB_SPARQL_STORE_DIR"] = str(store_dir)
    os.environ["HUB_SPARQL_STORE_URL"] = ""
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db.models import Count, Max
    from django.test import Client

    from hub.metadata import rdfstore
    from hub.metadata.models import SparqlState
    from hub.registry import services
    from hub.registry.models import Artifact, Version
    from hub.registry.uploads import StagedFile
    from hub.search import index
    from hub.search.models import SearchEntry, SearchState
    from hub.web.sparql_page import EXAMPLES

    call_command("migrate", verbosity=0)
    bench_user, _ = get_user_model().objects.get_or_create(username=BENCH_USER)

    def forget_published() -> None:  # what the bench published (rows only: its blobs are under the bench var dir)
        Version.objects.filter(artifact__owner=bench_user).delete()
        Artifact.objects.filter(owner=bench_user).delete()

    forget_published()  # left by an interrupted run
    if SearchEntry.objects.count() != args.versions:
        print(f"seeding {args.versions} versions into hpcfair_bench ...", flush=True)
        t0 = time.perf_counter()
        seed(args.versions, random.Random(7))
        print(f"seeded in {time.perf_counter() - t0:.0f} s", flush=True)
    SearchEntry.objects.update(seq=1)  # the seed writes rows directly: one change that made them all
    SearchState.objects.update_or_create(pk=1, defaults={"generation": 1, "format": index.INDEX_FORMAT})
    print(f"machine: {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()}; "
          f"{args.versions} artifacts (one version each), PostgreSQL; backends: {', '.join(backends)}", flush=True)
    if args.old_max:
        old_way(args, Artifact, Version, Count, Max)
    if args.compare:
        compare(args.compare, Artifact, rdfstore)

    client = Client()

    def ask(query: str) -> bytes:
        response = client.get("/sparql", {"query": query}, HTTP_ACCEPT="application/sparql-results+json")
        assert response.status_code == 200, response.content[:300]
        return response.content

    work = Path(tempfile.mkdtemp(prefix="sparql-bench-"))
    server_data = args.server_data or Path(os.environ.get("HUB_TEST_RUN_DIR", "/tmp/hpcfair-test-services")) \
        / "sparql" / "data"
    for backend in backends:
        print(f"\n== {backend} ==", flush=True)
        if backend == "server":
            settings.HUB_SPARQL_STORE_URL = server_url
            SparqlState.objects.update_or_create(pk=1, defaults={"generation": 0})
        else:
            settings.HUB_SPARQL_STORE_URL = ""
            shutil.rmtree(store_dir, ignore_errors=True)
        store = rdfstore.current()
        reset_peak_rss()
        before = rss_mb("VmRSS")
        ms, count = timed(lambda s=store: rdfstore.sync(s))
        disk = disk_mib(store_dir if backend == "embedded" else server_data)
        print(f"first build: {ms / 1000:.1f} s for {count} artifacts ({ms / max(count, 1):.2f} ms each), "
              f"{disk} MiB on disk; the building process peaked {rss_mb('VmHWM') - before:.0f} MB above its start",
              flush=True)
        checks = sorted(timed(lambda s=store: rdfstore.pending(s))[0] for _ in range(20))
        print(f"each query's check with nothing changed: median {checks[10]:.2f} ms")
        if backend == "embedded":
            from pyoxigraph import Store

            opens = sorted(timed(lambda: Store.read_only(str(store_dir)))[0] for _ in range(5))
            print(f"opening the store read-only (each query's child does): median {opens[2]:.0f} ms")
        publishes, lags = [], []
        for number in range(5):
            title = f"Freshly published {backend} {number} {time.time_ns()}"
            data = f"{title}\n".encode()
            source = work / f"{number}.csv"
            source.write_bytes(data)
            staged = StagedFile(path="data.csv", staged=source, sha256=hashlib.sha256(data).hexdigest(),
                                size=len(data))
            started = time.perf_counter()
            artifact = services.create_artifact(bench_user, kind="dataset", name=f"fresh-{backend}-{number}")
            services.create_version(artifact, bench_user, files=[staged], metadata={
                "title": title, "description": "Published by bench/sparql.py.", "license": "MIT",
                "creators": [{"name": "Bench"}]})
            published = time.perf_counter()
            query = f'ASK {{ ?s <https://schema.org/name> "{title}" }}'
            answered = b"true" in ask(query)
            assert answered, "the publish was not answered by the next query"
            publishes.append((published - started) * 1000)
            lags.append((time.perf_counter() - published) * 1000)
        print(f"a publish (create_version, {statistics.median(publishes):.0f} ms) until the next query answers with "
              f"it: median {statistics.median(lags):.0f} ms, max {max(lags):.0f} ms "
              f"(target 1 s: {'met' if max(lags) < 1000 else 'NOT met'})", flush=True)
        for title, query in EXAMPLES:
            ask(query)
            times = [timed(lambda q=query: ask(q))[0] for _ in range(args.runs)]
            print(f"  query {title!r}: p50 {pct(times, 50):.0f} ms, p95 {pct(times, 95):.0f} ms", flush=True)
    forget_published()
    shutil.rmtree(work, ignore_errors=True)


def compare(count: int, Artifact, rdfstore) -> None:
    """The first ``count`` artifacts written into two scratch embedded stores: as SPARQL Updates of
    ``rdfstore.BATCH`` artifacts (what each change does, and what a first build did before) and through the bulk
    loader in batches of ``rdfstore.BULK`` (a first build now). Rendering and loading are timed apart."""
    ids = list(Artifact.objects.order_by("pk").values_list("pk", flat=True)[:count])
    folder = Path(tempfile.mkdtemp(prefix="sparql-compare-"))
    for name, size, make, write in (("SPARQL Updates", rdfstore.BATCH, rdfstore.render, "update"),
                                    ("bulk loader", rdfstore.BULK, rdfstore.nquads, "load")):
        store = rdfstore.Embedded(folder / write)
        rendering = loading = 0.0
        with store.writing():
            for start in range(0, len(ids), size):
                t0 = time.perf_counter()
                text = make(ids[start:start + size])
                t1 = time.perf_counter()
                getattr(store, write)(text)
                rendering, loading = rendering + (t1 - t0) * 1000, loading + (time.perf_counter() - t1) * 1000
        print(f"{len(ids)} artifacts through the {name}: render {rendering / 1000:.1f} s + load {loading / 1000:.1f} s"
              f" = {(rendering + loading) / len(ids):.2f} ms each", flush=True)
    shutil.rmtree(folder, ignore_errors=True)


def old_way(args, Artifact, Version, Count, Max) -> None:
    """hub/metadata/sparql.py before the store: each query's change check, and the rebuild after any change."""
    from rdflib import Graph

    from hub.metadata.services import version_record
    from hub.registry.access import Viewer
    from ontology.graph import to_graph

    public = Version.objects.filter(deleted_at__isnull=True, artifact__deleted_at__isnull=True,
                                    artifact__visibility=Artifact.Visibility.PUBLIC)

    def check():
        return public.aggregate(n=Count("pk"), last=Max("pk")), Artifact.objects.aggregate(updated=Max("updated"),
                                                                                           n=Count("pk"))

    def rebuild(limit: int) -> Graph:
        graph, viewer = Graph(), Viewer.public()
        chosen = public.select_related("artifact__owner").prefetch_related(
            "files", "provenance__target__artifact__owner")[:limit]
        for version in chosen.iterator(chunk_size=500):
            graph += to_graph(version_record(version, viewer))
        return graph

    checks = sorted(timed(check)[0] for _ in range(5))
    print(f"before, each query's change check (counts over all versions): median {checks[2]:.0f} ms")
    sample = min(args.old_max, args.versions)
    ms, graph = timed(lambda: rebuild(sample))
    scaled = ms / sample * args.versions
    print(f"before, graph rebuilt after any change, in every web process: {ms / 1000:.1f} s for {sample} versions "
          f"({len(graph)} triples)" + (f", so {scaled / 1000:.0f} s at {args.versions}" if sample < args.versions
                                       else ""))


if __name__ == "__main__":
    main()

"""SPARQL at catalogue scale (issue 35, point 1): the store kept current per change (Oxigraph, embedded) against
the way before (an rdflib graph of every public version, rebuilt in every web process after any change, after
counts over all versions to know whether anything changed). Seeds N artifacts of one version each with
bench/search.py's corpus into PostgreSQL (``hpcfair_bench``).

    eval "$(scripts/services.sh start)"; .venv/bin/python bench/sparql.py [--versions 10000] [--old-max 10000]

Prints: the old rebuild (every public version rendered into one rdflib graph; run on at most ``--old-max``
versions, the rest scaled by its measured rate), the old per-query change check, the store's first build (once
per store), a publish until the next query answers it, a query's check when nothing changed, and the p50/p95 of
the query page's examples through the endpoint (Django's test client: parse, sync check, forked child).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(call) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = call()
    return (time.perf_counter() - t0) * 1000, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--old-max", type=int, default=10_000, help="versions the old rebuild is timed on")
    parser.add_argument("--reuse", action="store_true", help="keep an existing bench database")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        sys.exit("bench/sparql.py needs PostgreSQL: run `eval \"$(scripts/services.sh start)\"` first")
    from bench.search import seed, setup_database

    os.environ["DATABASE_URL"] = setup_database(url, args.reuse)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    os.environ.setdefault("HUB_VAR_DIR", str(ROOT / "var" / "bench"))
    store_dir = ROOT / "var" / "bench" / f"sparql-{args.versions}"
    os.environ["HUB_SPARQL_STORE_DIR"] = str(store_dir)
    os.environ["HUB_SPARQL_STORE_URL"] = ""
    import django

    django.setup()
    from django.core.management import call_command
    from django.db.models import Count, Max
    from django.test import Client
    from rdflib import Graph

    from hub.metadata import rdfstore
    from hub.metadata.services import version_record
    from hub.registry.access import Viewer
    from hub.registry.models import Artifact, Version
    from hub.search import index
    from hub.search.models import SearchEntry, SearchState
    from hub.web.sparql_page import EXAMPLES
    from ontology.graph import to_graph

    call_command("migrate", verbosity=0)
    if SearchEntry.objects.count() != args.versions:
        print(f"seeding {args.versions} versions into hpcfair_bench ...", flush=True)
        seed(args.versions, random.Random(7))
    SearchEntry.objects.update(seq=1)  # the seed writes rows directly: one change that made them all
    SearchState.objects.update_or_create(pk=1, defaults={"generation": 1, "format": index.INDEX_FORMAT})
    print(f"machine: {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()}; "
          f"{args.versions} artifacts (one version each), PostgreSQL, embedded Oxigraph store")

    public = Version.objects.filter(deleted_at__isnull=True, artifact__deleted_at__isnull=True,
                                    artifact__visibility=Artifact.Visibility.PUBLIC)

    def old_check():  # hub/metadata/sparql.py before: run first by every query
        versions = public.aggregate(n=Count("pk"), last=Max("pk"))
        artifacts = Artifact.objects.aggregate(updated=Max("updated"), n=Count("pk"))
        return versions, artifacts

    def old_rebuild(limit: int) -> Graph:
        graph, viewer = Graph(), Viewer.public()
        chosen = public.select_related("artifact__owner").prefetch_related(
            "files", "provenance__target__artifact__owner")[:limit]
        for version in chosen.iterator(chunk_size=500):
            graph += to_graph(version_record(version, viewer))
        return graph

    checks = sorted(timed(old_check)[0] for _ in range(5))
    print(f"before, each query's change check (counts over all versions): median {checks[2]:.0f} ms")
    sample = min(args.old_max, args.versions)
    ms, graph = timed(lambda: old_rebuild(sample))
    scaled = ms / sample * args.versions
    print(f"before, graph rebuilt after any change, in every web process: {ms / 1000:.1f} s for {sample} versions "
          f"({len(graph)} triples)" + (f", so {scaled / 1000:.0f} s at {args.versions}" if sample < args.versions
                                       else ""))
    del graph

    shutil.rmtree(store_dir, ignore_errors=True)
    store = rdfstore.current()
    ms, count = timed(lambda: rdfstore.sync(store))
    size = sum(f.stat().st_size for f in store_dir.rglob("*") if f.is_file())
    print(f"now, the store's first build (once per store, `hub_sparql`/hub_serve's background sync): {ms / 1000:.1f} s "
          f"for {count} artifacts, {size / 2**20:.0f} MiB on disk, held by no process")

    client = Client()

    def ask(query: str) -> int:
        response = client.get("/sparql", {"query": query}, HTTP_ACCEPT="application/sparql-results+json")
        assert response.status_code == 200, response.content[:300]
        return len(response.content)

    checks = sorted(timed(lambda: rdfstore.pending(store))[0] for _ in range(20))
    print(f"now, each query's change check with nothing changed: median {checks[10]:.2f} ms")
    artifact = Artifact.objects.order_by("pk").first()
    lags = []
    for index_number in range(5):
        Artifact.objects.filter(pk=artifact.pk).update(title=f"changed {index_number}")
        artifact.refresh_from_db()
        index.reindex(artifact)  # what a publish, edit, visibility change or deletion does
        lags.append(timed(lambda: ask("ASK { ?s ?p ?o }"))[0])
    print(f"now, a change until the next query has answered with it (sync + query): median "
          f"{statistics.median(lags):.0f} ms, max {max(lags):.0f} ms")
    for title, query in EXAMPLES:
        ask(query)
        times = sorted(timed(lambda q=query: ask(q))[0] for _ in range(20))
        print(f"  query {title!r}: p50 {times[10]:.0f} ms, p95 {times[18]:.0f} ms")


if __name__ == "__main__":
    main()

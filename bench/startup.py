"""What a web node pays as it starts and after a write (issue 35, point 2): ``hub_serve``'s search-index step
(before: a full ``hub_reindex`` at every start; now ``hub.search.index.heal``), and the spelling vocabulary a
search that finds nothing needs after a write (before: every public title read again; now only the changed
entries' words). Seeds N artifacts with bench/search.py's corpus into PostgreSQL (``hpcfair_bench``).

    eval "$(scripts/services.sh start)"; .venv/bin/python bench/startup.py [--versions 10000] [--reuse]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def old_vocabulary(index_copy) -> frozenset[str]:
    """The vocabulary as it was made before (fb60d8f): every public title of a snapshot again whenever the
    entries that count changed, i.e. after any write."""
    words: set[str] = set()
    for snapshot, counted in index_copy.current().parts:
        public = counted & snapshot.public & snapshot.live
        for o in np.flatnonzero(public):
            words.update(index_copy.WORD.findall(snapshot.titles[o].lower()))
        for name in ("keyword", "framework", "format", "task"):
            for value in snapshot.facets[name].counts(public):
                words.update(index_copy.WORD.findall(value.lower()))
    return frozenset(words)


def timed(call) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = call()
    return (time.perf_counter() - t0) * 1000, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--reuse", action="store_true", help="keep an existing bench database")
    parser.add_argument("--no-rebuild", dest="rebuild", action="store_false", help="skip timing the full rebuild")
    parser.add_argument("--jobs", type=int, default=100_000, help="Job rows for timing a /metrics scrape")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        sys.exit("bench/startup.py needs PostgreSQL: run `eval \"$(scripts/services.sh start)\"` first")
    from bench.search import seed, setup_database

    os.environ["DATABASE_URL"] = setup_database(url, args.reuse)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hub.settings")
    os.environ.setdefault("HUB_VAR_DIR", str(ROOT / "var" / "bench"))
    import django

    django.setup()
    from django.core.management import call_command

    from hub.registry.models import Artifact
    from hub.search import index, index_copy
    from hub.search.models import SearchEntry

    call_command("migrate", verbosity=0)
    if SearchEntry.objects.count() != args.versions:
        print(f"seeding {args.versions} versions into hpcfair_bench ...", flush=True)
        seed(args.versions, random.Random(7))
    print(f"machine: {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()}; "
          f"{args.versions} artifacts, PostgreSQL")

    ms, healed = timed(index.heal)
    print(f"start, index step now (heal, nothing missing): {ms:.0f} ms, {healed} entries made")
    lost = list(SearchEntry.objects.order_by("pk").values_list("pk", flat=True)[:10])
    SearchEntry.objects.filter(pk__in=lost).delete()
    ms, healed = timed(index.heal)
    print(f"start, index step now (heal, 10 entries missing): {ms:.0f} ms, {healed} entries made")
    if args.rebuild:
        ms, count = timed(index.rebuild)
        print(f"start, index step before (hub_reindex = rebuild): {ms / 1000:.1f} s, {count} entries made")

    ms, _ = timed(index_copy.current)
    print(f"index loaded (the host's base mapped, or built the first time): {ms:.0f} ms")
    ms, words = timed(index_copy.vocabulary)
    print(f"vocabulary, first call (counted when the base was built): {ms:.0f} ms, {len(set(words))} words")
    ms, _ = timed(index_copy.vocabulary)
    print(f"vocabulary, again with no change: {ms:.2f} ms")
    artifacts = list(Artifact.objects.select_related("owner").order_by("pk")[:100])
    for changed in (1, 100):
        for artifact in artifacts[:changed]:
            index.reindex(artifact)
        index_copy.current()  # load the delta, as the failed search itself does first
        before, old = timed(lambda: old_vocabulary(index_copy))
        after, new = timed(index_copy.vocabulary)
        assert old == frozenset(new), "the two ways agree"
        print(f"vocabulary after a write of {changed} entries: before {before:.0f} ms, now {after:.1f} ms")
    scrape(args.jobs)


def scrape(jobs: int) -> None:
    """A /metrics scrape's cost over ``jobs`` Job rows (its grouped count scans the table)."""
    from django.test import Client

    from hub.jobs import kinds
    from hub.jobs.models import Job

    if Job.objects.count() < jobs:
        rng = random.Random(3)
        names = [name for name, _ in kinds.choices()]
        states = [state for state, _ in Job.State.choices]
        Job.objects.bulk_create([Job(kind=rng.choice(names), state=rng.choices(states, [1, 1, 90, 6, 2])[0])
                                 for _ in range(jobs - Job.objects.count())], batch_size=5000)
    client = Client()
    times = sorted(timed(lambda: client.get("/metrics"))[0] for _ in range(7))
    assert client.get("/metrics").status_code == 200
    print(f"/metrics scrape over {Job.objects.count()} jobs: median {times[3]:.0f} ms, max {times[-1]:.0f} ms")


if __name__ == "__main__":
    main()

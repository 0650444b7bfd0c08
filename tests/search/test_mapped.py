"""The search index's base on the host's disk: published once, mapped by every process (never built again by
one that starts), one indexer per host, never read by another database; and the query steps that avoid
touching every entry (counting over few hits, choosing the first page, facet candidates) give exactly what
the plain computation gives."""

from __future__ import annotations

import numpy as np
import pytest

from hub.registry import services
from hub.search import index_copy, mapped
from hub.search.index_copy import Postings
from hub.search.models import SearchState
from tests.conftest import staged, valid_metadata
from tests.search.test_search import names


def publish_models(owner, tmp_path, count: int, keywords=lambda i: ["shared"]) -> list:
    made = []
    for i in range(count):
        artifact = services.create_artifact(owner, kind="model", name=f"m{i}")
        services.create_version(artifact, owner, files=[staged(tmp_path, "w.bin", f"{i}".encode())],
                                metadata={**valid_metadata("model"), "title": f"Mapped model {i}",
                                          "keywords": keywords(i)})
        made.append(artifact)
    return made


def no_building(*args, **kwargs):
    raise AssertionError("a process that starts maps the host's base: it builds none")


@pytest.mark.django_db(transaction=True)
def test_a_process_that_starts_maps_the_hosts_base_instead_of_building_one(owner, anon, tmp_path, monkeypatch,
                                                                           settings):
    publish_models(owner, tmp_path, 3)
    assert len(names(anon.get("/api/v1/artifacts/", {"q": "mapped"}))) == 3  # the first process builds, publishes
    root = settings.HUB_SEARCH_INDEX_DIR
    published = mapped.pointed(root)
    assert published and (root / published / "ids.npy").is_file() and mapped.size_on_disk(root) > 0

    index_copy.forget()  # as a process that starts
    monkeypatch.setattr(index_copy, "load", lambda where: no_building() if where == index_copy.BASE else real(where))
    real = index_copy._load
    view = index_copy.current()
    assert isinstance(view.parts[0][0].ids.base, np.memmap), "the base is mapped from the host's disk"
    assert len(names(anon.get("/api/v1/artifacts/", {"q": "mapped"}))) == 3
    services.update_artifact(services.get_artifact(owner, "alice", "m1"), {"visibility": "private"}, None)
    assert len(names(anon.get("/api/v1/artifacts/", {"q": "mapped"}))) == 2, "a change since is read as a delta"


@pytest.mark.django_db(transaction=True)
def test_one_indexer_per_host_and_a_new_base_is_picked_up(owner, anon, tmp_path, monkeypatch, settings):
    made = publish_models(owner, tmp_path, 3)
    first = index_copy.current()
    monkeypatch.setattr(index_copy, "DELTA_LIMIT", 1)
    with mapped.indexer(settings.HUB_SEARCH_INDEX_DIR, wait=False) as held:  # another process is the indexer
        assert held
        for artifact in made[:2]:
            services.update_artifact(artifact, {"visibility": "private"}, None)
        view = index_copy.current()
        _wait_for_rebuild()
        assert mapped.pointed(settings.HUB_SEARCH_INDEX_DIR) == mapped.base_name(first.epoch, first.base_generation)
        assert index_copy.current().base_generation == first.base_generation and len(view.parts) == 2
    services.update_artifact(made[2], {"visibility": "private"}, None)  # the next change finds the lock free
    index_copy.current()
    _wait_for_rebuild()
    rebuilt = index_copy.current()
    assert rebuilt.base_generation == SearchState.objects.get().generation and len(rebuilt.parts) == 1
    assert rebuilt.parts[0][0].size == 3 and not rebuilt.parts[0][0].public.any()
    assert names(anon.get("/api/v1/artifacts/")) == []
    assert len(list(settings.HUB_SEARCH_INDEX_DIR.glob("base-*"))) == 1, "older bases are removed"


def _wait_for_rebuild() -> None:
    import time

    deadline = time.monotonic() + 30
    while index_copy._rebuilding.is_set() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not index_copy._rebuilding.is_set()


@pytest.mark.django_db(transaction=True)
def test_a_base_built_from_another_database_is_never_read(owner, anon, tmp_path, settings):
    publish_models(owner, tmp_path, 2)
    index_copy.current()
    old = mapped.pointed(settings.HUB_SEARCH_INDEX_DIR)
    SearchState.objects.update(epoch="restored")  # another database (restored, recreated) under the same folder
    index_copy.forget()
    view = index_copy.current()
    assert view.epoch == "restored" and mapped.pointed(settings.HUB_SEARCH_INDEX_DIR) != old


@pytest.mark.parametrize("values_per_entry", ["one", "several", "sparse", "none"])
def test_counting_over_few_hits_or_all_but_a_few_equals_counting_every_pair(values_per_entry):
    rng = np.random.default_rng(3)
    size, values = 2000, [f"v{i:03d}" for i in range(40)]
    if values_per_entry in ("one", "sparse", "none"):  # kind, owner, license: a dense code per entry (some have
        share = {"one": 0.8, "sparse": 0.02, "none": 0.0}[values_per_entry]  # none); a format's own facet: few
        ords = np.flatnonzero(rng.random(size) < share)
        codes = rng.zipf(1.5, len(ords)) % 40
    else:
        pairs = {(int(o), int(c)) for o, c in zip(rng.integers(0, size, 9000), rng.zipf(1.5, 9000) % 40,
                                                  strict=True)}
        ords, codes = (np.asarray(column, dtype=np.int64) for column in zip(*sorted(pairs), strict=True))
    postings = Postings.build(values, codes, ords, size)
    assert (postings.single is not None) == (values_per_entry != "several")
    for density in (0.0, 0.001, 0.05, 0.5, 0.95, 0.999, 1.0):
        mask = rng.random(size) < density
        expected = np.bincount(codes[mask[ords]].astype(np.int64), minlength=len(values))
        assert np.array_equal(postings.count_array(mask), expected), density


@pytest.mark.parametrize("stop", [1, 5, 20, 299, 300, 400])
def test_the_first_page_by_relevance_equals_sorting_every_hit(stop):
    rng = np.random.default_rng(stop)
    size = 300
    snapshot = type("S", (), {"recency": rng.permutation(size), "size": size})()
    scores = rng.choice([0.2, 0.4, 1.0, 1.2, 1.4], size).astype(np.float32)  # many ties, as real scores have
    ords = np.flatnonzero(rng.random(size) < 0.9)
    expected = ords[np.lexsort((snapshot.recency[ords], -scores[ords]))][:stop]
    assert np.array_equal(index_copy._top(snapshot, ords, scores, "relevance", stop), expected)


@pytest.mark.django_db
def test_facet_counts_over_base_and_delta_are_exact_when_values_are_cut(owner, anon, tmp_path, monkeypatch):
    """A value outside the base's first FACET_LIMIT that the delta lifts into the list is counted in full."""
    monkeypatch.setattr(index_copy, "FACET_LIMIT", 2)
    made = publish_models(owner, tmp_path, 6, keywords=lambda i: [["alpha", "beta", "gamma"][min(i, 5) // 2]])
    assert {f["value"]: f["count"] for f in anon.get("/api/v1/artifacts/").json()["facets"]["keyword"]} == {
        "alpha": 2, "beta": 2}  # ties: by name
    for artifact in made[:2]:  # alpha's two models become gamma's: gamma 4 (2 in the base, 2 in the delta)
        again = staged(tmp_path, "w.bin", b"2" + artifact.name.encode())
        services.create_version(artifact, owner, label="2", files=[again],
                                metadata={**valid_metadata("model"), "title": "Again", "keywords": ["gamma"]})
        services.delete_version(artifact.versions.get(label="1"))
    assert len(index_copy.current().parts) == 2
    facets = anon.get("/api/v1/artifacts/").json()["facets"]["keyword"]
    assert {f["value"]: f["count"] for f in facets} == {"gamma": 4, "beta": 2}

"""The SPARQL endpoint's RDF store (Oxigraph), kept current per change instead of rebuilt.

Each public, live version's metadata graph (as the public sees it) is one named graph,
``urn:hpcfair:graph:<version pk>``, so a version that goes private or is deleted leaves the store exactly.
What changed comes from the registry's ordered changes: every change to an artifact (publish, edit,
visibility, deletion, a benchmark) gives its search entry the next generation, in commit order
(``hub.search.index.next_generation``). ``sync`` renders again the versions of the artifacts changed since the
store's last generation, and of the artifacts whose versions name one of them as a source (a source that goes
private loses its name in their records), as one SPARQL Update per batch. Queries sync first, which costs one
indexed read when nothing changed, so a publish is answered by the very next query; nothing is held per
process and nothing is counted over the catalogue.

A first build (an empty store, or one that followed another database) renders every version in batches of
``BULK`` artifacts as N-Quads and hands each batch to Oxigraph's bulk loader (pyoxigraph's ``bulk_load``; the
server's ``POST /store?no_transaction``), which writes its files directly instead of one transaction per
update: not atomic, which is why the generation is written only once the whole build is in.

Two backends, chosen by ``HUB_SPARQL_STORE_URL``:
- ``Embedded`` (empty URL: ``make run``): pyoxigraph's RocksDB store in ``HUB_SPARQL_STORE_DIR``. One writer
  at a time on the host (an exclusive ``flock``); queries open it read-only in their own child process under a
  shared lock, so a sync never writes under a reader. The generation it holds is a file in its folder, so a
  store that is removed is built again.
- ``Server``: an ``oxigraph serve`` that every web node shares (the full stack). Syncs take a database row's
  lock (``SparqlState``), which also keeps the generation; queries are sent over HTTP with the hub's limits.
  The server accepts updates: bind it where only the hub reaches it.
"""

from __future__ import annotations

import fcntl
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import requests
from django.conf import settings
from django.db import transaction
from django.db.models import Prefetch

from hub.metadata.services import version_record
from hub.registry.access import Viewer
from hub.registry.lineage import with_variant_flag
from hub.registry.models import Artifact, ProvenanceLink, Version

GRAPH = "urn:hpcfair:graph:"  # + a version's pk: that version's named graph
BATCH = 200  # artifacts rendered per SPARQL Update
BULK = 2000  # artifacts rendered per bulk load, in a first build
# What a store's graphs look like: raised whenever rendering changes what a stored graph holds (2: version chains
# of uploads only, hub activities in place of job URLs). A store of another format is built afresh at its next
# sync, on every backend, so an upgrade needs no manual rebuild.
RENDER_FORMAT = 2


def graph_name(version_pk: int) -> str:
    return f"{GRAPH}{version_pk}"


class StoreError(Exception):
    """The store could not be read or written (the server is down, the folder is not writable)."""


class RdfStore(ABC):
    """Where the public metadata graphs live: written by ``sync``, read by the endpoint."""

    @abstractmethod
    @contextmanager
    def writing(self) -> Iterator[list[int]]:
        """One writer at a time: yields ``[generation, format]`` (what the store holds, and the ``RENDER_FORMAT``
        it was rendered in); the writer sets them to what it applied, kept when the block ends without an error."""

    @abstractmethod
    def update(self, sparql_update: str) -> None:
        """Apply one SPARQL Update (one transaction)."""

    @abstractmethod
    def load(self, nquads: bytes) -> None:
        """Add these quads with Oxigraph's bulk loader (fast, not atomic: for a first build)."""

    @abstractmethod
    def clear(self) -> None:
        """Remove every graph (the store followed another database, or is built again)."""


class Embedded(RdfStore):
    """pyoxigraph's store in a folder of this host (see the module's docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.lock_path = self.folder.with_name(self.folder.name + ".lock")
        self.state_path = self.folder / "hub-generation"
        self.format_path = self.folder / "hub-format"

    def generation(self) -> int:
        try:
            return int(self.state_path.read_text())
        except (FileNotFoundError, ValueError):
            return 0

    def format(self) -> int:
        """The ``RENDER_FORMAT`` of the graphs held (1: a store from before the format was written down)."""
        try:
            return int(self.format_path.read_text())
        except (FileNotFoundError, ValueError):
            return 1

    @contextmanager
    def locked(self, mode: int, wait_s: float) -> Iterator[bool]:
        """Hold the store's lock (``LOCK_SH`` to read, ``LOCK_EX`` to write) waiting up to ``wait_s``; yields
        whether it was taken."""
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a") as handle:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(handle, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        yield False
                        return
                    time.sleep(0.02)
            try:
                yield True
            finally:
                # Explicitly: a query child forked meanwhile by another thread shares this open file.
                fcntl.flock(handle, fcntl.LOCK_UN)

    @contextmanager
    def writing(self) -> Iterator[list[int]]:
        from pyoxigraph import Store

        with self.locked(fcntl.LOCK_EX, settings.HUB_SPARQL_WAIT_S) as taken:
            if not taken:
                raise StoreError("the store is busy with long queries")
            try:
                self._store = Store(str(self.folder))
            except OSError as exc:
                raise StoreError(str(exc)) from exc
            try:
                state = [self.generation(), self.format()]
                yield state
                self._store.flush()
                for path, value in ((self.format_path, state[1]), (self.state_path, state[0])):
                    temporary = path.with_suffix(".new")
                    temporary.write_text(str(value))
                    temporary.replace(path)
            finally:
                del self._store  # closes RocksDB before the lock is released

    def update(self, sparql_update: str) -> None:
        self._store.update(sparql_update)

    def load(self, nquads: bytes) -> None:
        from pyoxigraph import RdfFormat

        try:
            self._store.bulk_load(nquads, format=RdfFormat.N_QUADS)
        except OSError as exc:
            raise StoreError(str(exc)) from exc

    def clear(self) -> None:
        self._store.clear()


class Server(RdfStore):
    """An ``oxigraph serve`` shared by every web node (see the module's docstring)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    @contextmanager
    def writing(self) -> Iterator[list[int]]:
        from hub.metadata.models import SparqlState

        SparqlState.objects.get_or_create(pk=1)
        deadline = time.monotonic() + settings.HUB_SPARQL_WAIT_S
        with transaction.atomic():
            # Not blocking: another node's long sync (a first build) must not hold this request.
            while (row := SparqlState.objects.select_for_update(skip_locked=True).filter(pk=1).first()) is None:
                if time.monotonic() >= deadline:
                    raise StoreError("another web node is syncing the store")
                time.sleep(0.05)
            state = [row.generation, row.format]
            yield state
            SparqlState.objects.filter(pk=1).update(generation=state[0], format=state[1])

    def update(self, sparql_update: str) -> None:
        self._post("/update", sparql_update.encode(), "application/sparql-update")

    def load(self, nquads: bytes) -> None:
        self._post("/store?no_transaction", nquads, "application/n-quads")  # the server's bulk loader

    def _post(self, path: str, body: bytes, content_type: str) -> None:
        try:
            response = requests.post(f"{self.url}{path}", data=body, timeout=300,
                                     headers={"Content-Type": content_type})
        except requests.RequestException as exc:
            raise StoreError(f"the SPARQL store at {self.url} did not answer ({type(exc).__name__})") from exc
        if response.status_code >= 300:
            raise StoreError(f"the SPARQL store refused a write: {response.status_code} {response.text[:300]}")

    def clear(self) -> None:
        self.update("CLEAR ALL")


def current() -> RdfStore:
    """The store these settings name."""
    if settings.HUB_SPARQL_STORE_URL:
        return Server(settings.HUB_SPARQL_STORE_URL)
    return Embedded(settings.HUB_SPARQL_STORE_DIR)


def registry_generation() -> int:
    """The generation of the registry's latest committed change (one row)."""
    from hub.search.models import SearchState

    return SearchState.objects.filter(pk=1).values_list("generation", flat=True).first() or 0


def pending(store: RdfStore) -> bool:
    """Whether the registry changed since the store last synced (without taking the store's lock)."""
    held = (store.generation(), store.format()) if isinstance(store, Embedded) else _server_state()
    return held != (registry_generation(), RENDER_FORMAT)


def _server_state() -> tuple[int, int]:
    from hub.metadata.models import SparqlState

    return SparqlState.objects.filter(pk=1).values_list("generation", "format").first() or (0, RENDER_FORMAT)


def sync(store: RdfStore | None = None) -> int:
    """Bring the store up to the registry's latest change; returns how many artifacts were rendered again."""
    from hub.search.models import SearchEntry

    store = store or current()
    with store.writing() as state:
        now, held = registry_generation(), state[0]
        if now == held and state[1] == RENDER_FORMAT:
            return 0
        # Built afresh, rendered in another format (an upgrade), or it followed another database (restored, rolled
        # back): every graph again.
        if now < held or held == 0 or state[1] != RENDER_FORMAT:
            count = build(store)
        else:
            changed = list(SearchEntry.objects.filter(seq__gt=held, seq__lte=now).values_list("artifact_id", flat=True))
            changed = sorted(set(changed) | _citing(changed))
            for start in range(0, len(changed), BATCH):
                store.update(render(changed[start:start + BATCH]))
            count = len(changed)
        state[:] = [now, RENDER_FORMAT]
        return count


def build(store: RdfStore) -> int:
    """Clear the store and load every public, live version, ``BULK`` artifacts at a time (by primary key, so
    nothing grows with the catalogue); returns how many artifacts were rendered."""
    store.clear()
    count, after = 0, 0
    while batch := list(Artifact.objects.filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[:BULK]):
        store.load(nquads(batch))
        count, after = count + len(batch), batch[-1]
    return count


def _citing(artifact_ids: list[int]) -> set[int]:
    """The artifacts with a version that names a version of one of ``artifact_ids`` as a source."""
    found: set[int] = set()
    for start in range(0, len(artifact_ids), 500):
        found.update(ProvenanceLink.objects.filter(target__artifact_id__in=artifact_ids[start:start + 500])
                     .values_list("version__artifact_id", flat=True))
    return found


def _graphs(artifact_ids: Iterable[int]) -> Iterator[tuple[str, str | None]]:
    """Each version of these artifacts: its graph's name, and its N-Triples as the public sees it (None where it
    is not public and live). The batch's files, sources, neighbours and measurements are read in a few queries."""
    from ontology.graph import to_graph

    public = Viewer.public()
    neighbours = Prefetch("artifact__versions", queryset=with_variant_flag(
        Version.objects.only("pk", "pid", "label", "created", "deleted_at", "artifact_id")))
    versions = (Version.objects.filter(artifact_id__in=list(artifact_ids)).select_related("artifact__owner")
                .prefetch_related("files", "provenance__target__artifact__owner", "benchmarks", neighbours)
                .order_by("pk"))
    for version in versions:
        artifact = version.artifact
        if version.deleted_at or artifact.deleted_at or artifact.visibility != Artifact.Visibility.PUBLIC:
            yield graph_name(version.pk), None
        else:
            graph = to_graph(version_record(version, public), prefixes=False)
            yield graph_name(version.pk), graph.serialize(format="nt")


def render(artifact_ids: Iterable[int]) -> str:
    """One SPARQL Update that drops the graphs of every version of these artifacts and inserts again those of
    their public, live versions, as the public sees them."""
    drops, inserts = [], []
    for name, triples in _graphs(artifact_ids):
        drops.append(f"DROP SILENT GRAPH <{name}>")
        if triples is not None:
            inserts.append(f"GRAPH <{name}> {{\n{triples}}}")
    text = ";\n".join(drops)
    if inserts:
        text += (";\n" if text else "") + "INSERT DATA {\n" + "\n".join(inserts) + "\n}"
    return text or "CLEAR SILENT GRAPH <urn:hpcfair:nothing>"


def nquads(artifact_ids: Iterable[int]) -> bytes:
    """The public, live versions of these artifacts as N-Quads, each in its own graph (for the bulk loader)."""
    lines = []
    for name, triples in _graphs(artifact_ids):
        if triples:  # N-Triples: one triple a line ("\n" only: U+2028, \x85, \x0c stay raw in literals), each
            # ending " ."; the graph goes before that dot
            lines.extend(f"{line[:-1]}<{name}> .\n" for line in triples.split("\n") if line)
    return "".join(lines).encode()

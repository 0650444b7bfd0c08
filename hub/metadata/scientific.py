"""HDF5, NetCDF and Zarr files of a dataset version described for its metadata, previewed for its page.

The files are read only by the sandbox child (``hpcfair.convert.child``, task ``scidata``, which calls
``hpcfair.scidata``): under the conversion sandbox's confinement, with a memory cap and a deadline
(``HUB_SCIDATA_*``). What it refuses (external links, virtual datasets, a compression bomb, a billion tiny
chunks, a file that lies about its shapes) is a 400 with the child's code; a child that runs out of
memory or time is a 400 ``scientific_unreadable``.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings
from hpcfair.convert.errors import ConversionError
from hpcfair.convert.sandbox import Limits, output_file, place, reads_in_place, run
from hpcfair.scidata import parse_rows, zarr_root

from hub.errors import HubError

log = logging.getLogger(__name__)

FILE_SUFFIXES = (".h5", ".hdf5", ".he5", ".nc", ".nc4", ".netcdf")
ZARR_METADATA = {"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"}
REFUSALS = {"scientific_external", "scientific_too_large", "scientific_too_many_chunks", "scientific_inconsistent",
            "scientific_compression_bomb", "scientific_unreadable"}
MAX_FILES = 20  # scientific files (or stores) described per version


def units(files: Sequence[Any]) -> list[tuple[str, list[Any]]]:
    """(name, files) of each HDF5/NetCDF file and each Zarr store among ``files`` (objects with ``path``)."""
    out: dict[str, list[Any]] = {}
    for item in files:
        root = zarr_root(item.path)
        if root is not None:
            out.setdefault(root, []).append(item)
        elif PurePosixPath(item.path.lower()).suffix in FILE_SUFFIXES:
            out[item.path] = [item]
    return list(out.items())[:MAX_FILES]


def limits(extract: bool = False) -> Limits:
    """The child's bounds; one that extracts a variable may write a file as large as a job reads (a ``.npy``
    of up to ``HUB_SCIDATA_EXTRACT_MAX_BYTES`` and its header), others 64 MiB, and inflates its chunks with
    ``HUB_SCIDATA_THREADS`` threads."""
    file_mb = settings.HUB_SCIDATA_EXTRACT_MAX_BYTES // 2**20 + 1 if extract else 64
    return Limits(memory_mb=settings.HUB_SCIDATA_MEMORY_MB, cpu_seconds=settings.HUB_SCIDATA_WALL_S,
                  wall_seconds=settings.HUB_SCIDATA_WALL_S, threads=settings.HUB_SCIDATA_THREADS if extract else 1,
                  file_mb=file_mb,
                  uid=settings.HUB_CONVERT_UID, gid=settings.HUB_CONVERT_GID)


def bounds() -> dict[str, Any]:
    return {"max_nodes": settings.HUB_SCIDATA_MAX_NODES, "max_chunks": settings.HUB_SCIDATA_MAX_CHUNKS,
            "max_ratio": settings.HUB_SCIDATA_MAX_RATIO, "max_chunk_bytes": settings.HUB_SCIDATA_MAX_CHUNK_BYTES}


def _place(source: Path, dest: Path) -> None:
    """A copy of ``source`` at ``dest`` in the child's folder, where the sandbox cannot mount it read-only.
    Never a hard link: the folder is handed to the child's user, who could then write into the staged upload
    after its sha256 was taken."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)


def read_unit(name: str, members: Sequence[tuple[str, Path]], *, auto: int = 0,
              variables: Sequence[str] = (), extract: str = "", dest: Path | None = None,
              on_rows: Callable[[int, int, Path], None] | None = None, in_place: bool = False) -> dict[str, Any]:
    """Run the child over one file or store (``members``: (path in the version, local copy)); its result:
    {"structure": ..., "previews": [...]}. With ``extract`` (a variable's path) the child also writes that
    variable as a ``.npy``, moved to ``dest`` (at most ``HUB_SCIDATA_EXTRACT_MAX_BYTES``) unless ``on_rows``
    (called with the rows written, the total and the child's folder as they land) put it there first;
    ``in_place``, for a file read where it lies: where its values are one run of raw bytes of the file,
    nothing is written and ``extracted["extent"]`` says where they lie (``hpcfair.scidata.stored_extent``).
    A coded 400 for what the child refused."""
    work = Path(tempfile.mkdtemp(prefix="hub-scidata-"))
    try:
        root = zarr_root(members[0][0]) if len(members) > 1 or zarr_root(members[0][0]) else None
        read_only: list[tuple[Path, str]] = []
        if root is not None:
            for path, local in members:
                _place(local, work / "store.zarr" / path[len(root) + 1:])
            source = "store.zarr"
        else:
            source = "data" + PurePosixPath(name).suffix.lower()
            if reads_in_place(members[0][1]):  # mounted read-only for the child: no copy of a file of any size
                (work / source).touch()
                read_only = [(members[0][1], source)]
            else:
                _place(members[0][1], work / source)
        def line(text: str) -> None:
            rows = parse_rows(text)
            if rows is not None:
                on_rows(*rows, work)

        request = {"task": "scidata", "source": source, "bounds": bounds(), "auto": auto,
                   "previews": list(variables), "extract": extract,
                   "max_bytes": settings.HUB_SCIDATA_EXTRACT_MAX_BYTES,
                   "slab_bytes": settings.HUB_INFER_BATCH_BYTES,  # slabs of a job's batches, in whole chunks
                   "threads": settings.HUB_SCIDATA_THREADS, "in_place": in_place and bool(read_only)}
        try:
            result = run(request, work, limits(bool(extract)), hide=_hidden(), on_line=line if on_rows else None,
                         read_only=read_only)
        except ConversionError as exc:
            if exc.code in REFUSALS:
                raise HubError(exc.code, f"{name}: {exc.detail}") from None
            log.warning("scientific read of %s failed: %s %s", name, exc.code, exc.detail)
            raise HubError("scientific_unreadable", f"{name} could not be read as HDF5, NetCDF or Zarr within the "
                                                 f"hub's limits ({settings.HUB_SCIDATA_MEMORY_MB} MB, "
                                                 f"{settings.HUB_SCIDATA_WALL_S} s): {exc.detail}") from None
        if extract and dest is not None and not (result.get("extracted") or {}).get("extent"):
            if os.path.lexists(dest):  # linked while the child wrote it: this process's own file now
                if os.lstat(dest).st_uid != os.geteuid():
                    os.chown(dest, os.geteuid(), os.getegid(), follow_symlinks=False)
            else:
                place(work, "variable.npy", dest)
        return {"structure": result.get("structure") or {}, "previews": result.get("previews") or [],
                "extracted": result.get("extracted")}
    finally:
        shutil.rmtree(work, ignore_errors=True)


class VariableStream:
    """A variable read by the sandbox child, in a thread, into the ``.npy`` at ``dest``, whose rows a job runs
    as they land (``wait``): reading the next slab overlaps running the last. ``dest`` is a hard link to the
    child's file, made from a descriptor opened without following links, so the child can change only that
    file's values, never point the job at another file. ``in_place``: a file whose values the child finds as one
    run of its own bytes is not copied: ``extent`` then says where they lie in ``file`` (``mapped_extent``)."""

    def __init__(self, name: str, members: Sequence[tuple[str, Path]], variable: str, dest: Path,
                 cleanup: Path | None = None, in_place: bool = False) -> None:
        self.dest, self.done, self.total = dest, 0, None
        self.finished, self.error = False, None
        self.file, self.extent = members[0][1], None
        self._linked: bool | None = None
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(name, members, variable, cleanup, in_place),
                                        daemon=True)

    def start(self) -> VariableStream:
        """Start the child; back once ``dest`` holds the ``.npy`` (its rows still to come) or the read failed."""
        self._thread.start()
        self.wait(0)
        return self

    def wait(self, rows: int) -> None:
        """Until the first ``rows`` rows are in ``dest`` (all of them when the variable has no rows axis); the
        child's coded failure is raised here."""
        def there() -> bool:
            return self.error is not None or self.finished or (self.total is not None and self.done >= rows)

        with self._changed:
            self._changed.wait_for(there, timeout=settings.HUB_SCIDATA_WALL_S + 30)
        if self.error is not None:
            raise self.error
        if not there():
            raise HubError("scientific_unreadable", "The variable's reader stopped answering.")

    def _read(self, name: str, members: Sequence[tuple[str, Path]], variable: str, cleanup: Path | None,
              in_place: bool) -> None:
        try:
            result = read_unit(name, members, extract=variable, dest=self.dest, on_rows=self._landed,
                               in_place=in_place)
            self.extent = (result.get("extracted") or {}).get("extent")
            outcome = {"finished": True}
        except Exception as exc:  # noqa: BLE001 - raised to the job by wait()
            outcome = {"error": exc if isinstance(exc, HubError) else
                       HubError("scientific_unreadable", f"{name}: the variable could not be read.")}
            if not isinstance(exc, HubError):
                log.exception("streaming %s of %s failed", variable, name)
        finally:
            if cleanup is not None and self.extent is None:  # a mapped file stays until the job's folder goes
                shutil.rmtree(cleanup, ignore_errors=True)
        with self._changed:
            self.finished, self.error = outcome.get("finished", False), outcome.get("error")
            if self.finished and self.total is not None:
                self.done = self.total
            self._changed.notify_all()

    def _landed(self, done: int, total: int, work: Path) -> None:
        if self._linked is None:
            try:
                _link_output(work, "variable.npy", self.dest)
                self._linked = True
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                self._linked = False  # the job's folder is on another file system: it waits for the whole file
        if not self._linked:
            return
        with self._changed:
            self.total, self.done = total, min(max(done, self.done), total)
            self._changed.notify_all()


def _link_output(work: Path, relative: str, dest: Path) -> None:
    """``dest`` as a second name of the regular file with one link the child wrote at ``relative``
    (``output_file``'s checks); refused unless ``dest`` then is that very file (the one a descriptor opened
    without following links holds), whatever the child did with its name in between."""
    source = output_file(work, relative)
    descriptor = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        held = os.fstat(descriptor)
        if stat.S_ISREG(held.st_mode) and held.st_nlink == 1:
            os.link(source, dest, follow_symlinks=False)
            linked = os.lstat(dest)
            if stat.S_ISREG(linked.st_mode) and (linked.st_dev, linked.st_ino) == (held.st_dev, held.st_ino):
                return
            dest.unlink()
        raise HubError("scientific_unreadable", "The variable's reader left something other than its own file.")
    finally:
        os.close(descriptor)


def _hidden() -> list[Path]:
    return [Path(p) for p in (settings.VAR_DIR, settings.HUB_STORAGE.get("DIR"), settings.HUB_UPLOAD_DIR) if p]


def facts(files: Sequence[Any]) -> dict[str, Any]:
    """``{"scientific": [{path, format, groups, variables, attributes, ...}], "format": ...}`` for the version's
    scientific files (``FileInfo``s); {} when it has none. Files past ``HUB_SCIDATA_MAX_BYTES`` are listed
    with their format and size and not read."""
    described = []
    for name, members in units(files):
        size = sum(m.size for m in members)
        store = zarr_root(members[0].path) is not None
        if store:  # a store's structure is in its metadata files: only those go to the child
            members = [m for m in members if PurePosixPath(m.path).name in ZARR_METADATA]
            if not members:
                continue
        if sum(m.size for m in members) > settings.HUB_SCIDATA_MAX_BYTES:
            described.append({"path": name, "format": "zarr" if store else None, "size": size, "read": False})
            continue
        found = read_unit(name, [(m.path, m.local) for m in members])
        described.append({"path": name, "size": size, **found["structure"]})
    if not described:
        return {}
    out: dict[str, Any] = {"scientific": described}
    formats = {d["format"] for d in described if d.get("format")}
    if len(formats) == 1:
        out["format"] = formats.pop()
    return out


def unit_of(metadata: dict[str, Any], name: str) -> dict[str, Any]:
    """The ``scientific`` entry of the file or store ``name``; a 404 ``not_found`` where the hub did not read
    it (none such, or larger than ``HUB_SCIDATA_MAX_BYTES``)."""
    unit = next((d for d in metadata.get("scientific") or [] if d.get("path") == name), None)
    if unit is None or unit.get("read") is False:
        raise HubError("not_found", f"The version has no HDF5, NetCDF or Zarr file {name!r} that the hub read"
                                    f"{' (it is larger than HUB_SCIDATA_MAX_BYTES)' if unit else ''}.")
    return unit


def variable_input(metadata: dict[str, Any], reference: str) -> tuple[str, str] | None:
    """``tas.nc:/tas`` as (file or store, variable) when the version's metadata describes that variable; None
    when ``reference`` names no variable. A 404 ``not_found`` naming what the file has otherwise."""
    from hpcfair.scidata import split_reference

    found = split_reference(reference)
    if found is None:
        return None
    name, variable = found
    unit = unit_of(metadata, name)
    paths = [v["path"] for v in unit.get("variables") or []]
    if variable not in paths:
        raise HubError("not_found", f"{name} has no variable {variable!r}; it has {', '.join(paths[:20]) or 'none'}.")
    return name, variable


def standard_names(metadata: dict[str, Any]) -> list[str]:
    """Every CF ``standard_name`` of the version's variables, in order, once each."""
    names = (v.get("standard_name") for d in metadata.get("scientific") or [] for v in d.get("variables") or [])
    return list(dict.fromkeys(n for n in names if isinstance(n, str) and n))


def variable_names(metadata: dict[str, Any]) -> list[str]:
    """The names of the version's (non-coordinate) variables, once each."""
    names = (v.get("name") for d in metadata.get("scientific") or [] for v in d.get("variables") or []
             if not v.get("coordinate"))
    return list(dict.fromkeys(n for n in names if isinstance(n, str) and n))

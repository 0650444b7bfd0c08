"""HDF5, NetCDF and Zarr read as simulation scientists write them: the structure (groups, variables with
dtype, shape, chunks, dimensions, coordinates, units, CF ``standard_name``, global attributes), a
variable's first values and a small PNG of a 1-D or 2-D slice.

These files are untrusted: the hub calls this module only inside the sandbox child
(``hpcfair.convert.child``, task ``scidata``). Refused with a code (``ScienceRefused``) before anything is
decompressed: external links, virtual datasets and external raw storage (bytes outside the file), more
nodes than ``max_nodes``, a variable of more than ``max_chunks`` chunks, a contiguous variable that claims
more bytes than the file holds (a file that lies about its shapes), a chunked one whose stored bytes
expand more than ``max_ratio`` times (a compression bomb). A preview reads at most one chunk's worth
of values, and never a chunk larger than ``max_chunk_bytes``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from hpcfair import png

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
NETCDF3_SIGNATURES = (b"CDF\x01", b"CDF\x02", b"CDF\x05")
GLOBAL_ATTRIBUTES = ("title", "institution", "source", "Conventions", "history", "references", "comment")
VARIABLE_ATTRIBUTES = ("units", "standard_name", "long_name")
ATTRIBUTE_CHARS = 500
ATTRIBUTES_KEPT = 50
PREVIEW_VALUES = 20
PLOT_SIZE = (320, 160)  # width, height of a slice's PNG
PLOT_POINTS = 4096  # values of a 1-D slice plotted (a 2-D slice: PLOT_POINTS per side at most)


class ScienceRefused(Exception):
    """A file refused before its data is read; ``code`` is one of the hub's error codes."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code, self.detail = code, detail


@dataclass(frozen=True)
class Bounds:
    max_nodes: int = 5000
    max_chunks: int = 10_000_000
    max_ratio: float = 1000.0
    max_chunk_bytes: int = 64 * 2**20


def sniff(path: Path) -> str | None:
    """hdf5, netcdf or zarr from the bytes (a folder with zarr.json/.zgroup is a Zarr store); None otherwise."""
    path = Path(path)
    if path.is_dir():
        return "zarr" if any((path / name).is_file() for name in ("zarr.json", ".zgroup", ".zarray")) else None
    with path.open("rb") as handle:
        head = handle.read(8)
    if head.startswith(NETCDF3_SIGNATURES):
        return "netcdf"
    if head == HDF5_SIGNATURE:
        return "netcdf" if path.suffix.lower() in (".nc", ".nc4", ".netcdf") else "hdf5"
    return None


def _text(value: Any) -> Any:
    """An attribute's value as JSON: numbers and short strings; arrays as lists of at most 20 values."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [_text(v) for v in value[:PREVIEW_VALUES]]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return str(value)[:ATTRIBUTE_CHARS]


def _attributes(pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in pairs:
        if len(out) >= ATTRIBUTES_KEPT:
            break
        name = str(name)
        if not name.startswith("_") and name not in ("DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME"):
            out[name[:100]] = _text(value)
    return out


def _chunk_count(shape: tuple[int, ...], chunks: tuple[int, ...] | None) -> int:
    if not chunks:
        return 1
    return math.prod(math.ceil(s / c) if c else 1 for s, c in zip(shape, chunks, strict=False))


class _Walk:
    """Counts nodes against the bounds while a reader lists them."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds, self.nodes = bounds, 0

    def node(self) -> None:
        self.nodes += 1
        if self.nodes > self.bounds.max_nodes:
            raise ScienceRefused("scientific_too_large", f"The file holds more than {self.bounds.max_nodes} groups "
                                                         "and variables; the hub describes files up to that.")

    def chunks(self, name: str, shape: tuple[int, ...], chunks: tuple[int, ...] | None) -> None:
        count = _chunk_count(shape, chunks)
        if count > self.bounds.max_chunks:
            raise ScienceRefused("scientific_too_many_chunks",
                                 f"{name} is split into {count} chunks (chunks {list(chunks or [])} over shape "
                                 f"{list(shape)}); the hub reads variables of up to {self.bounds.max_chunks} chunks. "
                                 "Rechunk it into larger chunks (h5repack -l, nccopy -c).")


def _variable(path: str, dtype: Any, shape: tuple[int, ...], chunks: Any, dims: list[str],
              attributes: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": path, "name": path.rsplit("/", 1)[-1], "dtype": str(dtype),
                             "shape": [int(s) for s in shape], "chunks": [int(c) for c in chunks] if chunks else None,
                             "dims": dims}
    for key in VARIABLE_ATTRIBUTES:
        if isinstance(attributes.get(key), str) and attributes[key]:
            entry[key] = attributes[key]
    if isinstance(attributes.get("coordinates"), str):
        entry["coordinates"] = attributes["coordinates"].split()[:20]
    entry["attributes"] = {k: v for k, v in attributes.items() if k not in VARIABLE_ATTRIBUTES}
    return entry


def _mark_coordinates(variables: list[dict[str, Any]]) -> None:
    """A 1-D variable named as its dimension (``lat(lat)``), or named in another's ``coordinates``, is a
    coordinate (the CF conventions' coordinate variables)."""
    named = {c for v in variables for c in v.get("coordinates", [])}
    for v in variables:
        v["coordinate"] = (len(v["dims"]) == 1 and v["dims"][0] == v["name"]) or v["name"] in named


# --- HDF5 -----------------------------------------------------------------------------------------------


def _h5_check(path: Path, walk: _Walk) -> Any:
    """The open h5py file after every link and dataset was checked (nothing of the data read)."""
    import h5py

    handle = h5py.File(path, "r")
    size = path.stat().st_size
    stack = [("/", handle)]
    while stack:
        name, group = stack.pop()
        for key in group:
            walk.node()
            link = group.get(key, getlink=True)
            full = f"{name.rstrip('/')}/{key}"
            if isinstance(link, h5py.ExternalLink):
                raise ScienceRefused("scientific_external", f"{full} is an external link to another file: the "
                                                            "hub reads only what is inside the file. Copy the data in "
                                                            "(h5repack, or h5py's copy) and upload again.")
            if isinstance(link, h5py.SoftLink):
                continue
            item = group[key]
            if isinstance(item, h5py.Group):
                stack.append((full, item))
                continue
            if not isinstance(item, h5py.Dataset):
                continue
            if item.is_virtual:
                raise ScienceRefused("scientific_external", f"{full} is a virtual dataset whose bytes are in other "
                                                            "files; the hub reads only what is inside the file.")
            if item.external:
                raise ScienceRefused("scientific_external", f"{full} keeps its bytes in external raw files; "
                                                            "copy them into the file.")
            walk.chunks(full, item.shape, item.chunks)
            nbytes = math.prod(item.shape) * item.dtype.itemsize
            stored = item.id.get_storage_size()
            if item.chunks is None and stored and nbytes > size:
                raise ScienceRefused("scientific_inconsistent", f"{full} claims {nbytes} bytes of data "
                                                                f"in a file of {size} bytes.")
            if item.chunks is not None and stored and nbytes / stored > walk.bounds.max_ratio:
                raise ScienceRefused("scientific_compression_bomb",
                                     f"{full} expands {nbytes // stored}-fold from the {stored} bytes stored "
                                     f"(the hub reads up to {walk.bounds.max_ratio:g}-fold).")
    return handle


def _h5_describe(path: Path, walk: _Walk) -> dict[str, Any]:
    import h5py

    handle = _h5_check(path, walk)
    groups, variables = ["/"], []
    try:
        def visit(name: str, item: Any) -> None:
            if isinstance(item, h5py.Group):
                groups.append("/" + name)
            elif isinstance(item, h5py.Dataset):
                dims = []
                for index, dim in enumerate(item.dims):
                    label = dim.label or (dim[0].name.rsplit("/", 1)[-1] if len(dim) else "")
                    dims.append(label or f"dim_{index}")
                if item.attrs.get("CLASS") == b"DIMENSION_SCALE" and item.ndim == 1:
                    dims = [name.rsplit("/", 1)[-1]]
                variables.append(_variable("/" + name, item.dtype, item.shape, item.chunks, dims,
                                           _attributes(item.attrs.items())))

        handle.visititems(visit)
        attributes = _attributes(handle.attrs.items())
    finally:
        handle.close()
    return {"groups": groups, "variables": variables, "attributes": attributes}


# --- NetCDF ---------------------------------------------------------------------------------------------


def _nc_describe(path: Path, walk: _Walk) -> dict[str, Any]:
    import netCDF4

    with path.open("rb") as handle:
        if handle.read(8) == HDF5_SIGNATURE:  # NetCDF-4 is HDF5: its links are checked as HDF5's are
            _h5_check(path, _Walk(walk.bounds)).close()
    groups, variables = [], []
    with netCDF4.Dataset(path, "r") as root:
        root.set_auto_mask(False)
        stack = [root]
        while stack:
            group = stack.pop()
            walk.node()
            base = group.path.rstrip("/")
            groups.append(group.path)
            for name, var in group.variables.items():
                walk.node()
                chunking = var.chunking() if root.data_model.startswith("NETCDF4") else "contiguous"
                chunks = None if chunking in ("contiguous", None) else tuple(chunking)
                walk.chunks(f"{base}/{name}", var.shape, chunks)
                attributes = _attributes((k, var.getncattr(k)) for k in var.ncattrs())
                variables.append(_variable(f"{base}/{name}", var.dtype, var.shape, chunks, list(var.dimensions),
                                           attributes))
            stack.extend(reversed(list(group.groups.values())))
        attributes = _attributes((k, root.getncattr(k)) for k in root.ncattrs())
        dimensions = {name: len(dim) for name, dim in root.dimensions.items()}
    _mark_coordinates(variables)
    return {"groups": groups, "variables": variables, "attributes": attributes, "dimensions": dimensions}


# --- Zarr -----------------------------------------------------------------------------------------------


def _zarr_open(path: Path) -> Any:
    import zarr

    return zarr.open_group(store=str(path), mode="r")


def _zarr_describe(path: Path, walk: _Walk) -> dict[str, Any]:
    import zarr

    root = _zarr_open(path)
    groups, variables = ["/"], []
    stack = [("", root)]
    while stack:
        base, group = stack.pop()
        for name, item in sorted(group.members(), key=lambda pair: pair[0]):
            walk.node()
            full = f"{base}/{name}"
            if isinstance(item, zarr.Group):
                groups.append(full)
                stack.append((full, item))
                continue
            attrs = dict(item.attrs)
            walk.chunks(full, item.shape, item.chunks)
            names = getattr(item.metadata, "dimension_names", None) or attrs.get("_ARRAY_DIMENSIONS") or []
            dims = [str(n) if n else f"dim_{i}" for i, n in enumerate(names)] or \
                [f"dim_{i}" for i in range(len(item.shape))]
            variables.append(_variable(full, item.dtype, item.shape, item.chunks, dims,
                                       _attributes(attrs.items())))
    _mark_coordinates(variables)
    return {"groups": groups, "variables": variables, "attributes": _attributes(dict(root.attrs).items()),
            "zarr_format": root.metadata.zarr_format}


READERS = {"hdf5": _h5_describe, "netcdf": _nc_describe, "zarr": _zarr_describe}


def describe(path: Path, bounds: Bounds | None = None) -> dict[str, Any]:
    """The structure of one file (or Zarr store): format, groups, variables, global attributes."""
    path = Path(path)
    found = sniff(path)
    if found is None:
        raise ScienceRefused("scientific_unreadable", f"{path.name} is not HDF5, NetCDF or a Zarr store.")
    out = {"format": found, **READERS[found](path, _Walk(bounds or Bounds()))}
    if found == "hdf5":
        _mark_coordinates(out["variables"])
    return out


# --- values and plots -----------------------------------------------------------------------------------


def _open_variable(path: Path, variable: str) -> tuple[Any, Any]:
    """(array-like that slices lazily and gives the values as stored, closer) for ``variable`` of the file or
    store at ``path``; ``decoding`` interprets them."""
    found = sniff(path)
    if found == "zarr":
        return _zarr_open(path)[variable.strip("/")], None
    if found == "netcdf":
        import netCDF4

        root = netCDF4.Dataset(path, "r")
        root.set_auto_maskandscale(False)
        try:
            return root[variable], root
        except (IndexError, KeyError):
            root.close()
            raise KeyError(variable) from None
    import h5py

    handle = h5py.File(path, "r")
    try:
        item = handle[variable]
    except KeyError:
        handle.close()
        raise
    return item, handle


def _attribute(array: Any, name: str) -> Any:
    """One attribute of an h5py, netCDF4 or zarr variable, or None."""
    if callable(getattr(array, "ncattrs", None)):
        return array.getncattr(name) if name in array.ncattrs() else None
    return dict(array.attrs).get(name)


def decoding(array: Any) -> tuple[Any, Any]:
    """The CF decoding of a variable's stored values (what netCDF4 and xarray do): (dtype of the values, a
    function ``decode(raw, out)`` writing them into ``out``, or None where they are used as stored).
    Packed values (``scale_factor``, ``add_offset``) are unpacked into their attributes' float type;
    ``_FillValue`` and ``missing_value`` become NaN, an integer variable with one becoming float32 (8-16 bit)
    or float64."""
    import numpy as np

    stored = np.dtype(array.dtype)
    if stored.kind not in "iuf":
        return stored, None
    scale, offset = (_attribute(array, name) for name in ("scale_factor", "add_offset"))
    fills = [v for name in ("_FillValue", "missing_value") if (v := _attribute(array, name)) is not None]
    fills = [f for f in np.asarray(fills, dtype="float64").reshape(-1).tolist() if math.isfinite(f)] if fills else []
    packing = [np.asarray(v).dtype for v in (scale, offset) if v is not None]
    if packing:
        dtype = np.promote_types(np.result_type(*packing), np.float32)
    elif fills and stored.kind in "iu":
        dtype = np.dtype(np.float32 if stored.itemsize <= 2 else np.float64)
    else:
        dtype = stored
    if not packing and not fills:
        return stored, None
    scale = None if scale is None else np.asarray(scale, dtype).reshape(-1)[0]
    offset = None if offset is None else np.asarray(offset, dtype).reshape(-1)[0]

    def decode(raw: Any, out: Any) -> None:
        missing = np.isin(raw, np.asarray(fills).astype(raw.dtype)) if fills else None
        out[...] = raw
        if scale is not None:
            out *= scale
        if offset is not None:
            out += offset
        if missing is not None:
            out[missing] = np.nan

    return dtype, decode


def variable_dtype(path: Path, variable: str) -> Any:
    """The numpy dtype ``read_variable`` gives ``variable`` (after ``decoding``)."""
    array, closer = _open_variable(Path(path), variable)
    try:
        return decoding(array)[0]
    finally:
        if closer is not None:
            closer.close()


def first_slice(path: Path, variable: str, bounds: Bounds | None = None) -> Any:
    """A 1-D or 2-D numpy slice at the start of ``variable`` (leading axes at 0), within one chunk."""
    import numpy as np

    bounds = bounds or Bounds()
    array, closer = _open_variable(Path(path), variable)
    try:
        shape = tuple(array.shape)
        chunks = getattr(array, "chunks", None)
        if callable(getattr(array, "chunking", None)):
            chunking = array.chunking()
            chunks = None if chunking in ("contiguous", None) else tuple(chunking)
        itemsize = np.dtype(array.dtype).itemsize if array.dtype != str else 8
        if chunks and math.prod(chunks) * itemsize > bounds.max_chunk_bytes:
            raise ScienceRefused("scientific_too_large", f"{variable}'s chunks are larger than "
                                                         f"{bounds.max_chunk_bytes // 2**20} MiB; no preview.")
        keep = 2 if len(shape) >= 2 else len(shape)
        index = tuple([0] * (len(shape) - keep)
                      + [slice(0, min(s, PLOT_POINTS if keep == 1 else 512)) for s in shape[len(shape) - keep:]])
        raw = np.asarray(array[index] if shape else array[()])
        dtype, decode = decoding(array)
        if decode is None:
            return raw
        out = np.empty(raw.shape, dtype)
        decode(raw, out)
        return out
    finally:
        if closer is not None:
            closer.close()


SUFFIXES = (".h5", ".hdf5", ".he5", ".nc", ".nc4", ".netcdf", ".zarr")


def zarr_root(path: str) -> str | None:
    """The store a file of a version belongs to (``ocean.zarr`` for ``ocean.zarr/temp/c/0/0``), or None."""
    parts = PurePosixPath(path).parts
    for index, part in enumerate(parts[:-1]):
        if part.lower().endswith(".zarr"):
            return "/".join(parts[:index + 1])
    return None


def units_of(paths: Any) -> list[str]:
    """The HDF5/NetCDF files and Zarr stores among a dataset's file ``paths``, in order, once each."""
    found = (zarr_root(p) or (p if p.lower().endswith(SUFFIXES) else None) for p in paths)
    return list(dict.fromkeys(u for u in found if u))


def split_reference(text: str) -> tuple[str, str] | None:
    """``tas.nc:/tas`` as (``tas.nc``, ``/tas``): a file of a scientific format and a variable's path in it;
    None for anything else (``input.npy``, ``C:/data``)."""
    name, sep, variable = text.partition(":/")
    if not sep or not name.lower().endswith(SUFFIXES):
        return None
    return name, "/" + variable.strip("/")


def _slab_rows(shape: tuple, itemsize: int, slab_bytes: int, chunks: Any) -> int:
    """Rows per slab: at most ``slab_bytes``, whole chunks along the first axis where the variable is chunked."""
    step = max(slab_bytes // max(math.prod(shape[1:]) * itemsize, 1), 1)
    if isinstance(chunks, tuple) and chunks and chunks[0]:
        step = max(step // chunks[0], 1) * chunks[0]
    return step


ROWS_LINE = re.compile(r"rows (\d+) of (\d+)")


def rows_line(done: int, total: int) -> str:
    """The line an extracting child prints when ``done`` rows of ``total`` are in its ``.npy``."""
    return f"rows {done} of {total}"


def parse_rows(line: str) -> tuple[int, int] | None:
    """(done, total) of a ``rows_line``; None for another line."""
    found = ROWS_LINE.fullmatch(line)
    return (int(found[1]), int(found[2])) if found else None


class VariableReader:
    """A variable opened to read its rows (first axis) a slab at a time, its values as ``decoding`` says
    (unpacked, fill values as NaN): with h5py's ``read_direct`` straight into the array for HDF5 and NetCDF-4
    where nothing needs decoding, with the format's own library otherwise. A KeyError names a variable the
    file does not have; ``close`` (or ``with``) lets the file go."""

    def __init__(self, path: Path, variable: str, threads: int = 1) -> None:
        import numpy as np

        self._array, self._closer = _direct(Path(path), variable) or _open_variable(Path(path), variable)
        self.shape = tuple(self._array.shape)
        self.dtype, self._decode = decoding(self._array)
        self._stored = np.dtype(self._array.dtype)
        chunks = getattr(self._array, "chunks", None)
        if callable(getattr(self._array, "chunking", None)):
            chunks = None if self._array.chunking() in ("contiguous", None) else tuple(self._array.chunking())
        self.chunks = chunks
        self._read_direct = self._decode is None and callable(getattr(self._array, "read_direct", None))
        self._pool = None
        if threads > 1 and self._read_direct and _deflated(self._array):
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(threads, thread_name_prefix="inflate")

    def slab_rows(self, slab_bytes: int) -> int:
        """Rows per slab of at most ``slab_bytes`` (whole chunks along the first axis where it is chunked)."""
        return _slab_rows(self.shape, max(self.dtype.itemsize, self._stored.itemsize), slab_bytes, self.chunks)

    def read(self, start: int, stop: int, out: Any = None) -> Any:
        """Rows ``[start, stop)`` into ``out`` (a C-contiguous array of that many rows) or a new array; a
        variable without axes whole."""
        import numpy as np

        rows = np.s_[start:stop] if self.shape else ()
        if out is None:
            out = np.empty((min(stop, self.shape[0]) - start, *self.shape[1:]) if self.shape else (), self.dtype)
        if self._pool is not None and self.shape and _inflate_rows(self._array, start, stop, out, self._pool):
            pass  # deflated chunks inflated by several threads
        elif self._read_direct and self.shape:  # h5py straight into the array, no slab in between
            self._array.read_direct(out, rows)
        elif self._decode is not None:
            self._decode(np.asarray(self._array[rows]), out)
        else:
            out[...] = self._array[rows]
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._closer is not None:
            self._closer.close()
            self._closer = None

    def __enter__(self) -> VariableReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _deflated(array: Any) -> bool:
    """An h5py dataset whose only filters are deflate and byte shuffle (NetCDF-4's ``zlib=True``)."""
    filters = getattr(array, "_filters", None)
    return bool(array.chunks) and isinstance(filters, dict) and "gzip" in filters and set(filters) <= {"gzip",
                                                                                                      "shuffle"}


def _inflate_rows(array: Any, start: int, stop: int, out: Any, pool: Any) -> bool:
    """Rows ``[start, stop)`` of a ``_deflated`` dataset into ``out``: each chunk's stored bytes read by
    h5py, inflated (zlib lets go of the GIL; never past the chunk's declared size) and unshuffled in
    ``pool``'s threads, several chunks at once. False, with nothing written, where a chunk is unallocated
    or was stored without its filters: h5py reads those slabs."""
    import itertools
    import zlib

    import numpy as np

    chunks, shape, dtype = array.chunks, array.shape, array.dtype
    shuffled = "shuffle" in array._filters
    corners = list(itertools.product(range(start - start % chunks[0], stop, chunks[0]),
                                     *(range(0, size, step) for size, step in zip(shape[1:], chunks[1:],
                                                                                  strict=True))))
    stored = []
    for corner in corners:
        info = array.id.get_chunk_info_by_coord(corner)
        if info.byte_offset is None or info.filter_mask:
            return False
        stored.append(array.id.read_direct_chunk(corner)[1])

    expected = math.prod(chunks) * dtype.itemsize

    def place(corner: tuple[int, ...], data: bytes) -> None:
        inflater = zlib.decompressobj()
        flat = np.frombuffer(inflater.decompress(data, expected), np.uint8)
        if flat.size != expected or inflater.unconsumed_tail:  # a chunk that inflates past its declared size
            raise ScienceRefused("scientific_inconsistent", f"{array.name}: the chunk at {list(corner)} does not "
                                                            f"inflate to its declared {expected} bytes.")
        if shuffled and dtype.itemsize > 1:
            flat = flat.reshape(dtype.itemsize, -1).T
        chunk = np.ascontiguousarray(flat).view(dtype).reshape(chunks)
        first, last = max(start, corner[0]), min(stop, corner[0] + chunks[0])
        source = (slice(first - corner[0], last - corner[0]),
                  *(slice(0, min(step, size - at)) for at, step, size in zip(corner[1:], chunks[1:], shape[1:],
                                                                              strict=True)))
        target = (slice(first - start, last - start),
                  *(slice(at, at + min(step, size - at)) for at, step, size in zip(corner[1:], chunks[1:],
                                                                                    shape[1:], strict=True)))
        out[target] = chunk[source]

    list(pool.map(place, corners, stored))
    return True


def read_variable(path: Path, variable: str, slab_bytes: int = 64 * 2**20, out: Any = None,
                  on_rows: Any = None) -> Any:
    """The whole of ``variable`` as a numpy array (``VariableReader``'s values), read slab by slab along its
    first axis (each slab at most ``slab_bytes``, whole chunks where the variable is chunked), so no library
    holds a second full copy; into ``out`` when given (an array of its shape and dtype: a ``.npy`` mapped for
    writing). ``on_rows(done)`` after each slab. A KeyError names a variable the file does not have."""
    import numpy as np

    with VariableReader(path, variable) as reader:
        if not reader.shape:
            return reader.read(0, 0)
        total = reader.shape[0]
        out = np.empty(reader.shape, reader.dtype) if out is None else out
        step = reader.slab_rows(slab_bytes)
        for start in range(0, total, step):
            stop = min(start + step, total)
            reader.read(start, stop, out[start:stop])
            if on_rows is not None:
                on_rows(stop)
        return out


def write_variable(path: Path, variable: str, dest: Path, slab_bytes: int = 64 * 2**20, on_rows: Any = None,
                   threads: int = 1) -> tuple[tuple[int, ...], Any]:
    """``variable`` written as the ``.npy`` at ``dest``, slab by slab through one reused buffer with
    ``os.pwrite`` (no page faults on a shared mapping, no ``msync``: a reader that maps ``dest`` sees each
    slab in the page cache at once, bench/RESULTS.md), deflated chunks inflated by ``threads`` threads;
    ``on_rows(done)`` after each slab, ``on_rows(0)`` once the header is there. Its (shape, dtype)."""
    import os

    import numpy as np

    with VariableReader(path, variable, threads) as reader:
        shape, dtype = reader.shape, reader.dtype
        if not shape:
            np.save(dest, reader.read(0, 0), allow_pickle=False)
            return shape, dtype
        with open(dest, "wb") as handle:
            np.lib.format.write_array_header_1_0(handle, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                          "fortran_order": False, "shape": shape})
            offset = handle.tell()
            handle.truncate(offset + math.prod(shape) * dtype.itemsize)
        if on_rows is not None:
            on_rows(0)
        step, row_bytes = reader.slab_rows(slab_bytes), math.prod(shape[1:]) * dtype.itemsize
        buffer = np.empty((min(step, shape[0]), *shape[1:]), dtype)
        descriptor = os.open(dest, os.O_WRONLY)
        try:
            for start in range(0, shape[0], step):
                stop = min(start + step, shape[0])
                slab = reader.read(start, stop, buffer[:stop - start])
                view, written = memoryview(slab).cast("B"), 0
                while written < len(view):
                    written += os.pwrite(descriptor, view[written:], offset + start * row_bytes + written)
                if on_rows is not None:
                    on_rows(stop)
        finally:
            os.close(descriptor)
        return shape, dtype


MAX_EXTENT_CHUNKS = 100_000  # chunks looked at to find a variable's one run of bytes; past it, it is copied


def stored_extent(path: Path, variable: str) -> dict[str, Any] | None:
    """Where ``variable``'s values lie in an HDF5-based file as one run of raw bytes in row order, so that a
    job can map the file itself instead of a copy: {"offset", "shape", "dtype"} for a native-order numeric
    variable used as stored (no filter, nothing to decode), contiguous or in chunks that span whole rows and
    follow each other in the file; None otherwise (the variable is then copied slab by slab)."""
    import numpy as np

    found = _direct(Path(path), variable)
    if found is None:
        return None
    array, handle = found
    try:
        dtype, decode = decoding(array)
        if decode is not None or not dtype.isnative or array._filters or array.size == 0:
            return None
        row_bytes = math.prod(array.shape[1:]) * dtype.itemsize
        if array.chunks is None:
            offset = array.id.get_offset()
        else:
            offset = _chunk_run(array, row_bytes)
        if offset is None:
            return None
        return {"offset": int(offset), "shape": list(array.shape), "dtype": np.dtype(dtype).str}
    finally:
        handle.close()


def _chunk_run(array: Any, row_bytes: int) -> int | None:
    """The offset of the first chunk of a variable whose chunks span whole rows, are all written, unfiltered
    and back to back in row order; None otherwise."""
    chunks, shape = array.chunks, array.shape
    count = -(-shape[0] // chunks[0])
    if tuple(chunks[1:]) != tuple(shape[1:]) or count > MAX_EXTENT_CHUNKS:
        return None
    if array.id.get_num_chunks() != count:
        return None  # unwritten chunks read as the fill value
    found: list[tuple[int, int, int]] = []
    array.id.chunk_iter(lambda info: found.append((info.chunk_offset[0], info.byte_offset, info.size)))
    found.sort()
    size, start = chunks[0] * row_bytes, found[0][1]
    for index, (row, offset, stored) in enumerate(found):
        if row != index * chunks[0] or stored != size or offset != start + index * size:
            return None
    return start


def mapped_extent(path: Path, extent: dict[str, Any]) -> Any:
    """The read-only mapping of ``stored_extent``'s run of bytes in ``path`` as an array; a ValueError where
    the run does not fit in the file."""
    import os

    import numpy as np

    dtype, shape, offset = np.dtype(str(extent["dtype"])), tuple(int(n) for n in extent["shape"]), int(extent["offset"])
    if (dtype.kind not in "biuf" or not dtype.isnative or offset < 0 or not shape or min(shape) <= 0
            or offset + math.prod(shape) * dtype.itemsize > os.path.getsize(path)):
        raise ValueError("the variable's bytes do not lie within the file")
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


def _direct(path: Path, variable: str) -> tuple[Any, Any] | None:
    """``variable`` of an HDF5-based file (HDF5, NetCDF4) opened with h5py, whose ``read_direct`` reads slabs
    straight into the array: several times faster than netCDF4's slicing (bench/scidata_infer.py). None, for
    the general path: non-numeric, virtual or external data, a link on the way, not HDF5."""
    import h5py

    if path.is_dir() or not h5py.is_hdf5(path):
        return None
    handle = h5py.File(path, "r")
    parts, item = [p for p in variable.split("/") if p], handle
    for part in parts:
        if not isinstance(item, h5py.Group) or not isinstance(item.get(part, getlink=True), h5py.HardLink):
            item = None
            break
        item = item[part]
    if (not isinstance(item, h5py.Dataset) or not item.shape or item.dtype.kind not in "biuf" or item.is_virtual
            or item.external):
        handle.close()
        return None
    return item, handle


def preview(path: Path, variable: str, bounds: Bounds | None = None) -> dict[str, Any]:
    """``variable``'s first values and, for numbers, a PNG of its first 1-D or 2-D slice."""
    import numpy as np

    values = first_slice(path, variable, bounds)
    first = values.reshape(-1)[:PREVIEW_VALUES]
    if np.issubdtype(values.dtype, np.floating):  # float32 270.1 as 270.1, not 270.1000061035156
        shown = [float(np.format_float_positional(v, unique=True)) if np.isfinite(v) else str(v) for v in first]
    else:
        shown = [_text(v) for v in first.tolist()]
    out: dict[str, Any] = {"variable": variable, "slice_shape": list(values.shape), "values": shown}
    if values.ndim in (1, 2) and np.issubdtype(values.dtype, np.number) and values.size > 1:
        out["png"] = line_png(values) if values.ndim == 1 else heatmap_png(values)
    return out


def _scaled(values: Any) -> Any:
    import numpy as np

    data = np.asarray(values, dtype="float64")
    finite = np.isfinite(data)
    if not finite.any():
        return np.zeros_like(data), finite
    low, high = float(data[finite].min()), float(data[finite].max())
    span = high - low or 1.0
    return np.where(finite, (data - low) / span, 0.0), finite


def line_png(values: Any) -> bytes:
    """A 1-D slice as a line plot on white."""
    import numpy as np

    width, height = PLOT_SIZE
    scaled, finite = _scaled(values)
    image = np.full((height, width, 3), 255, dtype=np.uint8)
    xs = np.linspace(0, width - 1, len(scaled)).astype(int)
    ys = ((1 - scaled) * (height - 11) + 5).astype(int)
    for i in range(len(xs)):
        if not finite[i]:
            continue
        j = i + 1 if i + 1 < len(xs) and finite[i + 1] else i
        top, bottom = sorted((ys[i], ys[j]))
        for x in range(xs[i], xs[j] + 1):
            image[top:bottom + 1, x] = (31, 119, 180)
    return png.encode(image)


def heatmap_png(values: Any) -> bytes:
    """A 2-D slice as a heat map (dark blue to yellow), nearest-neighbour scaled to the plot's size."""
    import numpy as np

    width, height = PLOT_SIZE
    scaled, finite = _scaled(values)
    rows = np.linspace(0, scaled.shape[0] - 1, height).astype(int)
    cols = np.linspace(0, scaled.shape[1] - 1, width).astype(int)
    grid, seen = scaled[np.ix_(rows, cols)], finite[np.ix_(rows, cols)]
    low, high = np.array([68, 1, 84], dtype=float), np.array([253, 231, 37], dtype=float)
    image = (low + grid[..., None] * (high - low)).astype(np.uint8)
    image[~seen] = (200, 200, 200)
    return png.encode(image)

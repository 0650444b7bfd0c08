"""Issue 58: a job's input variable read by the sandboxed child as the job runs (``VariableStream``): rows
announced slab by slab into the ``.npy`` the job maps, the values those of the file (packed ones decoded),
the child's failures raised with their code, and the job's name never anything but the child's own file."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hpcfair.convert import sandbox
from hpcfair.convert.errors import ConversionError
from hpcfair.scidata import mapped_extent, stored_extent

from hub.errors import HubError
from hub.metadata import scientific

X = np.random.default_rng(58).standard_normal((1000, 64)).astype(np.float32)


def netcdf(path, packed: bool = False):
    import netCDF4

    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("sample", None)
        ds.createDimension("feature", 64)
        if packed:
            var = ds.createVariable("x", "i2", ("sample", "feature"), chunksizes=(50, 64), zlib=True)
            var.scale_factor, var.add_offset = np.float32(0.001), np.float32(0.0)
        else:
            var = ds.createVariable("x", "f4", ("sample", "feature"), chunksizes=(50, 64), zlib=True)
        var[:] = X
    return path


def test_rows_land_slab_by_slab_in_whole_chunks_and_equal_the_file(tmp_path, settings):
    settings.HUB_INFER_BATCH_BYTES = 120 * 64 * 4  # slabs of 120 rows: two chunks of 50 (whole chunks)
    seen = []
    stream = scientific.VariableStream("x.nc", [("x.nc", netcdf(tmp_path / "x.nc"))], "/x", tmp_path / "in.npy",
                                       cleanup=None)
    landed = stream._landed
    stream._landed = lambda done, total, work: (seen.append(done), landed(done, total, work))
    stream.start()
    mapped = np.load(tmp_path / "in.npy", mmap_mode="r")  # the job maps it before its rows are all there
    assert mapped.shape == X.shape and mapped.dtype == np.float32
    stream.wait(300)
    assert stream.done >= 300 and np.array_equal(mapped[:300], X[:300])
    stream.wait(sys.maxsize)
    assert stream.finished and seen == [0, *range(100, 1000, 100), 1000]
    assert np.array_equal(mapped, X)
    info = os.lstat(tmp_path / "in.npy")
    assert info.st_nlink == 1 and info.st_uid == os.geteuid()  # the child's folder is gone: the job's own file


def test_a_packed_variable_streams_decoded(tmp_path):
    stream = scientific.VariableStream("p.nc", [("p.nc", netcdf(tmp_path / "p.nc", packed=True))], "/x",
                                       tmp_path / "in.npy").start()
    stream.wait(sys.maxsize)
    got = np.load(tmp_path / "in.npy")
    assert got.dtype == np.float32 and np.abs(got - X).max() <= 0.0005 + 1e-6  # half a packing step


def test_the_childs_refusal_is_raised_by_wait(tmp_path):
    (tmp_path / "x.nc").write_bytes(b"CDF\x01 not really")
    stream = scientific.VariableStream("x.nc", [("x.nc", tmp_path / "x.nc")], "/x", tmp_path / "in.npy")
    with pytest.raises(HubError) as caught:
        stream.start()
    assert caught.value.error_code == "scientific_unreadable" and not (tmp_path / "in.npy").exists()


def test_only_the_childs_own_single_file_is_linked(tmp_path):
    work, dest = tmp_path / "work", tmp_path / "job" / "inputs.npy"
    work.mkdir()
    dest.parent.mkdir()
    secret = tmp_path / "secret.npy"
    np.save(secret, np.arange(3))
    (work / "variable.npy").symlink_to(secret)  # a child pointing the job at another file
    with pytest.raises(ConversionError, match="left a link"):
        scientific._link_output(work, "variable.npy", dest)
    assert not os.path.lexists(dest)
    (work / "variable.npy").unlink()
    os.link(secret, work / "variable.npy")  # another name of a file outside the folder
    with pytest.raises(ConversionError):
        scientific._link_output(work, "variable.npy", dest)
    assert not os.path.lexists(dest)
    (work / "variable.npy").unlink()
    np.save(work / "variable.npy", np.arange(5))
    scientific._link_output(work, "variable.npy", dest)
    assert os.path.samefile(dest, work / "variable.npy") and np.array_equal(np.load(dest), np.arange(5))


@pytest.mark.skipif(not sandbox.bwrap_path(), reason="needs bwrap")
def test_a_file_read_in_place_is_read_only_to_the_child(tmp_path):
    """The child reads the stored file where it lies (no copy of 1 GiB) through a read-only mount: it can
    neither write into it, nor replace or remove it."""
    blob, work = netcdf(tmp_path / "blob.nc"), tmp_path / "work"
    work.mkdir()
    (work / "data.nc").touch()
    assert sandbox.reads_in_place(blob)  # 0644, as the store places files
    before = blob.read_bytes()
    tries = ("(echo x >> data.nc) 2>/dev/null; echo $?; rm -f data.nc 2>/dev/null; echo $?; "
             "mv variable data.nc 2>/dev/null; echo $?; head -c 4 data.nc | od -An -c")
    (work / "variable").touch()
    done = sandbox.execute(["/bin/sh", "-c", tries], work, read_only=[(blob, "data.nc")])
    codes = done.stdout.split()
    assert "0" not in codes[:3] and codes[-3:] == ["H", "D", "F"], done.stdout  # refused thrice, unchanged
    assert blob.read_bytes() == before
    scientific.read_unit("blob.nc", [("blob.nc", blob)])  # and the reader reads it so


def plain(path, **options):
    """``x`` stored as written: contiguous, or in ``chunksizes`` (rows written in ``order``), no filter."""
    import netCDF4

    order = options.pop("order", None)
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("sample", 1000)
        ds.createDimension("feature", 64)
        var = ds.createVariable("x", options.pop("dtype", "f4"), ("sample", "feature"), **options)
        for start in order or [0]:
            var[start:start + (100 if order else 1000)] = X[start:start + (100 if order else 1000)]
    return path


@pytest.mark.skipif(not sandbox.bwrap_path(), reason="needs bwrap")
@pytest.mark.parametrize("options", [{"contiguous": True}, {"chunksizes": (100, 64)},
                                     {"chunksizes": (300, 64)}])
def test_a_variable_stored_as_one_run_of_bytes_is_mapped_where_it_lies(tmp_path, options):
    """Its values used as stored, in row order and back to back: nothing is copied, the job maps the file."""
    blob = plain(tmp_path / "blob.nc", **options)
    stream = scientific.VariableStream("x.nc", [("x.nc", blob)], "/x", tmp_path / "in.npy", in_place=True).start()
    assert stream.finished and stream.extent is not None and not os.path.lexists(tmp_path / "in.npy")
    mapped = mapped_extent(stream.file, stream.extent)
    assert isinstance(mapped, np.memmap) and os.path.samefile(mapped.filename, blob)
    assert np.array_equal(mapped, X)


@pytest.mark.skipif(not sandbox.bwrap_path(), reason="needs bwrap")
@pytest.mark.parametrize("options", [{"zlib": True, "chunksizes": (100, 64)},  # filtered
                                     {"chunksizes": (100, 16)},  # a chunk holds parts of rows
                                     {"chunksizes": (100, 64), "order": range(900, -1, -100)},  # last rows first
                                     {"chunksizes": (100, 64), "order": range(0, 500, 100)},  # rows never written
                                     {"contiguous": True, "endian": "big", "dtype": ">f4"},
                                     {"contiguous": True, "fill_value": np.float32(-999)}],  # to decode
                         ids=["zlib", "part-rows", "reversed", "unwritten", "big-endian", "fill-value"])
def test_a_variable_not_stored_as_one_run_of_its_values_is_copied(tmp_path, options):
    blob = plain(tmp_path / "blob.nc", **options)
    stream = scientific.VariableStream("x.nc", [("x.nc", blob)], "/x", tmp_path / "in.npy", in_place=True).start()
    stream.wait(sys.maxsize)
    assert stream.extent is None
    got = np.load(tmp_path / "in.npy")
    if "fill_value" in options:
        assert np.array_equal(got, X)  # decoded: no value is the fill value
    else:
        import h5py

        with h5py.File(blob) as file:
            assert np.array_equal(got, file["x"][:].astype("=f4"))  # as stored (unwritten rows: the fill value)
        assert np.array_equal(got[:500], X[:500])


def test_an_extent_outside_its_file_is_refused(tmp_path):
    """What the child says is checked against the file: a run past its end, a cast, a type that is no number."""
    blob = plain(tmp_path / "blob.nc", contiguous=True)
    extent = stored_extent(blob, "/x")
    assert extent is not None and np.array_equal(mapped_extent(blob, extent), X)
    size = blob.stat().st_size
    for lie in ({"offset": size - 100}, {"shape": [1001, 64]}, {"offset": -1}, {"dtype": "|O"}, {"dtype": ">f4"},
                {"shape": [0, 64]}):
        with pytest.raises(ValueError):
            mapped_extent(blob, {**extent, **lie})

"""Issue 58: a variable of a NetCDF, HDF5 or Zarr file as the input of a local run (``task_args.input:
x.nc:/x``), read slab by slab, gives what the same array sent as ``.npy`` gives."""

from __future__ import annotations

import numpy as np
import pytest
from hpcfair import HubClient, modelAPI, scidata
from hpcfair.errors import ConfigError
from onnx import TensorProto, helper

X = (np.arange(300 * 4, dtype=np.float32).reshape(300, 4) - 600) / 7


def one_node_model(op: str, constant: np.ndarray, x_shape: list, y_shape: list) -> bytes:
    """y = op(x, constant): x and y float32 of the shapes given."""
    tensor = helper.make_tensor("c", TensorProto.FLOAT, list(constant.shape), constant.ravel().tolist())
    graph = helper.make_graph([helper.make_node(op, ["x", "c"], ["y"])], op.lower(),
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], [tensor])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model.SerializeToString()


def doubling_model() -> bytes:
    """x [n, 4] float32 -> y = 2x."""
    return one_node_model("Mul", np.array([2.0], np.float32), ["n", 4], ["n", 4])


def write_netcdf(path):
    import netCDF4

    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("sample", None)
        ds.createDimension("feature", 4)
        group = ds.createGroup("inputs")
        var = group.createVariable("x", "f4", ("sample", "feature"), chunksizes=(16, 4), zlib=True)
        var[:] = X
    return path


def run(tmp_path, given: str):
    api = modelAPI(client=HubClient("http://127.0.0.1:9", None, retries=0))  # nothing of the hub is used
    return api.inference({"general_args": {"task": "inference"},
                          "model_args": {"model_file": str(tmp_path / "double.onnx")},
                          "task_args": {"input": given}, "device_args": {"device": "local"}})


def test_a_netcdf_variable_runs_as_the_same_array_sent_as_npy(tmp_path):
    (tmp_path / "double.onnx").write_bytes(doubling_model())
    np.save(tmp_path / "x.npy", X)
    write_netcdf(tmp_path / "x.nc")
    from_npy = run(tmp_path, str(tmp_path / "x.npy"))
    from_nc = run(tmp_path, f"{tmp_path / 'x.nc'}:/inputs/x")
    assert set(from_nc) == {"y"} and np.array_equal(from_nc["y"], from_npy["y"])
    assert np.array_equal(from_nc["y"], X * 2)


def test_slabs_follow_the_chunks_and_hdf5_and_zarr_read_the_same(tmp_path):
    import h5py
    import zarr

    with h5py.File(tmp_path / "x.h5", "w") as f:
        f.create_dataset("x", data=X, chunks=(7, 4))
    store = zarr.open_group(str(tmp_path / "x.zarr"), mode="w", zarr_format=3)
    store.create_array("x", shape=X.shape, chunks=(10, 4), dtype="float32")[:] = X
    for path in (tmp_path / "x.h5", tmp_path / "x.zarr"):
        assert np.array_equal(scidata.read_variable(path, "/x", slab_bytes=100), X)  # many slabs, whole chunks
    assert scidata.split_reference("x.nc:/inputs/x") == ("x.nc", "/inputs/x")
    assert scidata.split_reference("x.npy") is None and scidata.split_reference("C:/data.npy") is None


def test_a_missing_variable_names_the_config_key(tmp_path):
    (tmp_path / "double.onnx").write_bytes(doubling_model())
    write_netcdf(tmp_path / "x.nc")
    with pytest.raises(ConfigError) as caught:
        run(tmp_path, f"{tmp_path / 'x.nc'}:/nothing")
    assert caught.value.key == "task_args.input" and "has no variable /nothing" in str(caught.value)


def write_packed(path):
    """A NetCDF4 file as CF packs data: int16 with float32 scale_factor/add_offset and a _FillValue, an int32
    with a _FillValue only, a float64 with a missing_value, and a plain int16; some values missing."""
    import netCDF4

    raw = np.arange(-300, 300, dtype=np.int16).reshape(100, 6)
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("t", 100)
        ds.createDimension("f", 6)
        packed = ds.createVariable("packed", "i2", ("t", "f"), fill_value=np.int16(-32767), chunksizes=(7, 6))
        packed.scale_factor, packed.add_offset = np.float32(0.01), np.float32(273.15)
        packed.set_auto_maskandscale(False)
        with_fill = raw.copy()
        with_fill[3, 2] = with_fill[50, 0] = -32767
        packed[:] = with_fill
        counts = ds.createVariable("counts", "i4", ("t", "f"), fill_value=np.int32(-1))
        counts.set_auto_mask(False)
        counts[:] = np.where(raw % 7 == 0, -1, raw).astype(np.int32)
        gauge = ds.createVariable("gauge", "f8", ("t", "f"))
        gauge.missing_value = -9999.0
        gauge.set_auto_mask(False)
        gauge[:] = np.where(raw % 5 == 0, -9999.0, raw / 3)
        ds.createVariable("plain", "i2", ("t", "f"), chunksizes=(7, 6))[:] = raw
    return raw


def netcdf4_decoded(path, name):
    """What netCDF4 itself gives for ``name`` (scaled and masked), with the masked values as NaN."""
    import netCDF4

    with netCDF4.Dataset(path) as ds:
        value = ds[name][:]
    return np.ma.filled(value.astype(np.float64), np.nan) if np.ma.isMaskedArray(value) else value


def test_packed_and_filled_netcdf4_variables_are_decoded_as_netcdf4_decodes_them(tmp_path):
    """Issue 58: a packed int16 was read into an int16 array (273.15 + 0.01 * raw truncated to 273), and fill
    values came through as numbers. Each variable now equals netCDF4's own decoding, NaN where missing, in
    the dtype CF gives it (the scale's float32, float64 for an int32 with a fill, the stored one otherwise)."""
    raw = write_packed(tmp_path / "p.nc")
    path = tmp_path / "p.nc"
    for name, dtype in (("packed", np.float32), ("counts", np.float64), ("gauge", np.float64), ("plain", np.int16)):
        got = scidata.read_variable(path, f"/{name}", slab_bytes=64)  # many slabs, whole chunks
        assert got.dtype == dtype and scidata.variable_dtype(path, f"/{name}") == dtype, name
        np.testing.assert_allclose(got, netcdf4_decoded(path, name).astype(dtype), rtol=1e-6, equal_nan=True,
                                   err_msg=name)
    packed = scidata.read_variable(path, "/packed")
    assert np.isnan(packed[3, 2]) and np.isnan(packed[50, 0]) and np.isnan(packed).sum() == 2
    assert packed[0, 0] == np.float32(273.15) + np.float32(0.01) * np.float32(-300)  # not truncated to 270
    assert np.isnan(scidata.read_variable(path, "/counts")[1, 0])  # raw -294, a multiple of 7: a fill value
    assert np.array_equal(scidata.read_variable(path, "/plain"), raw)
    preview = scidata.first_slice(path, "/packed")  # the page's first values decode the same way
    np.testing.assert_allclose(preview[:2], packed[:2], equal_nan=True)


def test_a_packed_variable_runs_as_its_decoded_array(tmp_path):
    """A local run over a packed variable gets the decoded float values, as the same array sent as .npy."""
    (tmp_path / "double.onnx").write_bytes(doubling_model())
    import netCDF4

    with netCDF4.Dataset(tmp_path / "q.nc", "w") as ds:
        ds.createDimension("t", 300)
        ds.createDimension("f", 4)
        var = ds.createVariable("x", "i2", ("t", "f"))
        var.scale_factor, var.add_offset = np.float32(0.5), np.float32(-2.0)
        var[:] = X  # netCDF4 packs: round((X + 2) / 0.5)
    with netCDF4.Dataset(tmp_path / "q.nc") as ds:
        expected = np.ma.getdata(ds["x"][:]).astype(np.float32)
    np.save(tmp_path / "x.npy", expected)
    from_nc = run(tmp_path, f"{tmp_path / 'q.nc'}:/x")
    np.testing.assert_array_equal(from_nc["y"], run(tmp_path, str(tmp_path / "x.npy"))["y"])
    assert np.abs(from_nc["y"] / 2 - X).max() <= 0.25  # within half a packing step of the original values


PROJECTION = np.random.default_rng(58).standard_normal((1024, 8)).astype(np.float32)
RUN_AND_MEASURE = """
import json, sys
from hpcfair import HubClient, modelAPI

api = modelAPI(client=HubClient("http://127.0.0.1:9", None, retries=0))
model, warm, given, out = sys.argv[1:5]
def run(given, out):
    api.inference({"general_args": {"task": "inference"}, "model_args": {"model_file": model},
                   "task_args": {"input": given}, "device_args": {"device": "local"},
                   "out_args": {"export_file": out}})
def status(key):
    with open("/proc/self/status") as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith(key + ":"))
run(warm, out)  # the libraries imported and a first run done: the baseline
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")  # the peak (VmHWM) starts again from the resident size now
base = status("VmRSS")
run(given, out)
print(json.dumps({"base_kb": base, "peak_kb": status("VmHWM")}))
"""


def projection_model() -> bytes:
    """x [n, 1024] float32 -> y = x @ W [n, 8]."""
    return one_node_model("MatMul", PROJECTION, ["n", 1024], ["n", 8])


def measured(tmp_path, given: str, warm: str) -> tuple[dict, np.ndarray]:
    import json
    import subprocess
    import sys

    out = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}.npz"
    done = subprocess.run([sys.executable, "-c", RUN_AND_MEASURE, str(tmp_path / "project.onnx"), warm, given,
                           str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    with np.load(out) as outputs:
        return json.loads(done.stdout.strip().splitlines()[-1]), outputs["y"]


@pytest.mark.slow
def test_a_local_run_reads_a_200_mib_variable_a_slab_at_a_time(tmp_path):
    """The run holds one slab of the variable (16 MiB of rows, whole chunks) and the outputs, never the whole
    variable: its peak memory grows by well under half the variable's size, and its outputs equal the same
    array's run from a .npy."""
    import netCDF4

    (tmp_path / "project.onnx").write_bytes(projection_model())
    rows, slab = 51_200, 2_048  # 51,200 x 1,024 float32: 200 MiB
    rng = np.random.default_rng(5)
    whole = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float32, shape=(rows, 1024))
    with netCDF4.Dataset(tmp_path / "x.nc", "w") as ds:
        ds.createDimension("sample", None)
        ds.createDimension("pixel", 1024)
        var = ds.createVariable("x", "f4", ("sample", "pixel"), chunksizes=(256, 1024))
        for start in range(0, rows, slab):
            var[start:start + slab] = whole[start:start + slab] = rng.standard_normal((slab, 1024), np.float32)
    whole.flush()
    del whole
    with netCDF4.Dataset(tmp_path / "warm.nc", "w") as ds:
        ds.createDimension("sample", None)
        ds.createDimension("pixel", 1024)
        ds.createVariable("x", "f4", ("sample", "pixel"), chunksizes=(256, 1024))[:] = np.ones((300, 1024))
    memory, from_nc = measured(tmp_path, f"{tmp_path / 'x.nc'}:/x", f"{tmp_path / 'warm.nc'}:/x")
    grew_mib = (memory["peak_kb"] - memory["base_kb"]) / 1024
    assert grew_mib < 100, memory  # the variable is 200 MiB; read whole, the run grew by 205 MiB
    _, from_npy = measured(tmp_path, str(tmp_path / "x.npy"), str(tmp_path / "warm.nc") + ":/x")
    assert from_nc.shape == (rows, 8) and np.array_equal(from_nc, from_npy)


def test_deflated_chunks_inflated_by_threads_read_as_h5py_reads_them(tmp_path):
    """A variable's zlib chunks (with and without shuffle, edge chunks, a big-endian float64, int16) inflated by
    several threads outside h5py give h5py's values for any rows asked; a chunk never written falls back to
    h5py (its fill value)."""
    import h5py

    x = np.random.default_rng(3).standard_normal((103, 7, 5)).astype(np.float32)
    wanted = {"x": x, "be": x.astype(">f8"), "i2": (x * 100).astype("i2")}
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.create_dataset("x", data=x, chunks=(10, 3, 5), compression="gzip", shuffle=True)
        f.create_dataset("be", data=wanted["be"], chunks=(16, 7, 5), compression="gzip")
        f.create_dataset("i2", data=wanted["i2"], chunks=(9, 2, 2), compression="gzip", shuffle=True)
        holes = f.create_dataset("holes", shape=(50, 4), dtype="f4", chunks=(10, 4), compression="gzip")
        holes[0:10] = 1
    for name, want in wanted.items():
        with scidata.VariableReader(tmp_path / "a.h5", f"/{name}", threads=3) as reader:
            assert reader._pool is not None, name  # the threaded path, not h5py's
            got = np.empty(want.shape, reader.dtype)
            for start in range(0, 103, 17):  # slabs across chunk boundaries
                reader.read(start, min(start + 17, 103), got[start:start + 17])
            assert np.array_equal(got, want) and np.array_equal(reader.read(5, 6), want[5:6]), name
    with scidata.VariableReader(tmp_path / "a.h5", "/holes", threads=2) as reader:
        got = reader.read(0, 50)
    assert np.all(got[:10] == 1) and np.all(got[10:] == 0)
    shape, dtype = scidata.write_variable(tmp_path / "a.h5", "/x", tmp_path / "x.npy", slab_bytes=3000, threads=2)
    assert shape == x.shape and np.array_equal(np.load(tmp_path / "x.npy"), x)


def test_a_chunk_that_inflates_past_its_declared_size_is_refused(tmp_path):
    import zlib

    import h5py

    with h5py.File(tmp_path / "bomb.h5", "w") as f:
        x = f.create_dataset("x", shape=(20, 4), dtype="f4", chunks=(10, 4), compression="gzip")
        x[:] = 1
        x.id.write_direct_chunk((10, 0), zlib.compress(bytes(10 * 4 * 4 * 1000)))  # 1000 times its size
    with scidata.VariableReader(tmp_path / "bomb.h5", "/x", threads=2) as reader:
        assert np.all(reader.read(0, 10) == 1)
        with pytest.raises(scidata.ScienceRefused) as caught:
            reader.read(0, 20)
    assert caught.value.code == "scientific_inconsistent" and "[10, 0]" in caught.value.detail

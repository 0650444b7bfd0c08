"""Issue 58: a variable of a NetCDF, HDF5 or Zarr file as the input of a local run (``task_args.input:
x.nc:/x``), read slab by slab, gives what the same array sent as ``.npy`` gives."""

from __future__ import annotations

import numpy as np
import pytest
from hpcfair import HubClient, modelAPI, scidata
from hpcfair.errors import ConfigError
from onnx import TensorProto, helper

X = (np.arange(300 * 4, dtype=np.float32).reshape(300, 4) - 600) / 7


def doubling_model() -> bytes:
    """x [n, 4] float32 -> y = 2x."""
    constant = helper.make_tensor("c", TensorProto.FLOAT, [1], [2.0])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "c"], ["y"])], "double",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])], [constant])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model.SerializeToString()


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


def test_plain_variables_are_read_directly_and_packed_ones_are_not(tmp_path):
    """h5py reads a plain NetCDF4 variable straight into the array; a packed one (scale_factor) is left to
    netCDF4's path, as before."""
    import netCDF4

    raw = np.arange(600, dtype=np.int16).reshape(100, 6)
    with netCDF4.Dataset(tmp_path / "p.nc", "w") as ds:
        ds.createDimension("t", 100)
        ds.createDimension("f", 6)
        packed = ds.createVariable("packed", "i2", ("t", "f"))
        packed.scale_factor, packed.add_offset = 0.5, 10.0
        packed.set_auto_scale(False)
        packed[:] = raw
        ds.createVariable("plain", "i2", ("t", "f"), chunksizes=(7, 6))[:] = raw
    assert scidata._read_direct(tmp_path / "p.nc", "/packed", 2**20, None) is None
    direct = scidata._read_direct(tmp_path / "p.nc", "/plain", 64, None)
    assert direct is not None and np.array_equal(direct, raw)
    assert np.array_equal(scidata.read_variable(tmp_path / "p.nc", "/plain", slab_bytes=64), raw)

"""Issue 58: HDF5, NetCDF and Zarr read by the sandboxed child into metadata, exports, search and previews;
hostile files refused with codes. Every file is written here by its own library."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import numpy as np
import pytest
from rdflib import Graph, Literal, URIRef

from hub.errors import STATUS, HubError
from hub.metadata import scientific
from ontology import exports, shapes
from ontology.fields import validate
from ontology.graph import to_graph
from ontology.record import FileEntry, Record
from ontology.vocab import SDO
from tests.metadata import scidata_files
from tests.metadata.scidata_files import TAS

BASE = "http://hub.test"


def read(path, name=None, **kwargs):
    if path.is_dir():
        members = [(f"{name}/{p.relative_to(path).as_posix()}", p) for p in sorted(path.rglob("*")) if p.is_file()]
        return scientific.read_unit(name, members, **kwargs)
    return scientific.read_unit(name or path.name, [(name or path.name, path)], **kwargs)


def by_path(structure):
    return {v["path"]: v for v in structure["variables"]}


def test_hdf5_groups_chunks_units_and_dimension_scales(tmp_path):
    found = read(scidata_files.hdf5_with_groups(tmp_path / "run.h5"), auto=1)
    structure = found["structure"]
    assert structure["format"] == "hdf5"
    assert set(structure["groups"]) == {"/", "/sim", "/empty"}
    assert structure["attributes"] == {"title": "Lattice run 7", "institution": "ORNL"}
    energy = by_path(structure)["/sim/energy"]
    assert (energy["dtype"], energy["shape"], energy["chunks"], energy["units"]) == ("float64", [10, 16], [5, 16],
                                                                                     "eV")
    assert energy["dims"][0] == "step" and not energy["coordinate"]
    assert by_path(structure)["/sim/step"]["coordinate"]
    [shown] = found["previews"]
    assert shown["variable"] == "/sim/energy" and shown["slice_shape"] == [10, 16]
    assert shown["values"][:3] == pytest.approx(list(np.linspace(0, 1, 160)[:3]))
    assert base64.b64decode(shown["png"]).startswith(b"\x89PNG\r\n\x1a\n")


def test_cf_netcdf_dimensions_coordinates_and_standard_names(tmp_path):
    found = read(scidata_files.cf_netcdf(tmp_path / "tas.nc"), auto=1)
    structure = found["structure"]
    assert structure["format"] == "netcdf"
    assert structure["attributes"] == {"title": "Toy climate", "institution": "ORNL", "source": "model v1",
                                       "Conventions": "CF-1.8"}
    assert structure["dimensions"] == {"time": 3, "lat": 4, "lon": 5}
    tas = by_path(structure)["/tas"]
    assert tas["dims"] == ["time", "lat", "lon"] and tas["shape"] == [3, 4, 5] and tas["chunks"] == [1, 4, 5]
    assert (tas["units"], tas["standard_name"], tas["long_name"]) == ("K", "air_temperature",
                                                                      "Near-surface air temperature")
    assert [v["name"] for v in structure["variables"] if v["coordinate"]] == ["lat", "lon", "time"]
    [shown] = found["previews"]
    assert shown["slice_shape"] == [4, 5]  # the first time step, a 2-D slice
    assert shown["values"] == pytest.approx(TAS[0].reshape(-1)[:20].tolist())
    assert base64.b64decode(shown["png"])[12:16] == b"IHDR"


def test_zarr_v3_store(tmp_path):
    store = scidata_files.zarr_v3(tmp_path / "ocean.zarr")
    found = read(store, "ocean.zarr", auto=1)
    structure = found["structure"]
    assert (structure["format"], structure["zarr_format"]) == ("zarr", 3)
    assert set(structure["groups"]) == {"/", "/ocean"}
    u = by_path(structure)["/ocean/u"]
    assert (u["dims"], u["chunks"], u["units"], u["standard_name"]) == (["y", "x"], [4, 3], "m s-1",
                                                                        "eastward_sea_water_velocity")
    assert found["previews"][0]["values"] == list(range(20))


def refused(path, name=None) -> HubError:
    with pytest.raises(HubError) as caught:
        read(path, name)
    assert STATUS[caught.value.code] == 400
    assert str(tmp_root(path)) not in caught.value.detail  # no host path in the message
    return caught.value


def tmp_root(path):
    return path.parent


def test_external_links_and_virtual_datasets_are_refused(tmp_path):
    import h5py

    outside = tmp_path / "outside.h5"
    with h5py.File(outside, "w") as f:
        f["secret"] = np.arange(4)
    linked = tmp_path / "linked.h5"
    with h5py.File(linked, "w") as f:
        f["here"] = np.arange(3)
        f["there"] = h5py.ExternalLink(str(outside), "/secret")
    assert refused(linked).code == "scientific_external"
    virtual = tmp_path / "virtual.h5"
    layout = h5py.VirtualLayout(shape=(4,), dtype="int64")
    layout[:] = h5py.VirtualSource(str(outside), "secret", shape=(4,))
    with h5py.File(virtual, "w") as f:
        f.create_virtual_dataset("v", layout)
    error = refused(virtual)
    assert error.code == "scientific_external" and "virtual" in error.detail


@pytest.mark.slow
@pytest.mark.cpu  # bounded children at their limits: over 1 s on a quiet machine
def test_a_billion_tiny_chunks_and_a_compression_bomb_are_refused(tmp_path, settings):
    import h5py

    tiny = tmp_path / "tiny.h5"
    with h5py.File(tiny, "w") as f:
        f.create_dataset("grid", shape=(100_000, 10_000), chunks=(1, 1), dtype="uint8")
    error = refused(tiny)
    assert error.code == "scientific_too_many_chunks" and "1000000000 chunks" in error.detail
    bomb = tmp_path / "bomb.h5"
    with h5py.File(bomb, "w") as f:
        f.create_dataset("zeros", data=np.zeros((4096, 4096)), chunks=(1024, 1024), compression="gzip",
                         compression_opts=9)
    settings.HUB_SCIDATA_MAX_RATIO = 100  # zeros deflate about a thousand-fold; the limit is the setting's
    assert refused(bomb).code == "scientific_compression_bomb"


def test_a_truncated_file_and_a_file_that_is_not_hdf5_are_coded_not_crashes(tmp_path):
    whole = scidata_files.cf_netcdf(tmp_path / "whole.nc").read_bytes()
    cut = tmp_path / "cut.nc"
    cut.write_bytes(whole[: len(whole) // 2])
    assert refused(cut).code in ("scientific_unreadable", "scientific_inconsistent")
    fake = tmp_path / "fake.h5"
    fake.write_bytes(b"not an hdf5 file at all")
    assert refused(fake).code == "scientific_unreadable"
    # a file the reader breaks on is a damaged upload in words about data, not a failed conversion's advice
    lying = tmp_path / "lying.h5"
    lying.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(range(256)) * 2)
    store = tmp_path / "deep.zarr"
    (store / "a").mkdir(parents=True)
    (store / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    (store / "a" / "zarr.json").write_text('{"a":' * 50_000 + "1" + "}" * 50_000)
    for path, name in ((lying, None), (store, "deep.zarr")):
        error = refused(path, name)
        assert error.code == "scientific_unreadable", error.detail
        assert "truncated, damaged or not HDF5, NetCDF or Zarr" in error.detail, error.detail
        assert "opset" not in error.detail and "conversion" not in error.detail


def test_too_many_nodes_is_refused(tmp_path, settings):
    import h5py

    many = tmp_path / "many.h5"
    with h5py.File(many, "w") as f:
        for index in range(30):
            f.create_group(f"g{index}")
    settings.HUB_SCIDATA_MAX_NODES = 20
    assert refused(many).code == "scientific_too_large"


# --- exports ---------------------------------------------------------------------------------------------


def record_for(tmp_path) -> Record:
    nc = scidata_files.cf_netcdf(tmp_path / "tas.nc")
    unit = {"path": "tas.nc", "size": nc.stat().st_size, **read(nc)["structure"]}
    metadata = validate({"title": "Toy climate", "description": "CF test data.", "license": "CC-BY-4.0",
                         "creators": ["Ada Lovelace"], "format": "netcdf", "scientific": [unit]}, "dataset",
                        system=True)
    return Record(iri=f"{BASE}/ark:/99999/fk4nc", pid="ark:/99999/fk4nc", kind="dataset", label="1.0",
                  metadata=metadata, published=datetime(2026, 3, 4, tzinfo=UTC), owner="alice",
                  files=[FileEntry("tas.nc", unit["size"], "c" * 64, "application/x-netcdf",
                                   f"{BASE}/files/tas.nc")])


def test_schema_org_variable_measured_carries_units_and_cf_standard_names(tmp_path):
    record = record_for(tmp_path)
    data = json.loads(exports.export(record, "schemaorg"))
    measured = {v["name"]: v for v in data["variableMeasured"]}
    assert set(measured) == {"lat", "lon", "time", "tas"}
    tas = measured["tas"]
    assert tas["unitText"] == "K" and tas["alternateName"] == "air_temperature"
    assert tas["propertyID"] == "https://vocab.nerc.ac.uk/standard_name/air_temperature/"
    assert tas["identifier"] == "tas.nc:/tas" and "time=3, lat=4, lon=5" in tas["description"]
    graph = to_graph(record)
    shapes.check(graph)  # the HPC Ontology shapes accept it
    nodes = set(graph.objects(URIRef(record.iri), SDO.variableMeasured))
    assert len(nodes) == 4
    assert any((n, SDO.propertyID, URIRef("https://vocab.nerc.ac.uk/standard_name/air_temperature/")) in graph
               for n in nodes)
    turtle = Graph().parse(data=exports.export(record, "turtle"), format="turtle")
    assert (None, SDO.unitText, Literal("K")) in turtle


def test_croissant_record_set_of_the_variables_loads_with_mlcroissant(tmp_path):
    import mlcroissant as mlc

    data = json.loads(exports.export(record_for(tmp_path), "croissant"))
    dataset = mlc.Dataset(jsonld=data)
    assert not dataset.metadata.ctx.issues.errors, dataset.metadata.ctx.issues.report()
    [record_set] = dataset.metadata.record_sets
    assert [f.name for f in record_set.fields] == ["lat", "lon", "time", "tas"]
    tas = record_set.fields[-1]
    assert tas.data_types == [mlc.DataType.FLOAT] and "air_temperature" in tas.description


@pytest.mark.slow
@pytest.mark.cpu  # a bounded child: over 1 s on a quiet machine
def test_a_job_extracts_a_variable_past_the_childs_usual_file_cap(tmp_path):
    """Issue 58's 1 GiB run: the child writes the variable's .npy past the 64 MiB other reads are held to."""
    import netCDF4

    rows = np.arange(17 * 2**20, dtype=np.float32).reshape(-1, 1024)  # 68 MiB
    with netCDF4.Dataset(tmp_path / "big.nc", "w") as ds:
        ds.createDimension("row", rows.shape[0])
        ds.createDimension("feature", rows.shape[1])
        ds.createVariable("x", "f4", ("row", "feature"), chunksizes=(1024, 1024))[:] = rows
    found = read(tmp_path / "big.nc", extract="/x", dest=tmp_path / "x.npy")
    assert found["extracted"] == {"variable": "/x", "shape": list(rows.shape), "dtype": "float32"}
    assert np.array_equal(np.load(tmp_path / "x.npy"), rows)

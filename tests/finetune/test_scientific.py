"""Issue 58: the variables of an HDF5 or NetCDF file or a Zarr store as a fine-tune's data (``data_file:
campaign.nc``, ``target: /labels``, ``features: [/temperature]``, as an NPZ's arrays are named): read slab by
slab in the sandbox, they train exactly as the same arrays given as ``.npz``; an unknown variable, variables
with different numbers of rows and a non-numeric one are refused with codes before any job exists."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from hpcfair.finetune import FinetuneError, Hyper, data
from hpcfair.finetune.run import finetune

from hub.jobs.models import Job
from tests.conftest import wait_for_job
from tests.finetune import fixtures

X, Y = fixtures.blobs(300)
TRAIN = {"target": "/labels", "features": ["/temperature"], "epochs": 3, "learning_rate": 0.01, "seed": 5}


def campaign_netcdf(path: Path, extras: bool = True) -> Path:
    """The blobs as a simulation campaign: temperature [sample, feature] (chunked, zlib) and labels [sample];
    with ``extras`` a string variable and one along another dimension."""
    import netCDF4

    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.createDimension("sample", None)
        ds.createDimension("feature", 4)
        ds.createVariable("temperature", "f4", ("sample", "feature"), chunksizes=(50, 4), zlib=True)[:] = X
        ds.createVariable("labels", "i8", ("sample",))[:] = Y
        if extras:
            ds.createDimension("cell", 7)
            ds.createVariable("grid", "f8", ("cell",))[:] = np.arange(7.0)
            station = ds.createVariable("station", str, ("sample",))
            station[:] = np.array([f"s{i % 3}" for i in range(len(Y))], dtype=object)
    return path


def campaign_hdf5(path: Path) -> Path:
    import h5py

    with h5py.File(path, "w") as f:
        f.create_dataset("run/temperature", data=X, chunks=(64, 4), compression="gzip")
        f.create_dataset("run/labels", data=Y)
    return path


def campaign_zarr(path: Path) -> Path:
    import zarr

    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    root.create_array("temperature", shape=X.shape, chunks=(40, 4), dtype="float32")[:] = X
    root.create_array("labels", shape=Y.shape, chunks=(40,), dtype="int64")[:] = Y
    return path


def history(report) -> list[dict]:
    return [r | {"seconds": 0} for r in report["history"]]


@pytest.mark.slow
@pytest.mark.cpu
def test_each_format_trains_as_the_same_arrays_given_as_npz(tmp_path):
    model = fixtures.torchscript_mlp(tmp_path)
    (tmp_path / "npz").mkdir()
    np.savez(tmp_path / "npz" / "blobs.npz", temperature=X, labels=Y)
    npz = finetune(model, tmp_path / "npz", tmp_path / "out-npz",
                   Hyper.from_dict({**TRAIN, "target": "labels", "features": ["temperature"]}))
    assert npz["final"]["loss"] < npz["base"]["loss"] and npz["final"]["accuracy"] > npz["base"]["accuracy"] + 0.1
    for name, write, target, features in (
            ("campaign.nc", campaign_netcdf, "/labels", ["/temperature"]),
            ("campaign.h5", campaign_hdf5, "/run/labels", ["/run/temperature"]),
            ("campaign.zarr", campaign_zarr, "/labels", None)):  # a store's default features: all but the target
        folder = tmp_path / name.replace(".", "-")
        folder.mkdir()
        write(folder / name)
        report = finetune(model, folder, tmp_path / f"out-{name}",
                          Hyper.from_dict({**TRAIN, "target": target, "features": features}), data_file=name)
        assert history(report) == history(npz), name
        assert report["data_file"] == name and report["rows"] == {"train": 240, "validation": 60}


@pytest.mark.cpu
def test_variables_are_checked_before_training(tmp_path):
    campaign_netcdf(tmp_path / "campaign.nc")
    source, columns = data.scientific_schema("campaign.nc", data.read_structure(tmp_path / "campaign.nc"))
    assert columns == {"/temperature": "float32[300, 4]", "/labels": "int64[300]", "/grid": "float64[7]",
                       "/station": "<class 'str'>[300]"}
    assert data.variables_for(source, "/labels", ["/temperature"]) == ["/labels", "/temperature"]
    for features, code, words in ((["/temperature", "/grid"], "shape_mismatch", "/grid has 7"),
                                  (["/station"], "non_numeric_feature", "campaign.nc:/station holds"),
                                  (None, "non_numeric_feature", "/station holds")):  # default: all the others
        with pytest.raises(FinetuneError) as caught:
            data.variables_for(source, "/labels", features)
        assert caught.value.code == code and words in caught.value.detail
    assert data.choose(["campaign.nc", "README.md"]) == "campaign.nc"
    assert data.choose(["a.csv", "ocean.zarr/zarr.json", "ocean.zarr/u/c/0"], "ocean.zarr") == "ocean.zarr"
    with pytest.raises(FinetuneError) as caught:
        data.choose(["a.csv", "ocean.zarr/zarr.json", "ocean.zarr/u/c/0"])
    assert caught.value.code == "ambiguous_dataset" and "a.csv, ocean.zarr" in caught.value.detail


def post(api, body, ref="alice/mlp/versions/1"):
    return api.post(f"/api/v1/artifacts/{ref}/finetune", body, format="json")


@pytest.mark.django_db
def test_a_request_naming_variables_is_checked_against_the_versions_metadata(api, publish, owner, tmp_path):
    publish(owner, "mlp", {"mlp.pt": fixtures.torchscript_mlp(tmp_path).read_bytes()})
    publish(owner, "campaign", {"campaign.nc": campaign_netcdf(tmp_path / "campaign.nc").read_bytes(),
                                "README.md": b"# A campaign\n"}, kind="dataset")
    body = {"dataset": "alice/campaign", "data_file": "campaign.nc"}
    for asked, code, words in (
            ({"target": "/label", "features": ["/temperature"]}, "unknown_column", "no column '/label'"),
            ({"target": "/labels", "features": ["/temperature", "/grid"]}, "shape_mismatch", "/grid has 7"),
            ({"target": "/labels", "features": ["/station"]}, "non_numeric_feature", "/station holds")):
        response = post(api, {**body, **asked})
        assert response.status_code == 400 and response["X-Error-Code"] == code, response.content
        assert words in response.json()["detail"]
    assert "/temperature, /labels" in post(api, {**body, "target": "/x"}).json()["detail"]
    assert not Job.objects.filter(kind="finetune").exists()
    response = post(api, {"dataset": "alice/campaign", "target": "/labels", "features": ["/temperature"]})
    assert response.status_code == 202, response.content  # the only table: no data_file needed
    job = Job.objects.get(kind="finetune")
    assert job.params["dataset"]["files"] == ["campaign.nc"] and job.params["data_file"] == "campaign.nc"


@pytest.mark.worker
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_hubs_fine_tune_of_a_netcdf_variable_learns_what_the_npz_teaches(api, shared_storage, tmp_path):
    from tests.finetune.test_worker import publish

    publish(api, "mlp", "model", {"mlp.pt": fixtures.torchscript_mlp(tmp_path).read_bytes()},
            task="classification", framework="pytorch",
            inputs=[{"name": "features", "shape": [None, 4], "dtype": "float32"}])
    publish(api, "campaign", "dataset", {"campaign.nc": campaign_netcdf(tmp_path / "campaign.nc").read_bytes()})
    arrays = io.BytesIO()
    np.savez(arrays, temperature=X, labels=Y)
    publish(api, "arrays", "dataset", {"arrays.npz": arrays.getvalue()})
    results = {}
    for dataset, asked in (("campaign", TRAIN), ("arrays", {**TRAIN, "target": "labels",
                                                           "features": ["temperature"]})):
        response = post(api, {"dataset": f"alice/{dataset}", **asked})
        assert response.status_code == 202, response.content
        job = wait_for_job(response.json()["id"], timeout=300)
        assert job.state == "succeeded", (job.error_code, job.error_detail, job.log[-5:])
        results[dataset] = job
    tuned = results["campaign"].result
    assert tuned["final"]["loss"] < tuned["base"]["loss"] and tuned["final"]["accuracy"] > tuned["base"]["accuracy"]
    assert tuned["final"] == results["arrays"].result["final"]
    # byte for byte the same model: the .npz's fine-tune points at the NetCDF one's version
    assert results["arrays"].result["version"] == tuned["version"] == "alice/mlp-finetuned@1"
    meta = api.get("/api/v1/artifacts/alice/mlp-finetuned/versions/1/").json()["metadata"]
    assert meta["training"]["data_file"] == "campaign.nc" and meta["training"]["target"] == "/labels"
    assert any("from campaign.nc" in line["message"] for line in results["campaign"].log)
    assert json.dumps(meta["training"]["rows"]) == '{"train": 240, "validation": 60}'

"""Issue 58 through the hub: a dataset of NetCDF, HDF5 and Zarr published by the API gets its structure in the
version's metadata, is found by its CF standard names and variables, and its landing page shows the tree,
the first values and a plot; a hostile file is a coded 400 with nothing stored."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from urllib3 import encode_multipart_formdata

from hub.registry.models import Version
from tests.conftest import multipart_file, valid_metadata
from tests.metadata import scidata_files

pytestmark = pytest.mark.django_db


def publish(api, name, files):
    """A version of the new dataset ``name``; the parts keep their folders (``ocean.zarr/zarr.json``)."""
    assert api.post("/api/v1/artifacts/", {"kind": "dataset", "name": name}, format="json").status_code == 201
    parts = [("metadata", json.dumps(valid_metadata("dataset")))]
    parts += [("files", (path, data, "application/octet-stream")) for path, data in files.items()]
    body, content_type = encode_multipart_formdata(parts)
    return api.generic("POST", f"/api/v1/artifacts/alice/{name}/versions/", body, content_type=content_type)


@pytest.mark.slow
@pytest.mark.cpu
def test_a_published_netcdf_hdf5_and_zarr_dataset_is_described_found_and_previewed(api, anon, tmp_path):
    files = {"tas.nc": scidata_files.cf_netcdf(tmp_path / "tas.nc").read_bytes(),
             "run.h5": scidata_files.hdf5_with_groups(tmp_path / "run.h5").read_bytes(),
             **scidata_files.store_files(scidata_files.zarr_v3(tmp_path / "ocean.zarr"))}
    response = publish(api, "campaign", files)
    assert response.status_code == 201, response.content
    version = Version.objects.get(pid=response.json()["pid"])
    described = {d["path"]: d for d in version.metadata["scientific"]}
    assert set(described) == {"tas.nc", "run.h5", "ocean.zarr"}
    assert described["ocean.zarr"]["format"] == "zarr" and described["tas.nc"]["attributes"]["Conventions"] == "CF-1.8"
    assert "scientific" in version.metadata["derived"]

    for facet, value in (("standard_name", "air_temperature"), ("standard_name", "eastward_sea_water_velocity"),
                         ("variable", "energy")):
        found = anon.get("/api/v1/artifacts/", {facet: value}).json()
        assert [r["name"] for r in found["results"]] == ["campaign"], (facet, value)
    assert anon.get("/api/v1/artifacts/", {"standard_name": "sea_ice_area"}).json()["count"] == 0
    counts = anon.get("/api/v1/artifacts/").json()["facets"]
    assert {"value": "air_temperature", "count": 1} in counts["standard_name"]
    assert [r["name"] for r in anon.get("/api/v1/artifacts/", {"q": "air_temperature"}).json()["results"]] == [
        "campaign"]

    page = Client().get("/" + version.pid, follow=True).content.decode()
    assert 'data-path="tas.nc"' in page and 'data-path="ocean.zarr"' in page and 'data-path="run.h5"' in page
    assert "air_temperature" in page and "Near-surface air temperature" in page and "CF-1.8" in page
    assert 'data-variable="/tas"' in page and 'src="data:image/png;base64,' in page
    assert "270.0, 270.1, 270.2, 270.3" in page  # the first values, as float32 has them (TAS)
    assert '<th scope="row">Scientific</th>' not in page  # the tree, not a dump of it in the metadata table
    assert '<th scope="row">Format</th>' in page


def test_an_external_link_is_a_coded_400_and_nothing_is_published(api, tmp_path):
    import h5py
    import numpy as np

    with h5py.File(tmp_path / "linked.h5", "w") as f:
        f["here"] = np.arange(3)
        f["there"] = h5py.ExternalLink("/etc/hostname", "/x")
    response = publish(api, "linked", {"linked.h5": (tmp_path / "linked.h5").read_bytes()})
    assert response.status_code == 400 and response["X-Error-Code"] == "scientific_external"
    body = response.json()
    assert body["code"] == "scientific_external" and "linked.h5: /there is an external link" in body["detail"]
    assert "/etc/hostname" not in body["detail"] and "/tmp" not in body["detail"]
    assert not Version.objects.filter(artifact__name="linked").exists()


def test_a_user_cannot_write_the_scientific_field(api):
    response = api.post("/api/v1/artifacts/", {"kind": "dataset", "name": "typed"}, format="json")
    assert response.status_code == 201
    response = api.post("/api/v1/artifacts/alice/typed/versions/",
                        {"files": [multipart_file("a.csv", b"x,y\n1,2\n")],
                         "metadata": json.dumps(valid_metadata("dataset", scientific=[{"path": "a.csv"}]))},
                        format="multipart")
    assert response.status_code == 400 and response.json()["errors"]["scientific"] == [
        "The hub sets this field itself."]

"""Issue 58 in Chromium: a CF NetCDF dataset published to the embedded hub shows its tree, its first values
and a plot of a 2-D slice, drawn by the sandboxed reader, decoded by the browser as an image."""

from __future__ import annotations

import json

import pytest
import requests

from tests.metadata import scidata_files

pytestmark = pytest.mark.slow


def test_a_netcdf_dataset_page_shows_its_tree_values_and_plot(site, embedded_hub, tmp_path):
    base, token, _ = embedded_hub
    auth = {"Authorization": f"Bearer {token}"}
    data = scidata_files.cf_netcdf(tmp_path / "tas.nc").read_bytes()
    assert requests.post(f"{base}/api/v1/artifacts/", json={"kind": "dataset", "name": "toy-climate"}, headers=auth,
                         timeout=30).status_code == 201
    created = requests.post(f"{base}/api/v1/artifacts/demo/toy-climate/versions/", headers=auth, timeout=120,
                            files=[("files", ("tas.nc", data))],
                            data={"metadata": json.dumps({"title": "Toy climate", "description": "CF test data.",
                                                          "creators": ["Ada Lovelace"], "license": "CC-BY-4.0"})})
    assert created.status_code == 201, created.text
    w = site()
    w.page.goto("/" + created.json()["pid"])
    tree = w.page.locator('details.scientific[data-path="tas.nc"]')
    assert "air_temperature" in tree.locator("table.scientific-variables").inner_text()
    assert "CF-1.8" in tree.locator("dl.scientific-attributes").inner_text()
    figure = tree.locator('figure[data-variable="/tas"]')
    assert figure.locator("figcaption").inner_text().endswith("the first values of a 4 × 5 slice")
    plot = figure.locator("img.scientific-plot")
    plot.scroll_into_view_if_needed()
    size = plot.evaluate("img => img.complete && [img.naturalWidth, img.naturalHeight]")
    assert size == [320, 160]  # the PNG decoded
    w.shot("landing-netcdf")

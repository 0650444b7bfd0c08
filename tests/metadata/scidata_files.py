"""Real HDF5, NetCDF and Zarr files written by their own libraries, for the tests of issue 58."""

from __future__ import annotations

from pathlib import Path

import numpy as np

TAS = np.arange(3 * 4 * 5, dtype="float32").reshape(3, 4, 5) / 10 + 270


def hdf5_with_groups(path: Path) -> Path:
    """Groups, a chunked gzip dataset with units and a dimension scale, and global attributes."""
    import h5py

    with h5py.File(path, "w") as f:
        f.attrs["title"] = "Lattice run 7"
        f.attrs["institution"] = "ORNL"
        sim = f.create_group("sim")
        step = sim.create_dataset("step", data=np.arange(10, dtype="int64"))
        step.make_scale("step")
        energy = sim.create_dataset("energy", data=np.linspace(0, 1, 10 * 16).reshape(10, 16), chunks=(5, 16),
                                    compression="gzip")
        energy.attrs["units"] = "eV"
        energy.dims[0].attach_scale(step)
        f.create_group("empty")
    return path


def cf_netcdf(path: Path) -> Path:
    """A CF-1.8 NetCDF-4 file: time/lat/lon coordinates and air temperature with its standard name."""
    import netCDF4

    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.title, ds.institution, ds.source, ds.Conventions = "Toy climate", "ORNL", "model v1", "CF-1.8"
        ds.createDimension("time", None)
        ds.createDimension("lat", 4)
        ds.createDimension("lon", 5)
        for name, units, standard in (("lat", "degrees_north", "latitude"), ("lon", "degrees_east", "longitude")):
            var = ds.createVariable(name, "f4", (name,))
            var.units, var.standard_name = units, standard
            var[:] = np.arange(len(ds.dimensions[name]), dtype="f4")
        time = ds.createVariable("time", "f8", ("time",))
        time.units, time.standard_name = "days since 2000-01-01", "time"
        time[:] = np.arange(3)
        tas = ds.createVariable("tas", "f4", ("time", "lat", "lon"), chunksizes=(1, 4, 5), zlib=True)
        tas.units, tas.standard_name, tas.long_name = "K", "air_temperature", "Near-surface air temperature"
        tas[:] = TAS
    return path


def zarr_v3(path: Path) -> Path:
    """A Zarr v3 store with a group, dimension names and units."""
    import zarr

    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    root.attrs["title"] = "Ocean velocities"
    ocean = root.create_group("ocean")
    u = ocean.create_array("u", shape=(8, 6), chunks=(4, 3), dtype="float64", dimension_names=["y", "x"])
    u[:] = np.arange(48, dtype="float64").reshape(8, 6)
    u.attrs["units"] = "m s-1"
    u.attrs["standard_name"] = "eastward_sea_water_velocity"
    return path


def store_files(path: Path, name: str = "ocean.zarr") -> dict[str, bytes]:
    """A store's files as a version holds them: ``ocean.zarr/zarr.json``, ``ocean.zarr/ocean/u/c/0/0``..."""
    return {f"{name}/{p.relative_to(path).as_posix()}": p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}

#!/usr/bin/env python3
"""Runs xarray_writer, then opens its groups with xarray (engine h5netcdf), as ArviZ does.

Usage: check_xarray.py WRITER_EXE WORK_DIR
"""
import os
import subprocess
import sys

import numpy as np
import xarray as xr


def main() -> int:
    writer, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "inference_data.h5")
    subprocess.run([writer, path], check=True)

    post = xr.open_dataset(path, group="posterior", engine="h5netcdf")
    assert dict(post.sizes) == {"chain": 4, "draw": 100, "theta_dim_0": 3, "w_dim_0": 2}, dict(post.sizes)
    assert post["x"].dims == ("chain", "draw"), post["x"].dims
    assert post["theta"].dims == ("chain", "draw", "theta_dim_0"), post["theta"].dims
    assert post["w"].dims == ("chain", "draw", "w_dim_0"), post["w"].dims
    assert set(post.coords) == {"chain", "draw", "theta_dim_0"}, list(post.coords)
    assert "w_dim_0" not in post.coords  # a dimension without a coordinate variable
    np.testing.assert_array_equal(post["chain"].values, np.arange(4))
    np.testing.assert_array_equal(post["draw"].values, np.arange(100))
    x = post["x"].values
    assert x.dtype == np.float64
    np.testing.assert_allclose(x, np.arange(4)[:, None] + 0.001 * np.arange(100)[None, :])
    theta = post["theta"].sel(chain=2, draw=7).values
    np.testing.assert_allclose(theta, [207.0, 207.1, 207.2])
    assert post["theta"].attrs["units"] == "m"
    assert post.attrs["inference_library"] == "herd"
    assert set(post.data_vars) == {"x", "theta", "w"}, list(post.data_vars)

    stats = xr.open_dataset(path, group="sample_stats", engine="h5netcdf")
    assert stats["lp"].dims == ("chain", "draw")
    np.testing.assert_array_equal(stats["lp"].values, np.full((4, 100), -1.25))
    print("check_xarray: posterior and sample_stats open in xarray/h5netcdf with dims and coords")
    return 0


if __name__ == "__main__":
    sys.exit(main())

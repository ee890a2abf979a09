"""Grids across the antimeridian and around the poles (issue 27): cogfeed's
cog.read(grid=...) and the Loader against gdalwarp onto the same grids.

The oracle is the GDAL of the rasterio wheel (3.10, gdalwarp_wheel.py):
Debian's gdalwarp 3.6 picks an overview 8x too coarse for a grid across
180 degrees (fixed in GDAL 3.7, its issue 7019).  Where gdalwarp itself
reads wrong pixels, the test says so and uses a reading of the same data
that gdalwarp gets right:
  - bilinear and cubic across the antimeridian: gdalwarp widens the kernel
    by the whole source width (its source window is the whole width), so
    the reference is gdalwarp on the same pixels laid out 0..360 (the
    antimeridian then in the middle of the source);
  - average and mode of a target pixel lying across the antimeridian:
    gdalwarp takes every source column between its corners (a band of
    latitude round the world); cogfeed takes the short way round, so
    those pixels are checked to come from the seam's columns.
Across CRSs every pixel goes through PROJ on both sides (-et 0,
error_threshold=0), as in test_geo_warp.py; the defaults are bounded as
there (docs/conformance.md).
"""

import os
import sys

import numpy as np
import pytest

import cogfeed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import geo_fixtures as F  # noqa: E402

rasterio = pytest.importorskip("rasterio")

RES = 0.25
SEAM = 40        # source columns this close to +-180 hold values >= 200


def world(h, w, y0=0):
    """Byte values that change every pixel; columns near the antimeridian
    (the first and last SEAM) are 200..249, the rest 1..190, so that a
    pixel read from across the seam is told from one read the long way."""
    y, x = np.mgrid[y0:y0 + h, 0:w]
    a = (x * 7 + y * 13) % 190 + 1
    near = (x < SEAM) | (x >= w - SEAM)
    a[near] = 200 + (x[near] + y[near]) % 50
    return a.astype(np.uint8)[None]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("geo_polar")
    out = {}
    g = world(720, 1440)
    kw = dict(srs="EPSG:4326", overviews=True)
    out["world"] = F.write_cog(str(d / "world.tif"), g, (-180.0, RES, 0.0, 90.0, 0.0, -RES),
                               **kw)
    # the same pixels 0..360: the antimeridian in the middle of the source
    out["world360"] = F.write_cog(str(d / "world360.tif"), np.roll(g, -720, axis=2),
                                  (0.0, RES, 0.0, 90.0, 0.0, -RES), **kw)
    # a source past 180: 170..190 E
    out["past180"] = F.write_cog(str(d / "past180.tif"), world(160, 400),
                                 (170.0, 0.05, 0.0, -10.0, 0.0, -0.05), blocksize=128, **kw)
    for name, rows, top in (("north", slice(0, 120), 90.0), ("south", slice(600, 720), -60.0)):
        out[name] = F.write_cog(str(d / (name + ".tif")), g[:, rows],
                                (-180.0, RES, 0.0, top, 0.0, -RES), **kw)
        out[name + "360"] = F.write_cog(str(d / (name + "360.tif")),
                                        np.roll(g[:, rows], -720, axis=2),
                                        (0.0, RES, 0.0, top, 0.0, -RES), **kw)
        out[name + "_f32"] = F.write_cog(str(d / (name + "_f32.tif")),
                                         g[:, rows].astype(np.float32) / 4,
                                         (-180.0, RES, 0.0, top, 0.0, -RES), **kw)
    return out


def grid(crs, bounds, res):
    return cogfeed.Grid.from_bounds(crs, bounds, res)


ACROSS = {
    "4326 170..190": lambda: grid("EPSG:4326", (170, -20, 190, 0), 0.25),
    "4326 170..190 at 0.5 (overview 1)": lambda: grid("EPSG:4326", (170, -20, 190, 0), 0.5),
    "4326 -190..-170": lambda: grid("EPSG:4326", (-190, 10, -170, 30), 0.25),
    "UTM 60N": lambda: grid("EPSG:32660", (500000, 7000000, 1000000, 7500000), 25000),
    "UTM 1S": lambda: grid("EPSG:32701", (0, 7700000, 500000, 8200000), 25000),
    "PDC Mercator (3832)": lambda: grid("EPSG:3832", (2800000, -2000000, 3800000, -1000000),
                                        25000),
}

POLAR = {
    "north, EPSG:3413": ("north", lambda: grid("EPSG:3413", (-1500000, -1500000, 1500000,
                                                             1500000), 25000)),
    "south, EPSG:3031": ("south", lambda: grid("EPSG:3031", (-1500000, -1500000, 1500000,
                                                             1500000), 25000)),
    "north, EPSG:3413, 100 km": ("north", lambda: grid("EPSG:3413", (-2000000, -2000000,
                                                                     2000000, 2000000),
                                                       100000)),
    "north, off-centre": ("north", lambda: grid("EPSG:3413", (-500000, -1000000, 1500000,
                                                              1000000), 25000)),
}


def ours(path, g, kernel, et=0.0):
    with cogfeed.open(path) as c:
        got = c.read(grid=g, resampling=kernel, error_threshold=et)
        lvl = cogfeed._cogfeed.grid_level(c, g, kernel)
    return got, lvl


def seam_pixels(g, centre=0.0):
    """Target pixels whose top-left and bottom-right corners lie on both
    sides of the antimeridian (the corners average and mode use), with
    longitudes brought into centre +- 180 as the source's."""
    from rasterio.warp import transform
    t = g.geotransform
    jj, ii = np.mgrid[0:g.height, 0:g.width]
    lon = []
    for k in (0, 1):
        x, y = t[0] + (ii + k) * t[1], t[3] + (jj + k) * t[5]
        lo, _ = transform(g.crs.to_wkt(), "EPSG:4326", x.ravel().tolist(), y.ravel().tolist())
        lo = np.array(lo).reshape(x.shape)
        lo = np.where(lo < centre - 180, lo + 360, np.where(lo > centre + 180, lo - 360, lo))
        lon.append(lo)
    return np.abs(lon[0] - lon[1]) > 180


def centre_lon(g):
    from rasterio.warp import transform
    t = g.geotransform
    jj, ii = np.mgrid[0:g.height, 0:g.width] + 0.5
    x, y = t[0] + ii * t[1], t[3] + jj * t[5]
    lo, _ = transform(g.crs.to_wkt(), "EPSG:4326", x.ravel().tolist(), y.ravel().tolist())
    return np.array(lo).reshape(x.shape)[None]


@pytest.mark.parametrize("kernel", ["nearest", "mode", "average"])
@pytest.mark.parametrize("case", list(ACROSS))
def test_across_the_antimeridian(data, case, kernel, tmp_path):
    """Grids across 180 E read from a -180..180 source with overviews: the
    overview gdalwarp picks, and its pixels (east of 180 from the source's
    west).  Old code read no pixel east of 180 (half of the 4326 grid was
    nodata) and picked overview 3 (8x) for the UTM 60 grid."""
    g = ACROSS[case]()
    exp, lvl_gdal = F.gdalwarp_wheel(data["world"], str(tmp_path / "r.tif"), g,
                                     {"nearest": "near"}.get(kernel, kernel),
                                     extra=["-et", "0"])
    got, lvl = ours(data["world"], g, kernel)
    assert lvl == lvl_gdal, (lvl, lvl_gdal)
    assert (got != 0).all() and (exp != 0).all()
    diff = np.abs(got.astype(int) - exp)
    if kernel == "nearest":
        assert diff.max() == 0, np.argwhere(diff)[:5]
        return
    seam = seam_pixels(g)[None]
    ok = diff <= (1 if kernel == "average" else 0)
    assert (ok | seam).all(), np.argwhere(~(ok | seam))[:5]
    # the seam's pixels the short way round: from the columns near 180
    assert (got[seam] >= 195).all(), got[seam]


@pytest.mark.parametrize("kernel", ["bilinear", "cubic"])
@pytest.mark.parametrize("case", list(ACROSS))
def test_across_the_antimeridian_interpolating(data, case, kernel, tmp_path):
    """Bilinear and cubic: equal (within one unit) to gdalwarp reading the
    same pixels laid out 0..360, where the grid does not cross the source's
    edge (gdalwarp across the edge widens the kernel by the whole source
    width)."""
    g = ACROSS[case]()
    exp, lvl_gdal = F.gdalwarp_wheel(data["world360"], str(tmp_path / "r.tif"), g, kernel,
                                     extra=["-et", "0"])
    got, lvl = ours(data["world"], g, kernel)
    assert lvl == lvl_gdal
    diff = np.abs(got.astype(int) - exp)
    assert diff.max() <= 1, np.argwhere(diff > 1)[:5]


@pytest.mark.parametrize("kernel", ["nearest", "bilinear", "mode"])
@pytest.mark.parametrize("bounds,crs", [((-178, -18, -172, -12), "EPSG:4326"),
                                        ((175, -18, 182, -11), "EPSG:4326"),
                                        ((200000, 8000000, 600000, 8900000), "EPSG:32701")])
def test_source_past_180(data, bounds, crs, kernel, tmp_path):
    """A source whose extent goes past 180 (170..190 E): a grid west of
    -180 / across 180 / in UTM zone 1 reads it (longitudes brought into
    the source's range, as GDAL's centre longitude does)."""
    g = grid(crs, bounds, 0.1 if crs == "EPSG:4326" else 10000)
    exp, lvl_gdal = F.gdalwarp_wheel(data["past180"], str(tmp_path / "r.tif"), g,
                                     {"nearest": "near"}.get(kernel, kernel),
                                     extra=["-et", "0"])
    got, lvl = ours(data["past180"], g, kernel)
    assert lvl == lvl_gdal
    assert (exp != 0).mean() > 0.5
    diff = np.abs(got.astype(int) - exp)
    assert diff.max() <= (1 if kernel == "bilinear" else 0), np.argwhere(diff)[:5]


@pytest.mark.parametrize("kernel", ["nearest", "bilinear", "cubic", "average", "mode"])
@pytest.mark.parametrize("case", list(POLAR))
def test_pole_inside_the_grid(data, case, kernel, tmp_path):
    """A polar stereographic grid with the pole inside, from a geographic
    source covering 60..90 (or -90..-60): gdalwarp's pixels.  Old code
    missed the rows near the pole (sampling only the window's edges) and
    read 60 % nodata, from an overview 8x too coarse."""
    src, make = POLAR[case]
    g = make()
    exp, lvl_gdal = F.gdalwarp_wheel(data[src], str(tmp_path / "r.tif"), g,
                                     {"nearest": "near"}.get(kernel, kernel),
                                     extra=["-et", "0"])
    if kernel in ("bilinear", "cubic"):
        # gdalwarp's taps stop at its source's edge (180 degrees): where
        # the pixel is nearer 180 than 0, the reference is gdalwarp on the
        # same pixels laid out 0..360 (its edge then at 0)
        exp360, _ = F.gdalwarp_wheel(data[src + "360"], str(tmp_path / "r360.tif"), g, kernel,
                                     extra=["-et", "0"])
        exp = np.where(np.abs(centre_lon(g)) > 90, exp360, exp)
    got, lvl = ours(data[src], g, kernel)
    assert lvl == lvl_gdal, (lvl, lvl_gdal)
    assert (got != 0).mean() == (exp != 0).mean()
    diff = np.abs(got.astype(int) - exp)
    assert diff.max() <= (0 if kernel in ("nearest", "mode") else 1), np.argwhere(diff)[:5]


@pytest.mark.parametrize("case", list(POLAR))
def test_mode_of_floats_around_the_pole(data, case, tmp_path):
    """Mode of a float32 source (GDAL's list procedure) next to the pole:
    old code failed with "out of memory (mode)" (a footprint before the
    window's start made a negative span, a huge allocation); now it is
    gdalwarp's."""
    src, make = POLAR[case]
    g = make()
    exp, lvl_gdal = F.gdalwarp_wheel(data[src + "_f32"], str(tmp_path / "r.tif"), g, "mode",
                                     extra=["-et", "0"])
    got, lvl = ours(data[src + "_f32"], g, "mode")
    assert lvl == lvl_gdal
    np.testing.assert_array_equal(got, exp)


@pytest.mark.parametrize("case", ["4326 170..190", "UTM 60N", "PDC Mercator (3832)"])
def test_defaults_across_the_antimeridian(data, case, tmp_path):
    """With the default error threshold (0.125 px), as test_geo_warp.py
    bounds it across CRSs: at most 2 % of pixels differ (nearest)."""
    g = ACROSS[case]()
    exp, _ = F.gdalwarp_wheel(data["world"], str(tmp_path / "r.tif"), g, "near")
    got, _ = ours(data["world"], g, "nearest", et=0.125)
    assert (got != exp).sum() <= 0.02 * got.size


@pytest.mark.parametrize("case", list(POLAR))
def test_defaults_around_the_pole(data, case, tmp_path):
    src, make = POLAR[case]
    g = make()
    for kernel in ("nearest", "mode"):
        exp, _ = F.gdalwarp_wheel(data[src], str(tmp_path / "r.tif"), g,
                                  {"nearest": "near"}.get(kernel, kernel))
        got, _ = ours(data[src], g, kernel, et=0.125)
        assert (got != 0).all()
        assert (got != exp).sum() <= 0.02 * got.size, (kernel, (got != exp).sum())


@pytest.mark.parametrize("which", ["north", "across"])
def test_loader_grid_across_180_and_on_the_pole(data, which):
    """The Loader on those grids: every patch equals cog.read(grid=) of its
    grid (the samplers plan with the same functions)."""
    if which == "north":
        src, g = data["north"], POLAR["north, EPSG:3413"][1]()
    else:
        src, g = data["world"], ACROSS["UTM 60N"]()
    for kernel in ("nearest", "mode", "bilinear"):
        with cogfeed.Loader(src, grid=g, patch_size=10, batch_size=8, sampler="grid",
                            resampling=kernel, dtype="float32", scale_offset=False) as ld:
            n = 0
            with cogfeed.open(src) as c:
                for b in ld:
                    assert (b["image"] != 0).all()  # old code: nodata past 180 / at the pole
                    for i, pg in enumerate(b["grid"]):
                        exp = c.read(grid=pg, resampling=kernel).astype(np.float32)
                        np.testing.assert_array_equal(b["image"][i], exp, err_msg=str(pg))
                        n += 1
        assert n == (g.width // 10) * (g.height // 10)

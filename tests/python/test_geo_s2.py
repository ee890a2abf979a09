"""The Sentinel-2-like layout of `cogfeed synth --layout s2`, and a per-band
stack read onto one grid from it: every band, SCL, the WGS 84 DEM and the
15 m labels onto 10 m patches, each compared with gdalwarp onto the same
patch (geo_fixtures.py)."""

import os
import subprocess
import sys

import numpy as np
import pytest

import cogfeed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import geo_fixtures as F  # noqa: E402

BIN = os.environ.get("COGFEED_BIN", "cogfeed")
SIZE = 384


@pytest.fixture(scope="module")
def tile(tmp_path_factory):
    d = tmp_path_factory.mktemp("s2")
    subprocess.run([BIN, "synth", str(d), "--layout", "s2", "--size", str(SIZE), "--tile", "128",
                    "--seed", "3", "--quiet"], check=True, capture_output=True)
    from cogfeed.tools import synth_s2
    return synth_s2.layout(str(d))


def test_layout(tile):
    res = {"B02": 10, "B03": 10, "B04": 10, "B08": 10, "B05": 20, "B06": 20, "B07": 20,
           "B8A": 20, "B11": 20, "B12": 20, "SCL": 20, "B01": 60, "B09": 60}
    for band, r in res.items():
        with cogfeed.open(tile[band]) as c:
            assert c.crs == 32633 and c.res == (r, r)
            assert (c.width, c.height) == (SIZE * 10 // r, SIZE * 10 // r)
            assert c.nodata == 0
            assert np.dtype(c.dtype) == (np.uint8 if band == "SCL" else np.uint16)
            assert c.bounds == pytest.approx((500000, 5100000 - SIZE * 10, 500000 + SIZE * 10,
                                              5100000))
            if r == 10:
                assert len(c.overviews) >= 1  # internal overviews, as the archives
    with cogfeed.open(tile["SCL"]) as c:
        assert set(np.unique(c.read())) <= {0, 4, 5, 6, 8, 9}
    with cogfeed.open(tile["DEM"]) as c:
        assert c.crs == 4326 and c.nodata == -9999 and np.dtype(c.dtype) == np.float32
        assert (c.read() == -9999).any()
    with cogfeed.open(tile["LABELS"]) as c:
        assert c.res == (15, 15) and c.transform[2] == 500007 and c.transform[5] == 5099997
        assert c.nodata == 255


STACK = [("B02", "bilinear"), ("B03", "bilinear"), ("B04", "bilinear"), ("B08", "bilinear"),
         ("B05", "bilinear"), ("B06", "bilinear"), ("B07", "bilinear"), ("B8A", "bilinear"),
         ("B11", "bilinear"), ("B12", "bilinear"), ("B01", "cubic"), ("B09", "cubic"),
         ("SCL", "nearest"), ("LABELS", "mode"), ("DEM", "bilinear")]


@pytest.mark.parametrize("patch", [(64, 64, 128), (0, 200, 96), (300, 300, 84)])
def test_stack_onto_10m_patches(tile, patch, tmp_path):
    """Each input onto a 10 m patch of B02's grid, as the Loader will read
    a sample; the patches cross the nodata strip, the image's edge and the
    labels' unsurveyed rows."""
    x, y, n = patch
    with cogfeed.open(tile["B02"]) as ref:
        grid = ref.grid().window(x, y, n, n)
    for name, rs in STACK:
        with cogfeed.open(tile[name]) as c:
            got = c.read(grid=grid, resampling=rs,
                         error_threshold=0 if name == "DEM" else 0.125)
        exp = F.gdalwarp(tile[name], str(tmp_path / "r.tif"), grid, rs,
                         extra=["-et", "0"] if name == "DEM" else [])
        assert got.shape == (1, n, n)
        assert np.array_equal(got, exp), "%s (%s) at %s: %d pixels differ" % (
            name, rs, patch, int((got != exp).sum()))


def test_60m_grid_reads_an_overview(tile):
    with cogfeed.open(tile["B02"]) as c:
        g60 = cogfeed.Grid.from_bounds(c.crs, c.bounds, 60)
        level = cogfeed._cogfeed.grid_level(c, g60, "average")
        assert level >= 1  # decodes an overview, not the 10 m pixels
        assert level == F.gdalwarp_overview(tile["B02"], g60, "average")

"""CRSs and grids: cogfeed's reading of a file's CRS against GDAL's reading
of the same GDAL-written file (EPSG codes, deprecated codes, user-defined
projections, compound CRSs), cogfeed.CRS round trips, cogfeed.Grid, and the
CRS in `cogfeed info`.  GDAL here is the command-line tools (gdalinfo
-json), the oracle of geo_fixtures.py."""

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import cogfeed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import geo_fixtures as F  # noqa: E402

BIN = os.environ.get("COGFEED_BIN", "cogfeed")

# (name, -a_srs, env for writing, expected EPSG or None, written or None)
SRS = [
    ("utm33", "EPSG:32633", None, 32633, 32633),
    ("wgs84", "EPSG:4326", None, 4326, 4326),
    ("webmerc", "EPSG:3857", None, 3857, 3857),
    ("nztm_northing_first", "EPSG:2193", None, 2193, 2193),
    ("polar_north", "EPSG:3413", None, 3413, 3413),
    ("laea_europe", "EPSG:3035", None, 3035, 3035),
    ("ny_state_plane_usft", "EPSG:2263", None, 2263, 2263),
    ("albers_conus", "EPSG:5070", None, 5070, 5070),
    ("deprecated_2143", "EPSG:2143", {"OSR_USE_NON_DEPRECATED": "NO"}, 2948, 2143),
    ("deprecated_3410", "EPSG:3410", {"OSR_USE_NON_DEPRECATED": "NO"}, 6933, 3410),
    ("google_900913", "EPSG:900913", None, None, None),
    ("user_lcc", "+proj=lcc +lat_1=33 +lat_2=45 +lat_0=39 +lon_0=-96 +x_0=0 +y_0=0 "
     "+datum=NAD83 +units=m +no_defs", None, None, None),
    ("user_sinusoidal", "+proj=sinu +lon_0=0 +x_0=0 +y_0=0 +R=6371007.181 +units=m +no_defs",
     None, None, None),
    ("user_aea_usft", "+proj=aea +lat_1=29.5 +lat_2=45.5 +lat_0=23 +lon_0=-96 +x_0=0 +y_0=0 "
     "+ellps=GRS80 +units=us-ft +no_defs", None, None, None),
    ("user_stere", "+proj=stere +lat_0=90 +lat_ts=70 +lon_0=-45 +k=1 +x_0=0 +y_0=0 "
     "+datum=WGS84 +units=m +no_defs", None, None, None),
    ("user_tm_bessel", "+proj=tmerc +lat_0=0 +lon_0=9 +k=0.9996 +x_0=500000 +y_0=0 "
     "+ellps=bessel +units=m +no_defs", None, None, None),
    ("user_longlat_sphere", "+proj=longlat +R=6371000 +no_defs", None, None, None),
    ("compound_egm96", "EPSG:32633+5773", None, None, 32633),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("geo_crs")
    arr = np.arange(64 * 48, dtype=np.uint16).reshape(1, 48, 64)
    out = {}
    for name, srs, env, _, _ in SRS:
        geographic = "longlat" in srs or srs in ("EPSG:4326",)
        gt = (10.0, 0.001, 0.0, 45.0, 0.0, -0.001) if geographic else (
            400000.0, 30.0, 0.0, 5000000.0, 0.0, -30.0)
        out[name] = F.write_gtiff(str(d / (name + ".tif")), arr, gt, srs, env=env)
    return out


@pytest.mark.parametrize("name,srs,env,epsg,written", SRS, ids=[s[0] for s in SRS])
def test_crs_matches_gdal(files, name, srs, env, epsg, written):
    path = files[name]
    info = F.gdalinfo(path)
    gdal_wkt = info["coordinateSystem"]["wkt"]
    with cogfeed.open(path) as cog:
        crs = cog.crs
        assert crs is not None, "%s: no CRS" % name
        # PROJ finds our CRS and GDAL's equivalent
        assert crs == cogfeed.CRS(gdal_wkt), "%s:\nours %s\nGDAL %s" % (
            name, crs.to_wkt(), gdal_wkt)
        # the EPSG code GDAL's CRS carries, when it carries one
        gdal_code = cogfeed.CRS(gdal_wkt).epsg
        if epsg is not None:
            assert crs.epsg == epsg == gdal_code
        if written is not None:
            assert crs.epsg_written == written
        # round trips
        for text in (str(crs), crs.to_wkt(), crs.to_json()):
            assert cogfeed.CRS(text) == crs
        assert pickle.loads(pickle.dumps(crs)) == crs
        # transform, bounds, resolution as GDAL has them
        gt = info["geoTransform"]
        assert cog.geotransform == pytest.approx(gt)
        assert cog.transform == pytest.approx((gt[1], gt[2], gt[0], gt[4], gt[5], gt[3]))
        cc = info["cornerCoordinates"]
        assert cog.bounds == pytest.approx((cc["lowerLeft"][0], cc["lowerLeft"][1],
                                            cc["upperRight"][0], cc["upperRight"][1]))
        assert cog.res == pytest.approx((abs(gt[1]), abs(gt[5])))


def test_user_defined_is_never_none(files):
    for name in ("user_lcc", "user_sinusoidal", "user_aea_usft", "google_900913"):
        with cogfeed.open(files[name]) as cog:
            assert cog.crs is not None and cog.crs.epsg is None
            assert cog.crs.to_wkt().startswith("PROJCRS[")
            assert str(cog.crs) == cog.crs.to_wkt()   # no code: WKT2
    with cogfeed.open(files["user_aea_usft"]) as cog:
        assert cog.crs.linear_unit == pytest.approx(1200 / 3937)


def test_crs_api():
    a = cogfeed.CRS("EPSG:32633")
    assert a == cogfeed.CRS(32633) == cogfeed.CRS.from_epsg(32633) == 32633
    assert a != 32632 and a != cogfeed.CRS(32632)
    assert a == "EPSG:32633" and a != "not a crs"
    assert a.equals("+proj=utm +zone=33 +datum=WGS84")
    assert a.to_epsg() == 32633 and a.is_projected and not a.is_geographic
    assert "UTM zone 33N" in a.name
    assert repr(a) == "CRS('EPSG:32633')" and str(a) == "EPSG:32633"
    assert json.loads(a.to_json())["type"] == "ProjectedCRS"
    assert cogfeed.CRS(json.loads(a.to_json())) == a  # a PROJJSON dict
    assert hash(a) == hash(cogfeed.CRS(a.to_wkt())) == hash(32633)
    assert {a: 1}[cogfeed.CRS("EPSG:32633")] == 1
    g = cogfeed.CRS("OGC:CRS84")
    assert g == cogfeed.CRS(4326)  # GeoTIFF axis order: longitude first either way
    assert g.is_geographic and g.linear_unit is None

    class Foreign:  # rasterio's and pyproj's CRS expose to_wkt()
        def to_wkt(self):
            return a.to_wkt()

    assert cogfeed.CRS(Foreign()) == a
    d = cogfeed.CRS("EPSG:2143")
    assert d.epsg == 2948 and d.epsg_written == 2143 and d == cogfeed.CRS(2948)
    with pytest.raises(cogfeed.Error, match="not a CRS"):
        cogfeed.CRS("EPSG:nonsense")
    with pytest.raises(TypeError):
        cogfeed.CRS(3.5)
    with pytest.raises(ValueError):
        cogfeed.CRS(None)


def test_grid_api(files, tmp_path):
    g = cogfeed.Grid.from_bounds("EPSG:32633", (300000, 5000000, 300105, 5000052), 10)
    # gdalwarp's -te/-tr rule: (105 + 5) / 10 -> 11, (52 + 5) / 10 -> 5
    assert (g.width, g.height) == (11, 5)
    assert g.transform == (10, 0, 300000, 0, -10, 5000052)
    assert g.geotransform == (300000, 10, 0, 5000052, 0, -10)
    assert g.res == (10, 10) and g.shape == (5, 11)
    assert g.bounds == pytest.approx((300000, 5000002, 300110, 5000052))
    w = g.window(2, 1, 3, 2)
    assert w.geotransform == (300020, 10, 0, 5000042, 0, -10) and w.shape == (2, 3)
    assert pickle.loads(pickle.dumps(g)) == g
    assert cogfeed.Grid(32633, g.transform, 11, 5) == g
    with pytest.raises(AttributeError):
        g.width = 3
    with pytest.raises(ValueError, match="empty"):
        cogfeed.Grid.from_bounds(32633, (10, 10, 5, 20), 1)
    with cogfeed.open(files["utm33"]) as cog:
        like = cogfeed.Grid.like(cog)
        assert like == cog.grid() and like.crs == 32633
        assert (like.width, like.height) == (cog.width, cog.height)
        assert like.geotransform == cog.geotransform
        # reading a file onto its own grid gives its pixels
        assert np.array_equal(cog.read(grid=like, resampling="cubic"), cog.read())
    assert cogfeed.Grid.like(files["utm33"]) == like
    # gdalwarp agrees on the size of a from_bounds grid
    odd = cogfeed.Grid.from_bounds("EPSG:32633", (400007, 4998601, 401333, 4999877), 30)
    F.run(["gdalwarp", "-q", "-te", "400007", "4998601", "401333", "4999877", "-tr", "30", "30",
           files["utm33"], str(tmp_path / "o.tif")])
    with cogfeed.open(str(tmp_path / "o.tif")) as o:
        assert (o.width, o.height) == (odd.width, odd.height)


def test_info_json_and_text(files):
    out = subprocess.run([BIN, "info", "--json", files["deprecated_2143"]], capture_output=True,
                         text=True, check=True).stdout
    info = json.loads(out)
    assert info["epsg"] == 2948
    c = info["crs"]
    assert c["epsg"] == 2948 and c["epsg_written"] == 2143 and c["kind"] == "projected"
    assert c["string"] == "EPSG:2948" and c["wkt"].startswith("PROJCRS[")
    assert c["projjson"]["type"] == "ProjectedCRS"
    assert info["res"] == [30, 30] and len(info["bounds"]) == 4
    text = subprocess.run([BIN, "info", files["deprecated_2143"]], capture_output=True,
                          text=True, check=True).stdout
    assert "EPSG:2948" in text and "written as EPSG:2143" in text
    out = subprocess.run([BIN, "info", "--json", files["user_lcc"]], capture_output=True,
                         text=True, check=True).stdout
    info = json.loads(out)
    assert info["epsg"] is None and info["crs"]["epsg"] is None
    assert cogfeed.CRS(info["crs"]["wkt"]) == cogfeed.CRS(json.dumps(info["crs"]["projjson"]))
    text = subprocess.run([BIN, "info", files["user_lcc"]], capture_output=True, text=True,
                          check=True).stdout
    assert "user-defined projected" in text


def test_no_crs(tmp_path):
    arr = np.zeros((1, 8, 8), dtype=np.uint8)
    p = F.write_gtiff(str(tmp_path / "plain.tif"), arr, (0, 1, 0, 8, 0, -1), None)
    with cogfeed.open(p) as cog:
        assert cog.crs is None and cog.epsg is None
        g = cog.grid()
        assert g.crs is None
        assert np.array_equal(cog.read(grid=g), cog.read())
        with pytest.raises(cogfeed.Error, match="no CRS"):
            cog.read(grid=cogfeed.Grid.from_bounds(32633, (0, 0, 8, 8), 1))
    info = json.loads(subprocess.run([BIN, "info", "--json", p], capture_output=True, text=True,
                                     check=True).stdout)
    assert info["crs"] is None and info["epsg"] is None


_NET_CHILD = """
import sys
import cogfeed
cog = cogfeed.open(sys.argv[1])
g = cogfeed.Grid.from_bounds(4326, (-99.9, 39.6, -99.5, 39.9), 0.01)
print(cog.read(grid=g).shape)
"""


@pytest.mark.parametrize("opt_in", [False, True])
def test_proj_network_only_when_asked(tmp_path, opt_in):
    """A NAD27 file read onto EPSG:4326 with PROJ_NETWORK=ON in the
    environment: PROJ's network stays off (no request to its grid server,
    here a local recording server, and no cache database in $HOME); only
    COGFEED_PROJ_NETWORK=ON turns it on."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "servers"))
    from hostile import Hostile
    arr = np.arange(64 * 48, dtype=np.uint16).reshape(1, 48, 64)
    path = F.write_cog(str(tmp_path / "nad27.tif"), arr,
                       (-100.0, 0.01, 0.0, 40.0, 0.0, -0.01), srs="EPSG:4267")
    home = tmp_path / "home"
    home.mkdir()
    with Hostile() as h:
        env = dict(os.environ, HOME=str(home), PROJ_NETWORK="ON",
                   PROJ_NETWORK_ENDPOINT=h.url("/").rstrip("/"))
        for k in ("XDG_DATA_HOME", "PROJ_USER_WRITABLE_DIRECTORY",
                  "COGFEED_PROJ_NETWORK"):
            env.pop(k, None)
        if opt_in:
            env["COGFEED_PROJ_NETWORK"] = "ON"
        r = subprocess.run([sys.executable, "-c", _NET_CHILD, path], env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        seen = h.seen()
    written = [os.path.join(d, f) for d, _, fs in os.walk(home) for f in fs]
    if opt_in:
        assert seen and written, (seen, written)
    else:
        assert seen == [] and written == [], (seen, written)

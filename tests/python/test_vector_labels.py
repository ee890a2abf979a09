"""Labels from vector files (cogfeed.VectorLabels, cf_vlabels): polygons
burnt with gdal_rasterize's rules, equal pixel for pixel to gdal_rasterize
(Debian's GDAL) and rasterio's GDAL 3.10, with and without all_touched,
reprojected as ogr2ogr then gdal_rasterize, and as the Loader's masks."""

import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

import cogfeed
from cogfeed.vector import _geojson_wkb

pyogrio = pytest.importorskip("pyogrio")
import pyogrio.raw  # noqa: E402

X0, Y0, RES, W, H = 500000.0, 4000000.0, 10.0, 300, 200
UTM = "EPSG:32633"


def _ring(rng, cx, cy, r, n):
    a = np.sort(rng.uniform(0, 2 * np.pi, n))
    rr = r * rng.uniform(0.4, 1.0, n)
    ring = [(cx + rr[i] * np.cos(a[i]), cy + rr[i] * np.sin(a[i]))
            for i in range(n)]
    return ring + [ring[0]]


def _features(seed, n=60, x0=X0, y0=Y0, res=RES, w=W, h=H):
    """Random star-shaped polygons, some with holes, some MultiPolygons
    whose parts overlap, spilling over the grid's edges; classes 1..249."""
    rng = np.random.default_rng(seed)
    feats = []
    for _ in range(n):
        cx = x0 + rng.uniform(-20 * res, (w + 20) * res)
        cy = y0 - rng.uniform(-20 * res, (h + 20) * res)
        r = rng.uniform(2 * res, 40 * res)
        rings = [_ring(rng, cx, cy, r, int(rng.integers(3, 25)))]
        if rng.random() < 0.3:
            hole = [(cx + 0.2 * r * np.cos(t), cy + 0.2 * r * np.sin(t))
                    for t in np.linspace(0, 2 * np.pi, 7)[:-1]]
            rings.append(hole + [hole[0]])
        g = {"type": "Polygon", "coordinates": rings}
        if rng.random() < 0.2:
            part = _ring(rng, cx + 30 * res, cy - 10 * res, 15 * res, 8)
            g = {"type": "MultiPolygon", "coordinates": [rings, [part]]}
        feats.append((g, int(rng.integers(1, 250))))
    return feats


def _write_vector(path, feats, crs=UTM, driver="GPKG", field="cls"):
    if os.path.exists(path):
        os.remove(path)
    geoms = np.array([_geojson_wkb(g) for g, _ in feats], dtype=object)
    vals = np.array([v for _, v in feats], dtype=np.int32)
    pyogrio.raw.write(path, geoms, [vals], fields=[field],
                      geometry_type="MultiPolygon", crs=crs, driver=driver,
                      promote_to_multi=True)
    return path


def _grid(x0=X0, y0=Y0, res=RES, w=W, h=H, crs=UTM):
    return cogfeed.Grid(crs, geotransform=(x0, res, 0, y0, 0, -res),
                        width=w, height=h)


def _gdal_rasterize(tmp_path, src, grid, all_touched, field="cls",
                    ot="Byte"):
    out = str(tmp_path / "ref.tif")
    if os.path.exists(out):
        os.remove(out)
    x0, res, _, y0, _, yres = grid.geotransform
    cmd = ["gdal_rasterize", "-q", "-a", field, "-ot", ot, "-init", "0",
           "-te", repr(x0), repr(y0 + grid.height * yres),
           repr(x0 + grid.width * res), repr(y0),
           "-tr", repr(res), repr(-yres), src, out]
    if all_touched:
        cmd.append("-at")
    subprocess.run(cmd, check=True, capture_output=True)
    import rasterio
    with rasterio.open(out) as ds:
        return ds.read(1)


needs_gdal = pytest.mark.skipif(shutil.which("gdal_rasterize") is None,
                                reason="GDAL's command-line tools missing")


@needs_gdal
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("all_touched", [False, True])
def test_equal_to_gdal_rasterize(tmp_path, seed, all_touched):
    src = _write_vector(str(tmp_path / "f.gpkg"), _features(seed))
    vl = cogfeed.VectorLabels(src, "cls", all_touched=all_touched)
    ours = vl.rasterize(_grid())
    ref = _gdal_rasterize(tmp_path, src, _grid(), all_touched)
    assert ours.dtype == np.uint8
    assert (ref > 0).sum() > 5000  # the test burns something
    assert np.array_equal(ours, ref), np.argwhere(ours != ref)[:10]


@pytest.mark.parametrize("all_touched", [False, True])
def test_equal_to_rasterio_gdal_310(all_touched):
    """The same rules as GDAL 3.10's GDALRasterizeGeometries (rasterio)."""
    from rasterio.features import rasterize
    from rasterio.transform import Affine
    feats = _features(11)
    vl = cogfeed.VectorLabels([g for g, _ in feats],
                              values=[v for _, v in feats], crs=UTM,
                              all_touched=all_touched)
    ours = vl.rasterize(_grid())
    ref = rasterize(feats, out_shape=(H, W),
                    transform=Affine(RES, 0, X0, 0, -RES, Y0),
                    all_touched=all_touched, fill=0, dtype="uint8")
    assert np.array_equal(ours, ref), np.argwhere(ours != ref)[:10]


def _lonlat_file(tmp_path, feats):
    utm = _write_vector(str(tmp_path / "utm.gpkg"), feats)
    ll = str(tmp_path / "ll.gpkg")
    subprocess.run(["ogr2ogr", "-q", "-t_srs", "EPSG:4326", ll, utm],
                   check=True, capture_output=True)
    return ll


@needs_gdal
@pytest.mark.parametrize("all_touched", [False, True])
def test_reprojected_like_gdal(tmp_path, all_touched):
    ll = _lonlat_file(tmp_path, _features(21))
    back = str(tmp_path / "back.gpkg")
    subprocess.run(["ogr2ogr", "-q", "-t_srs", UTM, back, ll], check=True,
                   capture_output=True)
    vl = cogfeed.VectorLabels(ll, "cls", all_touched=all_touched)
    assert vl.crs is not None and vl.crs.epsg == 4326
    ours = vl.rasterize(_grid())
    ref = _gdal_rasterize(tmp_path, back, _grid(), all_touched)
    assert (ref > 0).sum() > 5000
    assert np.array_equal(ours, ref), np.argwhere(ours != ref)[:10]


def test_formats_and_classes(tmp_path):
    """GeoJSON and Shapefile read like GeoPackage (a Shapefile keeps no
    parts: GDAL regroups its rings, so it is compared with gdal_rasterize
    of itself); class names map through classes=; a name it lacks is an
    error naming the file and feature."""
    feats = _features(3, n=20)
    ref = cogfeed.VectorLabels(_write_vector(str(tmp_path / "f.gpkg"), feats),
                               "cls").rasterize(_grid())
    p = _write_vector(str(tmp_path / "f.geojson"), feats, driver="GeoJSON")
    assert np.array_equal(cogfeed.VectorLabels(p, "cls").rasterize(_grid()), ref)
    if shutil.which("gdal_rasterize"):
        p = _write_vector(str(tmp_path / "f.shp"), feats, driver="ESRI Shapefile")
        assert np.array_equal(cogfeed.VectorLabels(p, "cls").rasterize(_grid()),
                              _gdal_rasterize(tmp_path, p, _grid(), False))
    names = [("wheat" if v % 2 else "maize", v) for _, v in feats]
    path = str(tmp_path / "named.gpkg")
    geoms = np.array([_geojson_wkb(g) for g, _ in feats], dtype=object)
    pyogrio.raw.write(path, geoms, [np.array([n for n, _ in names], dtype=object)],
                      fields=["crop"], geometry_type="MultiPolygon", crs=UTM,
                      driver="GPKG", promote_to_multi=True)
    vl = cogfeed.VectorLabels(path, "crop", classes={"wheat": 1, "maize": 2})
    got = vl.rasterize(_grid())
    assert set(np.unique(got)) <= {0, 1, 2} and (got == 1).any() and (got == 2).any()
    with pytest.raises(ValueError, match=r"named.gpkg: feature \d+ has crop='maize'"):
        cogfeed.VectorLabels(path, "crop", classes={"wheat": 1})
    with pytest.raises(ValueError, match="has no field 'class'"):
        cogfeed.VectorLabels(path, "class")
    with pytest.raises(ValueError, match="not a number"):
        cogfeed.VectorLabels(path, "crop")


def test_value_types_and_order():
    """Later features overwrite earlier ones; values beyond uint8 give a
    wider mask; a non-integer class is refused."""
    sq = lambda x0, y0, s: {"type": "Polygon", "coordinates": [[
        (x0, y0), (x0 + s, y0), (x0 + s, y0 - s), (x0, y0 - s), (x0, y0)]]}
    g = _grid(w=20, h=20)
    vl = cogfeed.VectorLabels([sq(X0, Y0, 100), sq(X0 + 50, Y0 - 50, 100)],
                              values=[3, 7], crs=UTM)
    m = vl.rasterize(g)
    assert m[0, 0] == 3 and m[7, 7] == 7 and m[12, 12] == 7 and m[15, 15] == 0
    assert cogfeed.VectorLabels([sq(X0, Y0, 100)], values=[300]).dtype == "uint16"
    assert cogfeed.VectorLabels([sq(X0, Y0, 100)], values=[-1]).dtype == "int32"
    with pytest.raises(cogfeed.Error, match="feature 0 has value 1.5"):
        cogfeed.VectorLabels([sq(X0, Y0, 100)], values=[1.5])


def _wkb_polygon(rings, nrings=None, npts=None):
    b = struct.pack("<BII", 1, 3, len(rings) if nrings is None else nrings)
    for r in rings:
        b += struct.pack("<I", len(r) if npts is None else npts)
        b += b"".join(struct.pack("<dd", x, y) for x, y in r)
    return b


def test_hostile_wkb_is_refused_by_name():
    ok = _wkb_polygon([[(0, 0), (1, 0), (1, 1), (0, 0)]])
    cases = [
        (ok[:-5], "feature 1: WKB ring 0 claims 4 vertices"),
        (_wkb_polygon([[(0, 0)]], nrings=0x7fffffff), "feature 1: WKB polygon claims"),
        (_wkb_polygon([[(0, 0)]], npts=0x7fffffff), "feature 1: WKB ring 0 claims"),
        (struct.pack("<BIdd", 1, 1, 0, 0), "feature 1: WKB geometry type 1"),
        (b"\x07", "feature 1: not WKB"),
        (struct.pack("<BII", 1, 6, 0x10000000), "feature 1: WKB multipolygon claims"),
        (struct.pack("<BIIdd", 1, 3, 1, float("nan"), 0)[:9] +
         struct.pack("<I", 1) + struct.pack("<dd", float("inf"), 0),
         "feature 1: a vertex is not a finite number"),
    ]
    for wkb, msg in cases:
        with pytest.raises(cogfeed.Error, match=msg):
            cogfeed._cogfeed._VLabels([ok, wkb], [1, 2])


def test_big_endian_and_ewkb_z():
    ring = [(X0, Y0), (X0 + 100, Y0), (X0 + 100, Y0 - 100), (X0, Y0)]
    le = _wkb_polygon([ring])
    be = struct.pack(">BII", 0, 3, 1) + struct.pack(">I", 4) + b"".join(
        struct.pack(">dd", x, y) for x, y in ring)
    ewkb_z = struct.pack("<BII", 1, 0x80000003 | 0x20000000, 32633) + struct.pack(
        "<II", 1, 4) + b"".join(struct.pack("<ddd", x, y, 5.0) for x, y in ring)
    iso_zm = struct.pack("<BII", 1, 3003, 1) + struct.pack("<I", 4) + b"".join(
        struct.pack("<dddd", x, y, 1.0, 2.0) for x, y in ring)
    g = _grid(w=20, h=20)
    ref = cogfeed.VectorLabels([le], values=[1]).rasterize(g)
    assert ref.sum() > 0
    for wkb in (be, ewkb_z, iso_zm):
        assert np.array_equal(cogfeed.VectorLabels([wkb], values=[1]).rasterize(g), ref)


def test_index_selects_only_features_near_the_grid():
    """The R-tree: a grid selects exactly the features whose bounds meet
    its bounds (checked against a brute-force scan)."""
    rng = np.random.default_rng(5)
    feats = _features(7, n=2000, w=3000, h=3000)
    vl = cogfeed.VectorLabels([g for g, _ in feats], values=[v for _, v in feats],
                              crs=UTM)
    boxes = []
    for g, _ in feats:
        rings = g["coordinates"] if g["type"] == "Polygon" else [
            r for p in g["coordinates"] for r in p]
        xy = np.array([p for r in rings for p in r])
        boxes.append((xy[:, 0].min(), xy[:, 1].min(), xy[:, 0].max(), xy[:, 1].max()))
    boxes = np.array(boxes)
    for _ in range(50):
        px, py = rng.uniform(0, 3000, 2)
        g = _grid(x0=X0 + px * RES, y0=Y0 - py * RES, w=64, h=64)
        x0, y0 = X0 + px * RES, Y0 - py * RES
        x1, y1 = x0 + 64 * RES, y0 - 64 * RES
        want = ((boxes[:, 0] <= x1) & (boxes[:, 2] >= x0) &
                (boxes[:, 1] <= y0) & (boxes[:, 3] >= y1)).sum()
        arr, n = vl._c.rasterize(g)
        assert n == want
    # a patch equals the same window of one burn of the whole region
    big = _grid(x0=X0, y0=Y0, w=3000, h=3000)
    whole = vl.rasterize(big)
    for _ in range(20):
        px, py = (int(v) for v in rng.integers(0, 3000 - 64, 2))
        g = _grid(x0=X0 + px * RES, y0=Y0 - py * RES, w=64, h=64)
        assert np.array_equal(vl.rasterize(g), whole[py:py + 64, px:px + 64])


def _image(tmp_path, w=512, h=384, crs=UTM):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 255, (2, h, w), dtype=np.uint8)
    p = str(tmp_path / "img.tif")
    cogfeed.write(p, a, grid=_grid(w=w, h=h, crs=crs), tile_size=128)
    return p, a


def test_loader_masks_are_the_burnt_labels(tmp_path):
    img, a = _image(tmp_path)
    feats = _features(9, n=80, w=512, h=384)
    vl = cogfeed.VectorLabels(_write_vector(str(tmp_path / "f.gpkg"), feats), "cls")
    whole = vl.rasterize(_grid(w=512, h=384))
    seen = 0
    with cogfeed.Loader(img, labels=vl, patch_size=64, batch_size=8,
                        sampler="grid") as ld:
        for batch in ld:
            assert batch["mask"].dtype == np.uint8
            for k, (f, x, y, w, h) in enumerate(batch["windows"]):
                assert np.array_equal(batch["mask"][k, 0], whole[y:y + 64, x:x + 64])
                seen += 1
    assert seen == (512 // 64) * (384 // 64)


def _aug(p, code):
    out = np.rot90(p, code & 3, axes=(-2, -1))
    return out[..., ::-1] if code & 4 else out


def test_loader_labels_are_augmented_with_the_image(tmp_path):
    img, a = _image(tmp_path)
    feats = _features(9, n=80, w=512, h=384)
    vl = cogfeed.VectorLabels([g for g, _ in feats], values=[v for _, v in feats],
                              crs=UTM, all_touched=True)
    whole = vl.rasterize(_grid(w=512, h=384))
    with cogfeed.Loader(img, labels=vl, patch_size=64, batch_size=8,
                        sampler="random", flip=True, rot90=True, seed=3) as ld:
        batch = next(iter(ld))
        codes = set()
        for k, (f, x, y, w, h) in enumerate(batch["windows"]):
            code = batch["augment"][k]
            codes.add(code)
            assert np.array_equal(batch["image"][k], _aug(a[:, y:y + 64, x:x + 64], code))
            assert np.array_equal(batch["mask"][k, 0],
                                  _aug(whole[y:y + 64, x:x + 64], code))
        assert len(codes) > 1


def test_loader_labels_on_another_grid(tmp_path):
    """With grid=, labels are burnt on each patch's target grid."""
    img, _ = _image(tmp_path)
    feats = _features(9, n=80, w=512, h=384)
    vl = cogfeed.VectorLabels([g for g, _ in feats], values=[v for _, v in feats],
                              crs=UTM)
    target = _grid(x0=X0 + 5, y0=Y0 - 5, res=20.0, w=256, h=192)
    whole = vl.rasterize(target)
    with cogfeed.Loader(img, labels=vl, patch_size=32, batch_size=4,
                        sampler="grid", grid=target) as ld:
        for batch in ld:
            for k, (f, x, y, w, h) in enumerate(batch["windows"]):
                assert np.array_equal(batch["mask"][k, 0], whole[y:y + 32, x:x + 32])


def test_loader_labels_refusals(tmp_path):
    img, _ = _image(tmp_path)
    vl = cogfeed.VectorLabels([], values=[], crs=UTM)
    with pytest.raises(cogfeed.Error, match="labels and masks"):
        cogfeed.Loader(img, masks=img, labels=vl)
    with pytest.raises(TypeError, match="labels must be a cogfeed.VectorLabels"):
        cogfeed.Loader(img, labels="fields.gpkg")
    bare = str(tmp_path / "bare.tif")
    cogfeed.write(bare, np.zeros((1, 128, 128), np.uint8), tile_size=128)
    with pytest.raises(cogfeed.Error, match="need georeferenced images.*bare.tif"):
        cogfeed.Loader(bare, labels=vl, patch_size=64)
    with pytest.raises(ValueError, match="nope.gpkg"):
        cogfeed.VectorLabels(str(tmp_path / "nope.gpkg"), "cls")

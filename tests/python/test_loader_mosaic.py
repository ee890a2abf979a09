"""Mosaics (issue 27): Loader(mosaic=True) reads the scenes of a sample
file's list onto each patch's grid and takes every pixel from the first
scene that has data there.  Checked against gdalwarp given the same scenes
in reverse order (its later sources go on top) onto the same patch grid:
two overlapping scenes in UTM 33N with nodata edges and a third in UTM 32N
(reprojected), pixel for pixel with every kernel; the valid mask equals where
gdalwarp wrote; a later scene is read only where the patch still lacks
data (requests counted)."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import cogfeed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import geo_fixtures as F  # noqa: E402

RES = 10.0
# The region (UTM 33N): scene A at its left, B overlapping A's right third,
# C (UTM 32N) over the bottom right, a strip along the top left of nobody.
X0, Y1 = 500000.0, 4000000.0
REGION = (X0, Y1 - 400 * RES, X0 + 640 * RES, Y1)


def scene(rng, w, h, hole):
    a = rng.integers(1, 4000, size=(2, h, w), dtype=np.uint16)
    y0, y1, x0, x1 = hole
    a[:, y0:y1, x0:x1] = 0            # nodata in every band (a scene edge)
    return a


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    d = tmp_path_factory.mktemp("mosaic")
    rng = np.random.default_rng(11)
    a = scene(rng, 300, 380, (0, 120, 200, 300))          # A lacks its top right
    a[:, :40, :100] = 0                                  # and its top left
    A = F.write_cog(str(d / "A.tif"), a, (X0, RES, 0, Y1 - 20 * RES, 0, -RES), nodata=0,
                    blocksize=128)
    b = scene(rng, 360, 300, (250, 300, 0, 360))          # B lacks its bottom
    B = F.write_cog(str(d / "B.tif"), b, (X0 + 200 * RES, RES, 0, Y1, 0, -RES), nodata=0,
                    blocksize=128)
    # C: made in UTM 33N, warped into UTM 32N by GDAL (a scene of the next
    # zone west), then a COG.
    c = scene(rng, 300, 260, (0, 30, 0, 300))
    c33 = F.write_cog(str(d / "c33.tif"), c,
                      (X0 + 320 * RES, RES, 0, Y1 - 140 * RES, 0, -RES), nodata=0,
                      blocksize=128)
    c32 = str(d / "c32.tif")
    F.run(["gdalwarp", "-q", "-t_srs", "EPSG:32632", "-tr", "11", "11", "-r", "near",
           c33, c32])
    C = str(d / "C.tif")
    F.run(["gdal_translate", "-q", "-of", "COG", "-co", "BLOCKSIZE=128", c32, C])
    return {"A": A, "B": B, "C": C, "dir": str(d)}


def region_grid():
    return {"crs": 32633, "res": RES, "bounds": REGION}


def gdal_mosaic(srcs, dst, grid, rs, et=()):
    """gdalwarp of srcs (first on top) onto grid; nodata 0."""
    b = grid.bounds
    F.run(["gdalwarp", "-q", "-overwrite", "-of", "GTiff", "-r", rs] + list(et) + [
           "-t_srs", grid.crs.to_wkt(), "-te", repr(b[0]), repr(b[1]), repr(b[2]),
           repr(b[3]), "-tr", repr(grid.res[0]), repr(grid.res[1]), "-dstnodata", "0"]
          + list(reversed(srcs)) + [dst])
    with cogfeed.open(dst) as c:
        return c.read()


@pytest.mark.parametrize("rs", ["nearest", "bilinear", "cubic", "average", "mode"])
def test_mosaic_equals_gdalwarp(scenes, tmp_path, rs):
    order = [scenes["A"], scenes["B"], scenes["C"]]
    n = covered = holes = 0
    # Exact PROJ on both sides: with the approximate transformer one
    # pixel of C in 16,000 picks the neighbouring source pixel (the source
    # positions differ from gdalwarp's in the last bits).
    with cogfeed.Loader([order], patch_size=128, batch_size=4, sampler="grid",
                        grid=region_grid(), mosaic=True, resampling=rs,
                        error_threshold=0, valid_mask=True) as ld:
        assert ld.layout["time_steps"] == 1
        for b in ld:
            assert b["image"].shape[1:] == (2, 128, 128)
            for i, g in enumerate(b["grid"]):
                exp = gdal_mosaic(order, str(tmp_path / "m.tif"), g,
                                  {"nearest": "near"}.get(rs, rs), ("-et", "0"))
                np.testing.assert_array_equal(b["image"][i], exp, err_msg=str(g))
                np.testing.assert_array_equal(b["valid"][i, 0], (exp != 0).all(axis=0),
                                              err_msg=str(g))
                n += 1
                covered += int(b["valid"][i].all())
                holes += int(not b["valid"][i].any())
    assert n == 5 * 4            # 640 x 400 in 128 px patches, the last moved back
    assert covered and holes < n


def test_order_decides_where_scenes_overlap(scenes, tmp_path):
    """B first: its pixels win in the overlap."""
    order = [scenes["B"], scenes["A"]]
    g = cogfeed.Grid.from_bounds(32633, (X0 + 200 * RES, Y1 - 200 * RES,
                                         X0 + 300 * RES, Y1 - 100 * RES), RES)
    with cogfeed.Loader([order], patch_size=100, batch_size=1, sampler="grid", grid=g,
                        mosaic=True) as ld:
        img = next(iter(ld))["image"][0]
    with cogfeed.open(scenes["B"]) as c:
        np.testing.assert_array_equal(img, c.read(grid=g, resampling="nearest"))
    np.testing.assert_array_equal(img, gdal_mosaic(order, str(tmp_path / "o.tif"), g, "near"))


def requests(images, grid, **kw):
    """Reads of the epoch's one batch and of the batch the readers read
    ahead into the next epoch (the ring's other slot), the files' opening
    not counted; and the batch."""
    # One reader (how local reads are merged depends on what else is in
    # flight) and a ring of two slots, waited on until it is full.
    with cogfeed.Loader(images, patch_size=64, batch_size=4, sampler="grid", grid=grid,
                        cache_bytes=0, decode_threads=1, concurrency=1, prefetch=2,
                        **kw) as ld:
        assert len(ld) == 1
        opened = ld.stats()["requests"]
        img = next(iter(ld))["image"].copy()
        last, same = -1, 0
        while same < 10:
            st = ld.stats()
            n = st["requests"]
            same = same + 1 if n == last and not st["reading"] else 0
            last = n
            time.sleep(0.03)
        return last - opened, img


def test_later_scenes_are_read_only_where_needed(scenes):
    # A patch area where A has data everywhere: B and C are never read.
    full = cogfeed.Grid.from_bounds(32633, (X0 + 100 * RES, Y1 - 280 * RES,
                                            X0 + 228 * RES, Y1 - 152 * RES), RES)
    alone, a_img = requests([scenes["A"]], full)
    mosaic, m_img = requests([[scenes["A"], scenes["B"], scenes["C"]]], full, mosaic=True)
    assert mosaic == alone > 0
    np.testing.assert_array_equal(a_img, m_img)
    # Where A has a hole that B covers, B is read too.
    hole = cogfeed.Grid.from_bounds(32633, (X0 + 200 * RES, Y1 - 148 * RES,
                                            X0 + 264 * RES, Y1 - 20 * RES), RES)
    alone, _ = requests([scenes["A"]], hole)
    mosaic, _ = requests([[scenes["A"], scenes["B"]]], hole, mosaic=True)
    assert mosaic > alone


def test_scene_outside_the_patch_costs_no_request(scenes):
    """C lies in the region's bottom right only: a patch at the top left
    reads A and B, and C (another CRS) gives no request."""
    g = cogfeed.Grid.from_bounds(32633, (X0, Y1 - 64 * RES, X0 + 64 * RES, Y1), RES)
    ab, _ = requests([[scenes["A"], scenes["B"]]], g, mosaic=True)
    abc, _ = requests([[scenes["A"], scenes["B"], scenes["C"]]], g, mosaic=True)
    assert abc == ab


def test_float32_and_layers_with_mosaic(scenes, tmp_path):
    """A layer is read once per sample, after the mosaic's channels."""
    order = [scenes["A"], scenes["B"]]
    with cogfeed.Loader([order], layers=[[scenes["C"]]], patch_size=128, batch_size=2,
                        sampler="grid", grid=region_grid(), mosaic=True,
                        resampling="nearest", dtype="float32", scale_offset=False,
                        error_threshold=0, valid_mask=True) as ld:
        assert ld.layout["channels"] == 4
        b = next(iter(ld))
    for i, g in enumerate(b["grid"]):
        exp = gdal_mosaic(order, str(tmp_path / "m.tif"), g, "near")
        np.testing.assert_array_equal(b["image"][i, :2], exp.astype(np.float32))
        with cogfeed.open(scenes["C"]) as c:
            lay = c.read(grid=g, resampling="nearest", error_threshold=0)
        np.testing.assert_array_equal(b["image"][i, 2:], lay.astype(np.float32))
        np.testing.assert_array_equal(
            b["valid"][i, 0], (exp != 0).all(axis=0) & (lay != 0).all(axis=0))


def test_mosaic_of_one_scene_is_the_scene(scenes):
    g = region_grid()
    with cogfeed.Loader([[scenes["A"]]], patch_size=128, batch_size=4, sampler="grid",
                        grid=g, mosaic=True) as m, \
            cogfeed.Loader([scenes["A"]], patch_size=128, batch_size=4, sampler="grid",
                           grid=g) as s:
        for x, y in zip(m, s):
            np.testing.assert_array_equal(x["image"], y["image"])


def stac_item(id_, href, when, cloud):
    return {"type": "Feature", "stac_version": "1.0.0", "id": id_,
            "geometry": None, "bbox": None, "links": [],
            "properties": {"datetime": when, "eo:cloud_cover": cloud},
            "assets": {"visual": {"href": href, "type": "image/tiff"}}}


def test_stac_items_in_mosaic_order(scenes, tmp_path):
    """Items sorted newest first or clearest first make the mosaic's
    order: where A and B overlap, the first in that order wins."""
    from cogfeed import stac
    items = stac.items([stac_item("a", scenes["A"], "2024-07-01T10:00:00Z", 5.0),
                        stac_item("b", scenes["B"], "2024-07-11T10:00:00Z", 40.0),
                        stac_item("n", scenes["A"], "2024-06-01T10:00:00Z", None)])
    assert [i.id for i in items.sorted("recent")] == ["b", "a", "n"]
    assert [i.id for i in items.sorted("clear")] == ["a", "b", "n"]
    assert [i.id for i in items.sorted(lambda i: -len(i.id))] == ["a", "b", "n"]
    with pytest.raises(ValueError, match="recent"):
        items.sorted("cloudy")
    g = cogfeed.Grid.from_bounds(32633, (X0 + 200 * RES, Y1 - 200 * RES,
                                         X0 + 300 * RES, Y1 - 100 * RES), RES)
    for by, order in (("recent", "BA"), ("clear", "AB")):
        sel = items.filter(lambda i: i.id != "n").sorted(by).select(["visual"])
        assert sel.images() == [scenes[k] for k in order]
        with cogfeed.Loader([sel.images()], patch_size=100, batch_size=1, sampler="grid",
                            grid=g, mosaic=True) as ld:
            img = next(iter(ld))["image"][0]
        np.testing.assert_array_equal(
            img, gdal_mosaic(sel.images(), str(tmp_path / "s.tif"), g, "near"))


@pytest.fixture(scope="module")
def scl(scenes):
    """SCL-like class rasters at 20 m over A and B: mostly 4 (vegetation),
    blobs of 8 and 9 (clouds), a strip of 3 (shadow) in B."""
    rng = np.random.default_rng(5)
    out = {}
    for name, (x0, y1, w, h) in {"A": (X0, Y1 - 20 * RES, 150, 190),
                                 "B": (X0 + 200 * RES, Y1, 180, 150)}.items():
        c = np.full((1, h, w), 4, np.uint8)
        for _ in range(6):
            cy, cx, r = rng.integers(0, h), rng.integers(0, w), rng.integers(5, 25)
            yy, xx = np.ogrid[:h, :w]
            c[0][(yy - cy) ** 2 + (xx - cx) ** 2 < r * r] = rng.choice([8, 9])
        if name == "A":
            c[0, 70:100, 110:140] = 9           # over the part B also covers
        if name == "B":
            c[0, 40:55, :] = 3
        out[name] = F.write_cog(os.path.join(scenes["dir"], "scl_%s.tif" % name), c,
                                (x0, 2 * RES, 0, y1, 0, -2 * RES), nodata=None, blocksize=64)
    return out


def scene_valid(scene, scl, grid, tmp_path, classes):
    """Where a scene has data on grid by GDAL: its pixels (nearest) not 0,
    its SCL (nearest) covering them and not of an invalid class."""
    s = gdal_mosaic([scene], str(tmp_path / "s.tif"), grid, "near", ("-et", "0"))
    m = F.gdalwarp(scl, str(tmp_path / "c.tif"), grid, "near", extra=("-et", "0", "-dstalpha"))
    ok = (s != 0).all(axis=0) & (m[-1] > 0) & ~np.isin(m[0], classes)
    return s, ok


def test_scene_masks_in_a_mosaic_match_gdal(scenes, scl, tmp_path):
    """Clouds and shadows of each scene's SCL are no data: the mosaic takes
    those pixels from the next scene, as a by-hand mosaic of GDAL warps
    does."""
    classes = [3, 8, 9]
    n = taken_from_b = 0
    with cogfeed.Loader([[scenes["A"], scenes["B"]]], patch_size=128, batch_size=4,
                        sampler="grid", grid=region_grid(), mosaic=True,
                        resampling="nearest", error_threshold=0, valid_mask=True,
                        scene_masks=[[scl["A"], scl["B"]]], invalid_classes=classes) as ld:
        for b in ld:
            for i, g in enumerate(b["grid"]):
                sa, va = scene_valid(scenes["A"], scl["A"], g, tmp_path, classes)
                sb, vb = scene_valid(scenes["B"], scl["B"], g, tmp_path, classes)
                exp = np.where(va, sa, np.where(vb, sb, sa))
                np.testing.assert_array_equal(b["image"][i], exp, err_msg=str(g))
                np.testing.assert_array_equal(b["valid"][i, 0], va | vb, err_msg=str(g))
                taken_from_b += int((~va & vb & (sa != 0).all(axis=0)).sum())
                n += 1
    assert n == 20 and taken_from_b > 0   # clouds over A filled from B


def test_scene_masks_in_a_time_series(scenes, scl, tmp_path):
    """A series of two dates: valid (B, T, H, W) is where each date is
    clear."""
    classes = [8, 9]
    g = cogfeed.Grid.from_bounds(32633, (X0 + 200 * RES, Y1 - 300 * RES,
                                         X0 + 300 * RES, Y1 - 40 * RES), RES)
    with cogfeed.Loader([[scenes["A"], scenes["B"]]], patch_size=100, batch_size=2,
                        sampler="grid", grid=g, resampling="nearest", error_threshold=0,
                        valid_mask=True, scene_masks=[[scl["A"], scl["B"]]],
                        invalid_classes=classes) as ld:
        b = next(iter(ld))
    assert b["image"].shape[1:3] == (2, 2) and b["valid"].shape == (2, 2, 100, 100)
    for i, pg in enumerate(b["grid"]):
        _, va = scene_valid(scenes["A"], scl["A"], pg, tmp_path, classes)
        _, vb = scene_valid(scenes["B"], scl["B"], pg, tmp_path, classes)
        np.testing.assert_array_equal(b["valid"][i, 0], va)
        np.testing.assert_array_equal(b["valid"][i, 1], vb)
        assert (va != vb).any()   # the dates' validity differ


def test_scene_masks_shape_is_checked(scenes, scl):
    with pytest.raises(ValueError, match="scene_masks"):
        cogfeed.Loader([[scenes["A"], scenes["B"]]], mosaic=True, scene_masks=[scl["A"]])
    with pytest.raises(ValueError, match="scene_masks"):
        cogfeed.Loader([scenes["A"]], valid_mask=True, scene_masks=[[scl["A"]]])
    with pytest.raises(ValueError, match="invalid_classes"):
        cogfeed.Loader([scenes["A"]], valid_mask=True, scene_masks=[scl["A"]],
                       invalid_classes=list(range(300)))


# -- cogfeed.load: a region into an array --------------------------------

@pytest.fixture(scope="module")
def band_files(scenes):
    """Each scene's two bands as files of their own (per-band COGs, as
    Sentinel-2 archives hold them)."""
    out = {}
    for k in "ABC":
        for b in (1, 2):
            p = os.path.join(scenes["dir"], "%s_b%d.tif" % (k, b))
            F.run(["gdal_translate", "-q", "-of", "COG", "-co", "BLOCKSIZE=128", "-b",
                   str(b), scenes[k], p])
            out[k, b] = p
    return out


def test_per_band_files_mosaicked_as_layers(scenes, band_files, scl):
    """A mosaic whose layers are lists of scenes (one file per scene, e.g.
    per-band COGs): each is mosaicked on its own and stacked as channels.
    Equal to one mosaic Loader per band stacked, and, as the bands share
    their nodata, to the mosaic of the two-band files; valid where both
    bands have data.  Scene masks apply to every layer's mosaic; a STAC
    selection of two assets with mosaic=True is the same mosaic."""
    from cogfeed import stac
    one = [band_files[k, 1] for k in "ABC"]
    two = [band_files[k, 2] for k in "ABC"]
    kw = dict(patch_size=128, batch_size=4, sampler="grid", grid=region_grid(),
              mosaic=True, resampling="nearest", valid_mask=True)
    items = stac.items([{
        "type": "Feature", "id": k, "geometry": None, "links": [],
        "properties": {"datetime": "2024-07-0%dT10:00:00Z" % (3 - i)},
        "assets": {"b1": {"href": band_files[k, 1]}, "b2": {"href": band_files[k, 2]}}}
        for i, k in enumerate("ABC")])
    n = 0
    with cogfeed.Loader([one], layers=[[two]], **kw) as ld, \
            cogfeed.Loader([one], **kw) as l1, cogfeed.Loader([two], **kw) as l2, \
            cogfeed.Loader([[scenes[k] for k in "ABC"]], **kw) as both, \
            cogfeed.Loader(items.select(["b1", "b2"]), **kw) as st:
        assert ld.layout["channels"] == 2
        for b, x1, x2, xb, xs in zip(ld, l1, l2, both, st):
            np.testing.assert_array_equal(b["image"], np.concatenate(
                [x1["image"], x2["image"]], axis=1))
            np.testing.assert_array_equal(b["image"], xb["image"])
            np.testing.assert_array_equal(b["valid"], x1["valid"] & x2["valid"])
            np.testing.assert_array_equal(b["valid"], xb["valid"])
            np.testing.assert_array_equal(b["image"], xs["image"])
            assert b["image"].shape[1:] == (2, 128, 128) and "dates" not in b
            n += 1
    assert n == 5
    sm = dict(scene_masks=[[scl["A"], scl["B"]]], invalid_classes=[3, 8, 9])
    with cogfeed.Loader([one[:2]], layers=[[two[:2]]], **kw, **sm) as ld, \
            cogfeed.Loader([[scenes["A"], scenes["B"]]], **kw, **sm) as both:
        for b, xb in zip(ld, both):
            np.testing.assert_array_equal(b["image"], xb["image"])
            np.testing.assert_array_equal(b["valid"], xb["valid"])
    # mean / std per output channel (the image's, then the layer's), and
    # layers given as iterators (read twice inside: made lists first)
    f32 = dict(kw, dtype="float32", scale_offset=False)
    with cogfeed.Loader([one], layers=iter([iter([two])]), mean=[100.0, 200.0],
                        std=[2.0, 4.0], **f32) as ld, \
            cogfeed.Loader([one], layers=[[two]], **f32) as raw:
        for b, r in zip(ld, raw):
            np.testing.assert_allclose(
                b["image"], (r["image"] - np.array([100.0, 200.0], np.float32)[:, None, None])
                / np.array([2.0, 4.0], np.float32)[:, None, None], rtol=1e-6)
    with pytest.raises(ValueError, match="one value, or one per channel"):
        cogfeed.Loader([one], layers=[[two]], mean=[1.0, 2.0, 3.0], **f32)
    with pytest.raises(ValueError, match=r"layers\[0\]\[0\]: 2 scenes, the mosaic has 3"):
        cogfeed.Loader([one], layers=[[two[:2]]], **kw)
    with pytest.raises(ValueError, match="every layer as a file .* or every one as a list"):
        cogfeed.Loader([one], layers=[[two, scenes["C"]]], **kw)


def test_load_region_is_gdal_mosaic(scenes, tmp_path):
    """Plain files make one mosaic over the whole region, as gdalwarp
    gives it; valid where some scene had data."""
    order = [scenes["A"], scenes["B"], scenes["C"]]
    g = cogfeed.Grid.from_bounds(32633, REGION, RES)
    r = cogfeed.load(order, grid=g, valid=True, error_threshold=0, patch_size=200)
    assert r.data.shape == (1, 2, g.height, g.width) and r.data.dtype == np.uint16
    exp = gdal_mosaic(order, str(tmp_path / "r.tif"), g, "near", ("-et", "0"))
    np.testing.assert_array_equal(r.data[0], exp)
    np.testing.assert_array_equal(r.valid[0], (exp != 0).all(axis=0))
    assert r.times == [None] and r.bands == ["1", "2"] and r.nodata == 0
    # One step per file with groupby=None, each that file on the grid.
    r = cogfeed.load(order, grid={"crs": 32633, "res": RES, "bounds": REGION},
                     groupby=None, resampling="bilinear", error_threshold=0)
    assert r.data.shape[0] == 3
    for t, src in enumerate(order):
        with cogfeed.open(src) as c:
            np.testing.assert_array_equal(
                r.data[t], c.read(grid=g, resampling="bilinear", error_threshold=0))


def test_load_stac_items_by_solar_day(scenes, scl, tmp_path):
    """A and B on one solar day (one step, A first), C a day later; with
    SCL clouds out."""
    from cogfeed import stac

    def item(id_, href, when, lon, mask=None):
        d = stac_item(id_, href, when, 1.0)
        d["bbox"] = [lon - 0.1, 36.0, lon + 0.1, 36.2]
        if mask:
            d["assets"]["scl"] = {"href": mask, "type": "image/tiff"}
        return d
    # 23:30 UTC at 15 E is 00:30 the next solar day: with B (00:10 UTC).
    items = stac.items([item("a", scenes["A"], "2024-07-01T23:30:00Z", 15.0, scl["A"]),
                        item("b", scenes["B"], "2024-07-02T00:10:00Z", 15.0, scl["B"]),
                        item("c", scenes["C"], "2024-07-03T10:00:00Z", 15.0, scl["A"])])
    g = cogfeed.Grid.from_bounds(32633, REGION, RES)
    r = cogfeed.load(items, ["visual"], grid=g, error_threshold=0)
    assert r.data.shape == (2, 2, g.height, g.width) and r.bands == ["visual_1", "visual_2"]
    assert [t.day for t in r.times] == [1, 3]
    np.testing.assert_array_equal(
        r.data[0], gdal_mosaic([scenes["A"], scenes["B"]], str(tmp_path / "s.tif"), g, "near",
                               ("-et", "0")))
    # By UTC date instead the two split.
    assert cogfeed.load(items, ["visual"], grid=g, groupby="time").data.shape[0] == 3
    # Clouds of A's SCL come from B.
    r = cogfeed.load(items[:2], ["visual"], grid=g, error_threshold=0, scene_masks="scl",
                     invalid_classes=[3, 8, 9], valid=True)
    sa, va = scene_valid(scenes["A"], scl["A"], g, tmp_path, [3, 8, 9])
    sb, vb = scene_valid(scenes["B"], scl["B"], g, tmp_path, [3, 8, 9])
    np.testing.assert_array_equal(r.data[0], np.where(va, sa, np.where(vb, sb, sa)))
    np.testing.assert_array_equal(r.valid[0], va | vb)


def test_load_assets_of_other_types_fill_one_array(scenes, scl):
    """Two assets (the scenes' bands and their 20 m SCL) go into one
    array, each into its bands, in the assets' types promoted: what the
    separate loads joined would be."""
    from cogfeed import stac
    items = []
    for k, name in enumerate("AB"):
        d = stac_item(name.lower(), scenes[name], "2024-07-0%dT10:00:00Z" % (k + 1), 1.0)
        d["assets"]["scl"] = {"href": scl[name], "type": "image/tiff"}
        items.append(d)
    items = stac.items(items)
    g = cogfeed.Grid.from_bounds(32633, REGION, RES)
    r = cogfeed.load(items, ["visual", "scl"], grid=g, groupby=None)
    v = cogfeed.load(items, ["visual"], grid=g, groupby=None).data
    c = cogfeed.load(items, ["scl"], grid=g, groupby=None).data
    assert r.bands == ["visual_1", "visual_2", "scl"]
    assert r.data.dtype == np.result_type(v.dtype, c.dtype)
    np.testing.assert_array_equal(r.data, np.concatenate([v, c], axis=1))
    assert r.data[:, 2].any() and r.data[:, :2].any()


def test_load_to_xarray(scenes):
    xr = pytest.importorskip("xarray")
    g = cogfeed.Grid.from_bounds(32633, (X0, Y1 - 100 * RES, X0 + 150 * RES, Y1), RES)
    da = cogfeed.load([scenes["A"], scenes["B"]], grid=g, valid=True, output="xarray")
    assert isinstance(da, xr.DataArray) and da.dims == ("time", "band", "y", "x")
    assert da.shape == (1, 2, 100, 150)
    assert da.x.values[0] == X0 + RES / 2 and da.y.values[0] == Y1 - RES / 2
    assert "32633" in da.attrs["crs"] and da.attrs["transform"][0] == RES
    assert da.valid.dims == ("time", "y", "x")


def test_load_refuses_what_it_cannot_do(scenes):
    with pytest.raises(ValueError, match="bounds"):
        cogfeed.load([scenes["A"]], grid={"crs": 32633, "res": 10})
    with pytest.raises(ValueError, match="bands"):
        cogfeed.load([scenes["A"]], ["red"], grid=scenes["A"])
    with pytest.raises(ValueError, match="groupby"):
        cogfeed.load([scenes["A"]], grid=scenes["A"], groupby="month")
    with pytest.raises(ValueError, match="output"):
        cogfeed.load([scenes["A"]], grid=scenes["A"], output="dask")


# -- skip_empty: patches no scene reaches --------------------------------

BIG = (X0, Y1 - 700 * RES, X0 + 1040 * RES, Y1)   # the region and much empty land


def test_grid_leaves_out_windows_no_scene_reaches(scenes):
    order = [[scenes["A"], scenes["B"], scenes["C"]]]
    kw = dict(patch_size=128, batch_size=8, sampler="grid", mosaic=True, valid_mask=True,
              grid={"crs": 32633, "res": RES, "bounds": BIG})
    with cogfeed.Loader(order, **kw) as ld:
        every = {tuple(w): b["valid"][i].any() for b in ld
                 for i, w in enumerate(b["windows"])}
    with cogfeed.Loader(order, skip_empty=True, **kw) as ld:
        kept = [tuple(w) for b in ld for w in b["windows"]]
        st = ld.stats()
    assert len(set(kept)) == len(kept)
    assert st["empty_left_out"] > 0 and len(kept) + st["empty_left_out"] == len(every)
    # Nothing with data was left out; what was left out had none.
    left = set(every) - set(kept)
    assert len(left) == st["empty_left_out"]
    assert not any(every[w] for w in left)
    assert sum(1 for w in kept if not every[w]) < len(left)


def test_random_draws_again_where_no_scene_reaches(scenes):
    order = [[scenes["A"], scenes["B"], scenes["C"]]]
    kw = dict(patch_size=128, batch_size=16, sampler="random", mosaic=True, valid_mask=True,
              grid={"crs": 32633, "res": RES, "bounds": BIG}, seed=3, epoch_length=64)
    with cogfeed.Loader(order, **kw) as ld:
        empty_before = sum(int(not v.any()) for b in ld for v in b["valid"])
    with cogfeed.Loader(order, skip_empty=True, **kw) as ld:
        w1 = [ld.window(j) for j in range(16)]
        empty_after = sum(int(not v.any()) for b in ld for v in b["valid"])
        wins = [ld.window(j)[0] for j in range(len(ld) * 16)]
        st = ld.stats()
    # A pure function of the seed: the same windows again.
    with cogfeed.Loader(order, skip_empty=True, **kw) as ld:
        assert [ld.window(j) for j in range(16)] == w1
    # What is left empty lies in a scene's footprint (its nodata edges),
    # never outside every footprint: A and B's rectangles, and the bounds
    # of C's outline in UTM 33N (padded 8 px, as footprint.c pads them).
    warp = pytest.importorskip("rasterio.warp")
    with cogfeed.open(scenes["C"]) as c:
        cb = warp.transform_bounds("EPSG:32632", "EPSG:32633", *c.bounds, densify_pts=21)
    rects = [(0, 20, 300, 400), (200, 0, 560, 300),
             ((cb[0] - X0) / RES - 8, (Y1 - cb[3]) / RES - 8, (cb[2] - X0) / RES + 8,
              (Y1 - cb[1]) / RES + 8)]
    for _, x, y, w, h in wins:
        assert any(x < r[2] and r[0] < x + w and y < r[3] and r[1] < y + h for r in rects)
    assert empty_before > 10 and empty_after < empty_before // 3 and st["empty_redrawn"] > 0


def test_skip_empty_refuses_tile_shuffle(scenes):
    with pytest.raises(cogfeed.ArgumentError, match="tile-shuffle"):
        cogfeed.Loader([scenes["A"]], sampler="tile-shuffle", skip_empty=True)


def test_scene_mask_options_are_not_ignored(scenes, scl):
    with pytest.raises(cogfeed.ArgumentError, match="valid_mask or mosaic"):
        cogfeed.Loader([scenes["A"]], scene_masks=[scl["A"]], invalid_classes=[9])
    with pytest.raises(cogfeed.ArgumentError, match="without scene_masks"):
        cogfeed.Loader([scenes["A"]], valid_mask=True, invalid_classes=[9])


def test_resampled_input_without_the_loaders_level(tmp_path):
    """An image with overviews read at level 1 and a layer without them
    (resampled from its full resolution): the loader sizes its decoding
    from the levels the layer has (it read past them before; ASan)."""
    rng = np.random.default_rng(2)
    img = F.write_cog(str(tmp_path / "i.tif"), rng.integers(1, 9, (1, 512, 512), np.uint16),
                      (X0, RES, 0, Y1, 0, -RES), blocksize=128, overviews=True)
    lay = F.write_cog(str(tmp_path / "l.tif"), rng.integers(1, 9, (1, 256, 256), np.uint16),
                      (X0, 2 * RES, 0, Y1, 0, -2 * RES), blocksize=128)
    with cogfeed.Loader([img], layers=[[lay]], level=1, patch_size=64, batch_size=4,
                        sampler="grid", resampling="nearest") as ld:
        b = next(iter(ld))
    for i, g in enumerate(b["grid"]):
        with cogfeed.open(lay) as c:
            np.testing.assert_array_equal(b["image"][i, 1], c.read(grid=g, resampling="nearest")[0])


def test_load_narrow_region_and_big_steps(scenes):
    """A region one pixel high is read with the usual patches (their part
    inside kept); a step of more scenes than a mosaic takes is refused."""
    g = cogfeed.Grid.from_bounds(32633, (X0, Y1 - 100 * RES, X0 + 300 * RES, Y1 - 99 * RES), RES)
    r = cogfeed.load([scenes["A"]], grid=g)
    assert r.data.shape == (1, 2, 1, 300)
    with cogfeed.open(scenes["A"]) as c:
        np.testing.assert_array_equal(r.data[0], c.read(grid=g, resampling="nearest"))
    with pytest.raises(ValueError, match="1048576"):
        cogfeed.load([scenes["A"]] * (2 ** 20 + 1), grid=g)
    # The steps one Loader reads are padded to the largest: a group stays
    # within a Loader's 2^20 scenes (two steps of 2^19 + 1 were refused
    # by the Loader: found by review).
    from cogfeed.region import _groups_of_reads
    big = 2 ** 19 + 1
    assert _groups_of_reads([big, big, 3], 1, [False] * 3) == [[(0, 0)], [(1, 0)], [(2, 0)]]
    assert _groups_of_reads([2 ** 16] * 20, 2, [False] * 20) == [
        [(t, a) for t in range(k, min(k + 16, 20))] for a in range(2) for k in (0, 16)]
    assert _groups_of_reads([3, 4, 5], 1, [False, True, True]) == [[(0, 0)], [(1, 0), (2, 0)]]


def test_load_a_step_of_thousands_of_scenes(tmp_path):
    """One mosaic of 1,250 overlapping scenes (a step took at most 1,024,
    and each patch read every scene: the time grew with scenes x patches):
    gdalwarp's mosaic of them pixel for pixel, and where it wrote; scenes
    at another resolution (resampled: footprints from their outlines), a
    scene outside the region and repeats of earlier scenes among them."""
    rng = np.random.default_rng(5)
    paths = []
    for j in range(34):
        for i in range(34):
            res = 15.0 if (i + j) % 7 == 0 else RES
            a = rng.integers(1, 4000, (1, 32, 32), np.uint16)
            y, x = rng.integers(0, 24, 2)
            a[:, y:y + 8, x:x + 12] = 0                  # a hole the next scenes fill
            g = cogfeed.Grid(32633, (res, 0, X0 + i * 20 * RES, 0, -res, Y1 - j * 20 * RES),
                             32, 32)
            p = str(tmp_path / ("s%d_%d.tif" % (j, i)))
            with cogfeed.Writer(p, 32, 32, 1, "uint16", grid=g, tile_size=16, nodata=0,
                                overviews=0) as w:
                w.write(a)
            paths.append(p)
    far = str(tmp_path / "far.tif")
    with cogfeed.Writer(far, 32, 32, 1, "uint16", tile_size=16, nodata=0, overviews=0,
                        grid=cogfeed.Grid(32633, (RES, 0, X0 + 9000 * RES, 0, -RES, Y1),
                                          32, 32)) as w:
        w.write(np.full((1, 32, 32), 7, np.uint16))
    order = paths[:600] + [far] + paths[600:] + paths[:93]
    assert len(order) == 1250
    g = cogfeed.Grid.from_bounds(32633, (X0 + 5 * RES, Y1 - 690 * RES, X0 + 690 * RES,
                                         Y1 - 3 * RES), RES)
    r = cogfeed.load(order, grid=g, groupby="all", valid=True, error_threshold=0)
    exp = gdal_mosaic(paths, str(tmp_path / "m.tif"), g, "near", ("-et", "0"))
    assert r.data.shape == (1, 1, g.height, g.width)
    np.testing.assert_array_equal(r.data[0], exp)
    np.testing.assert_array_equal(r.valid[0], exp[0] != 0)
    assert 0.9 < (exp != 0).mean() < 1


def test_solar_day_across_the_antimeridian_and_time_zones():
    """Fiji: the centre of a bbox across 180 is near 179.25 E, not 0.75 W
    (two scenes a minute apart are one solar day); a datetime with an
    offset is taken in UTC first."""
    from cogfeed import region, stac
    fiji = [178.0, -18.5, -179.5, -16.0]
    items = stac.items([
        dict(stac_item("f1", "/a.tif", "2024-07-10T00:02:00Z", 1.0), bbox=fiji),
        dict(stac_item("f2", "/b.tif", "2024-07-10T00:04:00Z", 1.0), bbox=fiji),
        dict(stac_item("tz", "/c.tif", "2024-07-10T01:00:00+05:00", 1.0),
             bbox=[10.0, 40.0, 11.0, 41.0]),
    ])
    scenes, _, dated = region._scenes(items, ["visual"], None)
    steps = region._groups(scenes, "solar_day", dated)
    assert [[s.key.id for s in st] for st in steps] == [["tz"], ["f1", "f2"]]
    assert region._solar_day(scenes[2]).isoformat() == "2024-07-09"
    assert region._solar_day(scenes[0]).isoformat() == "2024-07-10"


def test_load_uses_its_io_options_for_every_request(scenes):
    """Over HTTPS with a private CA given in io_options: every open of
    cogfeed.load goes through them (the nodata of the first file was read
    through the default IO, which refused the server's certificate)."""
    from cogfeed.tools.servers import Nginx
    g = cogfeed.Grid.from_bounds(32633, (X0, Y1 - 100 * RES, X0 + 150 * RES, Y1), RES)
    with Nginx(scenes["dir"], tls=True) as srv:
        r = cogfeed.load([srv.url("A.tif")], grid=g, io_options={"ca_file": srv.ca_file})
    with cogfeed.open(scenes["A"]) as c:
        np.testing.assert_array_equal(r.data[0], c.read(grid=g, resampling="nearest"))
    assert r.nodata == 0


def test_series_of_mosaics_with_a_reprojected_scene(scenes, scl, tmp_path):
    """12 dates, each the mosaic of a 33N scene (A or B) and the 32N scene
    C (reprojected: several source windows each), every scene with its
    class raster: a date's second scenes go out together (up to a read of
    64 windows: the rest, each with its class raster, in the next round),
    and every date of the series equals the one-date mosaic of its two
    scenes read alone."""
    classes = [8, 9]
    # C's class raster: made in UTM 33N (a cloud across it), warped into
    # C's zone as C was
    c33 = np.full((1, 150, 130), 4, np.uint8)
    c33[0, 40:90, 30:70] = 9
    src = F.write_cog(str(tmp_path / "c_scl33.tif"), c33,
                      (X0 + 320 * RES, 2 * RES, 0, Y1 - 140 * RES, 0, -2 * RES),
                      nodata=None, blocksize=64)
    c32 = str(tmp_path / "c_scl32.tif")
    F.run(["gdalwarp", "-q", "-t_srs", "EPSG:32632", "-tr", "22", "22", "-r", "near",
           src, c32])
    c_scl = str(tmp_path / "c_scl.tif")
    F.run(["gdal_translate", "-q", "-of", "COG", "-co", "BLOCKSIZE=64", c32, c_scl])
    first = ["A", "B"] * 6
    dates = [[scenes[x], scenes["C"]] for x in first]
    masks = [[scl[x], c_scl] for x in first]
    kw = dict(grid=region_grid(), sampler="grid", patch_size=128, batch_size=4,
              resampling="bilinear", valid_mask=True, invalid_classes=classes,
              cache_bytes=0)
    alone = {}
    for x in "AB":
        with cogfeed.Loader([[scenes[x], scenes["C"]]], mosaic=True,
                            scene_masks=[[scl[x], c_scl]], **kw) as ld:
            alone[x] = [(b["image"].copy(), b["valid"].copy()) for b in ld]
    with cogfeed.Loader([dates], scene_masks=[masks], **kw) as ld:
        got = [(b["image"].copy(), b["valid"].copy()) for b in ld]
        st = ld.stats()
    assert len(got) == len(alone["A"]) == 5
    for k, (img, val) in enumerate(got):
        assert img.shape[1] == 12 and val.shape[1] == 12
        for t, x in enumerate(first):
            np.testing.assert_array_equal(img[:, t], alone[x][k][0])
            np.testing.assert_array_equal(val[:, t], alone[x][k][1][:, 0])
    assert st["read_rounds"] <= 4 * st["samples_read"]


def test_patch_size_and_stride_in_crs_units(scenes):
    """units="crs": patch_size and stride in the grid's CRS units (metres
    here, 10 m pixels), as TorchGeo's samplers take them; the same patches
    as in pixels."""
    kw = dict(batch_size=4, sampler="grid", grid=region_grid(), mosaic=True)
    with cogfeed.Loader([[scenes["A"], scenes["B"]]], patch_size=1280, stride=960,
                        units="crs", **kw) as m, \
            cogfeed.Loader([[scenes["A"], scenes["B"]]], patch_size=128, stride=96,
                           **kw) as p:
        assert m.layout["patch_size"] == 128 and len(m) == len(p)
        for x, y in zip(m, p):
            assert x["windows"] == y["windows"]
            np.testing.assert_array_equal(x["image"], y["image"])
    with pytest.raises(ValueError, match="units='crs': give grid="):
        cogfeed.Loader([scenes["A"]], patch_size=1280, units="crs")
    g = cogfeed.Grid.from_bounds(32633, REGION, (10.0, 20.0))
    with pytest.raises(ValueError, match="not square"):
        cogfeed.Loader([scenes["A"]], patch_size=1280, units="crs", grid=g)
    with pytest.raises(ValueError, match="less than a pixel"):
        cogfeed.Loader([scenes["A"]], patch_size=4, units="crs", grid=region_grid())
    with pytest.raises(ValueError, match="units: 'pixels' or 'crs'"):
        cogfeed.Loader([scenes["A"]], units="metres")
    with pytest.raises(ValueError, match="whole pixels"):
        cogfeed.Loader([scenes["A"]], patch_size=12.5)


def test_later_scenes_sure_to_be_read_go_with_the_first(tmp_path):
    """A later scene that a patch will read whatever the scenes before it
    hold (some pixel of the patch lies outside their footprints) goes out
    in the first scenes' round, not a round trip after them: one round a
    sample where it was two.  Under a first scene that reaches the whole
    patch it still waits: a second round where the first has a hole, none
    where the first has data everywhere."""
    hole = np.zeros((256, 512), bool)
    hole[100:140, 300:400] = True

    def scene(name, x0, w, value):
        a = np.full((1, 256, w), value, np.uint16)
        if value == 3:
            a[0][hole] = 0
        p = str(tmp_path / name)
        g = cogfeed.Grid(32633, (RES, 0, X0 + x0 * RES, 0, -RES, Y1), w, 256)
        with cogfeed.Writer(p, w, 256, 1, "uint16", grid=g, tile_size=128, nodata=0,
                            overviews=0) as wr:
            wr.write(a)
        return p
    L, R = scene("L.tif", 0, 256, 1), scene("R.tif", 256, 256, 2)
    H, F = scene("H.tif", 0, 512, 3), scene("F.tif", 0, 512, 4)
    # The region: columns 64 to 448 of the scenes; patches cross L and R.
    g = cogfeed.Grid.from_bounds(32633, (X0 + 64 * RES, Y1 - 256 * RES, X0 + 448 * RES, Y1), RES)
    cols = np.arange(512)
    whole = {"LR": np.tile(np.where(cols < 256, 1, 2), (256, 1)),
             "HR": np.where(hole, 2, 3), "FR": np.full((256, 512), 4)}
    # Scene masks (all of class 4, none invalid) go with their scenes.
    def classes(name, x0, w):
        p = str(tmp_path / name)
        mg = cogfeed.Grid(32633, (RES, 0, X0 + x0 * RES, 0, -RES, Y1), w, 256)
        with cogfeed.Writer(p, w, 256, 1, "uint8", grid=mg, tile_size=128,
                            overviews=0) as wr:
            wr.write(np.full((1, 256, w), 4, np.uint8))
        return p
    masked = dict(scene_masks=[[classes("mL.tif", 0, 256), classes("mR.tif", 256, 256)]],
                  invalid_classes=[9])
    for name, order, rounds, kw in (("LR", [L, R], 1, {}), ("HR", [H, R], 2, {}),
                                    ("FR", [F, R], 1, {}), ("LR", [L, R], 1, masked)):
        with cogfeed.Loader([order], grid=g, mosaic=True, sampler="grid", patch_size=256,
                            batch_size=2, **kw) as ld:
            b = next(iter(ld))
            s = ld.stats()
        assert len(b["windows"]) == 2
        for i, (_, x, y, w, h) in enumerate(b["windows"]):
            np.testing.assert_array_equal(b["image"][i, 0],
                                          whole[name][y:y + h, x + 64:x + 64 + w], err_msg=name)
        assert s["read_rounds"] == rounds * s["samples_read"], (name, s)


def _flat(tmp_path, name, grid, value):
    p = str(tmp_path / name)
    with cogfeed.Writer(p, grid.width, grid.height, 1, "uint16", grid=grid, tile_size=16,
                        nodata=0, overviews=0) as w:
        w.write(np.full((1, grid.height, grid.width), value, np.uint16))
    return p


def test_footprints_across_the_antimeridian(tmp_path):
    """A grid over 170..190 E reads a -180..-170 scene east of 180 (the
    warp brings its longitudes round): its footprint is not where its
    outline lies, and the mosaic took it for missing the patch (found by
    review).  Both orders give the scene's pixels there."""
    A = _flat(tmp_path, "A.tif", cogfeed.Grid(4326, (0.1, 0, 170.0, 0, -0.1, 0.0), 100, 100), 1)
    B = _flat(tmp_path, "B.tif", cogfeed.Grid(4326, (0.07, 0, -180.0, 0, -0.07, 0.0), 143, 143),
              2)
    g = cogfeed.Grid.from_bounds(4326, (170.0, -10.0, 190.0, 0.0), 0.1)
    with cogfeed.open(B) as c:
        b = c.read(grid=g, resampling="nearest")[0]
    assert (b[:, 100:] == 2).all() and not b[:, :100].any()
    for order in ([A, B], [B, A]):
        with cogfeed.Loader([order], grid=g, mosaic=True, sampler="grid", patch_size=100,
                            batch_size=2, resampling="nearest") as ld:
            got = next(iter(ld))
        for i, (_, x, y, w, h) in enumerate(got["windows"]):
            want = np.full((h, w), 1 if x < 100 else 2, np.uint16)
            np.testing.assert_array_equal(got["image"][i, 0], want, err_msg=str(order))


def test_footprint_of_a_curved_outline(tmp_path):
    """A geographic scene's edge along 70 N bends in polar stereographic
    (EPSG:3413) between the outline's sampled points: 333 m past the
    bounds of 21 points an edge, more than the pad (found by review), so
    a mosaic dropped the scene's pixels there.  The footprint now pads by
    the bend it measures."""
    B = _flat(tmp_path, "B.tif", cogfeed.Grid(4326, (0.05, 0, 10.0, 0, -0.05, 80.0), 1800, 200),
              2)
    # The parallel's easternmost point (45 E) and its 21 samples, by GDAL.
    lons = [10 + 4.5 * i for i in range(21)] + [45.0]
    out = subprocess.run(["gdaltransform", "-s_srs", "EPSG:4326", "-t_srs", "EPSG:3413"],
                         input="".join("%r 70\n" % lo for lo in lons), capture_output=True,
                         text=True, check=True).stdout.split("\n")
    pts = [tuple(map(float, ln.split()[:2])) for ln in out if ln.strip()]
    xs_max = max(p[0] for p in pts[:21])
    xm, ym = pts[21]
    assert xm - xs_max > 300                        # the bend the samples miss
    x0 = np.floor((xs_max + 12 * 10.0) / 10.0) * 10.0   # past them and the old pad
    g = cogfeed.Grid.from_bounds(3413, (x0, ym - 320, x0 + 320, ym + 320), 10.0)
    _mosaic_equals_alone(tmp_path, g, B, patch_size=32)


def test_footprint_of_a_scene_across_the_antimeridian(tmp_path):
    """A UTM 60N scene that crosses 180 degrees, read onto a geographic grid
    over 178..182 E: its outline's longitudes run 178.8 .. 180 and -180 ..
    -179.4, whose bounds would be most of the world but miss past 180; they
    are taken round the first point's (and the copy of the rectangle the
    grid meets): a footprint in the wrong copy would drop its pixels."""
    S = _flat(tmp_path, "S.tif", cogfeed.Grid(32660, (1000.0, 0, 700000.0, 0, -1000.0, 100000.0),
                                              200, 100), 2)
    for west in (170.0, -190.0):       # the scene's outline as it lies, and 360 degrees on
        g = cogfeed.Grid.from_bounds(4326, (west, 0.0, west + 12, 1.0), 0.01)
        _mosaic_equals_alone(tmp_path, g, S)


def _mosaic_equals_alone(tmp_path, g, S, patch_size=50):
    """Mosaics of S after and before a scene with no data on grid g are S
    read alone onto g."""
    A = _flat(tmp_path, "A.tif", g, 0)
    with cogfeed.open(S) as c:
        alone = c.read(grid=g, resampling="nearest")[0]
    assert (alone != 0).any() and not alone.all()
    for order in ([A, S], [S, A]):
        got = np.zeros_like(alone)
        with cogfeed.Loader([order], grid=g, mosaic=True, sampler="grid",
                            patch_size=patch_size, batch_size=4, resampling="nearest") as ld:
            for b in ld:
                for i, (_, x, y, w, h) in enumerate(b["windows"]):
                    got[y:y + h, x:x + w] = b["image"][i, 0][:h, :w]
        np.testing.assert_array_equal(got, alone, err_msg=str(order))

"""Time series of mosaics (issue 30): each date of a location is the
mosaic of that day's scenes (two overlapping tiles), clouds of each
tile's SCL-like class raster out, with a valid plane per date.

The reference is a by-hand GDAL mosaic per date: each tile's clouds set
to its nodata (its SCL warped onto the tile's grid by gdalwarp, nearest),
then gdalwarp of the masked tiles of the date, first on top, onto the
region's grid; a pixel is valid where that mosaic wrote data."""

import datetime as dt
import os
import sys

import numpy as np
import pytest

import cogfeed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import geo_fixtures as F  # noqa: E402

RES = 10.0
X0, Y1 = 500000.0, 4000000.0
W, H = 640, 400                      # the region, UTM 33N
CLASSES = [3, 8, 9]                  # shadow, cloud medium / high
NDATES = 12
# Tile A at the region's left, B over its right part (overlapping A by
# 180 px), as two MGRS tiles of one pass; (x0, y1, w, h) in pixels.
TILES = {"A": (0, 20, 380, 300), "B": (200, 0, 300, 360)}
MISSING = {("A", 3), ("B", 7), ("B", 10)}   # no acquisition that day
P = 128


def _date(d):
    return dt.datetime(2024, 3, 1, 10, 0, tzinfo=dt.timezone.utc) + dt.timedelta(days=5 * d)


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    """12 dates of the two tiles (a few missing), each with its class
    raster at 20 m, and the by-hand GDAL mosaic of every date."""
    d = tmp_path_factory.mktemp("series")
    rng = np.random.default_rng(30)
    region = cogfeed.Grid.from_bounds(32633, (X0, Y1 - H * RES, X0 + W * RES, Y1), RES)
    dates, scenes, scls, ref, ref_valid = [], [], [], [], []
    for t in range(NDATES):
        day, day_scl, masked = [], [], []
        for name, (px, py, w, h) in TILES.items():
            if (name, t) in MISSING:
                continue
            a = rng.integers(1, 4000, size=(2, h, w), dtype=np.uint16)
            a[:, :rng.integers(10, 60), :] = 0            # a nodata edge
            gt = (X0 + px * RES, RES, 0, Y1 - py * RES, 0, -RES)
            img = F.write_cog(str(d / ("%s_%02d.tif" % (name, t))), a, gt, nodata=0,
                              blocksize=128)
            c = np.full((1, h // 2, w // 2), 4, np.uint8)
            yy, xx = np.ogrid[:h // 2, :w // 2]
            for _ in range(rng.integers(0, 6)):
                cy, cx, r = rng.integers(0, h // 2), rng.integers(0, w // 2), rng.integers(5, 40)
                c[0][(yy - cy) ** 2 + (xx - cx) ** 2 < r * r] = rng.choice([8, 9])
            if t % 4 == 1:
                c[0, 20:35, :] = 3
            scl = F.write_cog(str(d / ("%s_%02d_scl.tif" % (name, t))), c,
                              (gt[0], 2 * RES, 0, gt[3], 0, -2 * RES), nodata=None,
                              blocksize=64)
            # By hand: the tile's clouds to its nodata, on its own grid.
            tile = cogfeed.Grid.from_bounds(32633, (gt[0], gt[3] - h * RES,
                                                    gt[0] + w * RES, gt[3]), RES)
            cls = F.gdalwarp(scl, str(d / "cls.tif"), tile, "near", extra=("-et", "0"))[0]
            m = a.copy()
            m[:, np.isin(cls, CLASSES)] = 0
            masked.append(F.write_cog(str(d / ("%s_%02d_masked.tif" % (name, t))), m, gt,
                                      nodata=0, blocksize=128))
            day.append(img)
            day_scl.append(scl)
        dates.append(_date(t))
        scenes.append(day)
        scls.append(day_scl)
        b = region.bounds
        F.run(["gdalwarp", "-q", "-overwrite", "-of", "GTiff", "-r", "near", "-et", "0",
               "-t_srs", "EPSG:32633", "-te"] + [repr(v) for v in b] +
              ["-tr", repr(RES), repr(RES), "-dstnodata", "0"] + list(reversed(masked)) +
              [str(d / "mosaic.tif")])
        with cogfeed.open(str(d / "mosaic.tif")) as cog:
            mos = cog.read()
        # patches past the region's edge: nothing there
        Hp, Wp = -(-H // P) * P, -(-W // P) * P
        full = np.zeros((2, Hp, Wp), np.uint16)
        full[:, :H, :W] = mos
        ref.append(full)
        ref_valid.append((full != 0).all(axis=0))
    return {"dates": dates, "scenes": scenes, "scls": scls, "region": region,
            "ref": ref, "valid": ref_valid}


def _check(b, i, series, steps, ok=None):
    """Sample i of batch b against the GDAL mosaic of each of its dates
    (steps: the date index of each step, None for padding)."""
    _, x, y, w, h = b["windows"][i]
    for k, t in enumerate(steps):
        v = b["valid"][i, k]
        if t is None:
            assert not v.any() and not b["image"][i, k].any()
            continue
        exp_v = series["valid"][t][y:y + h, x:x + w]
        np.testing.assert_array_equal(v, exp_v, err_msg="date %d, window %s"
                                      % (t, b["windows"][i]))
        exp = series["ref"][t][:, y:y + h, x:x + w]
        np.testing.assert_array_equal(b["image"][i, k][:, exp_v], exp[:, exp_v])


def test_validity_per_date_equals_gdal_mosaics(series):
    """The 12-date series over two overlapping tiles with clouds: every
    date's validity and pixels equal the by-hand GDAL mosaic of that
    date; dates of one tile are series steps too."""
    with cogfeed.Loader([series["scenes"]], scene_masks=[series["scls"]],
                        invalid_classes=CLASSES, dates=[series["dates"]],
                        grid=series["region"], sampler="grid", patch_size=P, batch_size=4,
                        resampling="nearest", error_threshold=0, valid_mask=True) as ld:
        assert ld.layout["time_steps"] == NDATES
        n, differ, cloudy = 0, 0, 0
        for b in ld:
            assert b["image"].shape[1:] == (NDATES, 2, P, P)
            assert b["valid"].shape == (len(b["windows"]), NDATES, P, P)
            for i in range(len(b["windows"])):
                _check(b, i, series, range(NDATES))
                assert list(b["dates"][i]) == [np.datetime64(d.replace(tzinfo=None), "s")
                                               for d in series["dates"]]
                differ += int((b["valid"][i] != b["valid"][i, :1]).any())
                n += 1
    assert n == 20 and differ > 0
    # the clouds mattered: a plain mosaic would call those pixels valid
    for t in range(NDATES):
        cloudy += int(series["valid"][t].sum())
    assert cloudy < NDATES * 0.95 * (W * H)


def test_drawn_and_padded_series_of_mosaics(series):
    """time_steps below and above 12: dates drawn (each step still the
    mosaic of its own date, scene masks along) and padding (zero, not
    valid, date NaT)."""
    order = {np.datetime64(d.replace(tzinfo=None), "s"): t
             for t, d in enumerate(series["dates"])}
    for T in (5, 16):
        seen = set()
        with cogfeed.Loader([series["scenes"]], scene_masks=[series["scls"]],
                            invalid_classes=CLASSES, dates=[series["dates"]], time_steps=T,
                            grid=series["region"], sampler="grid", patch_size=P,
                            batch_size=8, resampling="nearest", error_threshold=0,
                            valid_mask=True, seed=3) as ld:
            for b in ld:
                assert b["valid"].shape[1] == T
                for i in range(len(b["windows"])):
                    steps = [None if np.isnat(d) else order[d] for d in b["dates"][i]]
                    assert [s is not None for s in steps] == list(b["date_valid"][i])
                    _check(b, i, series, steps)
                    seen.update(s for s in steps if s is not None)
        assert seen == set(range(NDATES))


def test_series_of_mosaics_shapes_checked(series):
    """Scene masks shaped otherwise than the images, an empty date: clear
    errors."""
    bad = [list(s) for s in series["scls"]]
    bad[0] = bad[0][:1] if len(bad[0]) > 1 else bad[0] + bad[0]
    with pytest.raises(ValueError, match="scene_masks: shape them as the images"):
        cogfeed.Loader([series["scenes"]], scene_masks=[bad], invalid_classes=CLASSES,
                       valid_mask=True, grid=series["region"])
    with pytest.raises(ValueError, match="date 1 has no scenes"):
        cogfeed.Loader([[series["scenes"][0], []]], grid=series["region"])


def test_one_date_keeps_its_axis(series):
    """A series of one date of two tiles: (B, 1, C, H, W), valid (B, 1,
    H, W), the mosaic of that date."""
    with cogfeed.Loader([[series["scenes"][0]]], scene_masks=[[series["scls"][0]]],
                        invalid_classes=CLASSES, grid=series["region"], sampler="grid",
                        patch_size=P, batch_size=4, resampling="nearest",
                        error_threshold=0, valid_mask=True) as ld:
        b = next(iter(ld))
        assert b["image"].shape[1:3] == (1, 2) and b["valid"].shape[1] == 1
        for i in range(len(b["windows"])):
            _check(b, i, series, [0])


def _stac_item(iid, href, scl, when):
    """A STAC item of a tile's scene with its class raster as asset 'scl'
    (grids from the headers: no projection fields)."""
    return {"type": "Feature", "stac_version": "1.1.0", "id": iid,
            "geometry": {"type": "Polygon", "coordinates": [[[15, 36], [15.1, 36], [15.1, 36.1],
                                                              [15, 36.1], [15, 36]]]},
            "bbox": [15, 36, 15.1, 36.1], "properties": {"datetime": when},
            "links": [], "assets": {"visual": {"href": href, "type": "image/tiff"},
                                    "scl": {"href": scl, "type": "image/tiff"}}}


def test_stac_items_into_a_series_of_mosaics(series, tmp_path):
    """Selection.series(groupby="solar_day"): the tiles of one pass make
    one date (a list of hrefs, the selection's order), dates in time
    order; the Loader reads them as the by-hand mosaics."""
    import json
    feats = []
    for t in reversed(range(NDATES)):           # given out of date order
        day = list(enumerate(zip(series["scenes"][t], series["scls"][t])))
        for k, (href, scl) in reversed(day):
            when = series["dates"][t] + dt.timedelta(seconds=7 * k)   # one pass
            feats.append(_stac_item("%02d-%d" % (t, k), href, scl,
                                    when.strftime("%Y-%m-%dT%H:%M:%SZ")))
    path = str(tmp_path / "search.json")
    with open(path, "w") as f:
        json.dump({"type": "FeatureCollection", "features": feats}, f)
    items = cogfeed.stac.items(path)
    # the tiles of a date in the order of the selection: B before A here
    hrefs, dates = items.select(["visual"]).series(groupby="solar_day")
    scl, _ = items.select(["scl"]).series(groupby="solar_day")
    assert len(hrefs) == 1 and len(hrefs[0]) == NDATES
    assert hrefs[0] == [list(reversed(d)) for d in series["scenes"]]
    assert dates[0] == series["dates"]
    # the same order as the fixture's (A first), sorted by a key
    items = items.sorted(lambda it: it.id)
    hrefs, dates = items.select(["visual"]).series(groupby="solar_day")
    scl, _ = items.select(["scl"]).series(groupby="solar_day")
    assert hrefs[0] == series["scenes"] and scl[0] == series["scls"]
    with cogfeed.Loader(hrefs, dates=dates, scene_masks=scl, invalid_classes=CLASSES,
                        grid=series["region"], sampler="grid", patch_size=P, batch_size=4,
                        resampling="nearest", error_threshold=0, valid_mask=True) as ld:
        b = next(iter(ld))
        for i in range(len(b["windows"])):
            _check(b, i, series, range(NDATES))
    # a key of one's own: one date per item id's first part
    h2, _ = items.select(["visual"]).series(groupby=lambda it: it.id.split("-")[0])
    assert h2 == hrefs
    # grouped by grid (the default): a series per tile
    per_tile, _ = items.select(["visual"]).series()
    assert sorted(len(s) for s in per_tile) == [NDATES - 2, NDATES - 1]
    bad = dict(feats[0], properties={})
    with open(path, "w") as f:
        json.dump({"type": "FeatureCollection", "features": [bad]}, f)
    with pytest.raises((ValueError, cogfeed.stac.StacError), match="datetime"):
        cogfeed.stac.items(path).select(["visual"]).series(groupby="solar_day")


@pytest.fixture(scope="module")
def sar(series, tmp_path_factory):
    """A second collection (SAR-like: one float32 band, whole region, in
    the next UTM zone west): a scene 1 day after each even date and 3 days
    after each odd one, and the GDAL warp of each onto the region."""
    d = tmp_path_factory.mktemp("sar")
    rng = np.random.default_rng(31)
    paths, dates, on_region = [], [], []
    region = series["region"]
    for t in range(NDATES):
        a = rng.normal(-12, 3, size=(1, H + 40, W + 40)).astype(np.float32)
        a[:, :, :30] = np.nan                                   # its own edge
        gt = (X0 - 20 * RES, RES, 0, Y1 + 20 * RES, 0, -RES)
        src = F.write_cog(str(d / ("s33_%02d.tif" % t)), a, gt, nodata=float("nan"),
                          blocksize=128)
        w32 = str(d / ("s32_%02d.tif" % t))
        F.run(["gdalwarp", "-q", "-t_srs", "EPSG:32632", "-tr", "12", "12", "-r", "near",
               src, w32])
        p = str(d / ("sar_%02d.tif" % t))
        F.run(["gdal_translate", "-q", "-of", "COG", "-co", "BLOCKSIZE=128", w32, p])
        paths.append(p)
        dates.append(series["dates"][t] + dt.timedelta(days=1 if t % 2 == 0 else 3))
        r = F.gdalwarp(p, str(d / "r.tif"), region, "near", extra=("-et", "0"))[0]
        full = np.full((-(-H // P) * P, -(-W // P) * P), np.nan, np.float32)
        full[:H, :W] = r
        on_region.append(full)
    return {"paths": paths, "dates": dates, "ref": on_region}


def test_two_collections_matched_by_date(series, sar):
    """series.match: each optical date takes the SAR scene nearest in time
    within 2 days (6 of 12 dates have one; the rest are left out), read as
    that date's layer onto the region from its own CRS: the image channels
    are the optical mosaic, the layer channel GDAL's warp of the matched
    scene, and each date's validity both."""
    m = cogfeed.series.match([series["scenes"]], [series["dates"]],
                             ([sar["paths"]], [sar["dates"]]),
                             tolerance=dt.timedelta(days=2), scene_masks=[series["scls"]])
    assert m.kept == [list(range(0, NDATES, 2))]
    assert m.layers[0] == [[sar["paths"][t]] for t in range(0, NDATES, 2)]
    assert [x[0] for x in m.layer_dates[0]] == [
        np.datetime64(sar["dates"][t].replace(tzinfo=None), "s") for t in range(0, NDATES, 2)]
    steps = m.kept[0]
    with cogfeed.Loader(m.images, dates=m.dates, date_layers=m.layers,
                        scene_masks=m.scene_masks, invalid_classes=CLASSES,
                        grid=series["region"], sampler="grid", patch_size=P, batch_size=4,
                        resampling="nearest", error_threshold=0, valid_mask=True,
                        dtype="float32", scale_offset=False) as ld:
        assert ld.layout["channels"] == 3 and ld.layout["time_steps"] == len(steps)
        n = 0
        for b in ld:
            for i in range(len(b["windows"])):
                _, x, y, w, h = b["windows"][i]
                for k, t in enumerate(steps):
                    opt_v = series["valid"][t][y:y + h, x:x + w]
                    lay = sar["ref"][t][y:y + h, x:x + w]
                    lay_v = ~np.isnan(lay)
                    np.testing.assert_array_equal(b["valid"][i, k], opt_v & lay_v,
                                                  err_msg="date %d" % t)
                    np.testing.assert_array_equal(b["image"][i, k, 2][lay_v], lay[lay_v])
                    exp = series["ref"][t][:, y:y + h, x:x + w].astype(np.float32)
                    np.testing.assert_array_equal(b["image"][i, k, :2][:, opt_v],
                                                  exp[:, opt_v])
                n += 1
    assert n == 20
    # without a tolerance every date has a nearest scene; missing="error"
    m2 = cogfeed.series.match([series["scenes"]], [series["dates"]],
                              ([sar["paths"]], [sar["dates"]]))
    assert m2.kept == [list(range(NDATES))]
    assert m2.layers[0][1] == [sar["paths"][1]]           # 3 days off, the nearest
    with pytest.raises(ValueError, match="date 2024-03-06.*no scene of collection 1"):
        cogfeed.series.match([series["scenes"]], [series["dates"]],
                             ([sar["paths"]], [sar["dates"]]),
                             tolerance=dt.timedelta(days=2), missing="error")
    with pytest.raises(ValueError, match="layers and date_layers"):
        cogfeed.Loader(m.images, date_layers=m.layers, layers=[[sar["paths"][0]]])
    with pytest.raises(ValueError, match="date_layers: one entry per date"):
        cogfeed.Loader(m.images, date_layers=[m.layers[0][:-1]])
    with pytest.raises(ValueError, match="date_layers: for time series"):
        cogfeed.Loader(series["scenes"][0], date_layers=[[sar["paths"][0]]])


def test_later_scenes_of_all_dates_read_together(series):
    """A date's second tile is read only where its first left pixels
    without data, and the second tiles of different dates go out in one
    round of requests: a sample of 12 dates of two tiles waits for at most
    2 rounds (its first tiles with their class rasters, then the second
    tiles with theirs), not one per date."""
    with cogfeed.Loader([series["scenes"]], scene_masks=[series["scls"]],
                        invalid_classes=CLASSES, dates=[series["dates"]],
                        grid=series["region"], sampler="grid", patch_size=P, batch_size=4,
                        resampling="nearest", error_threshold=0, valid_mask=True,
                        cache_bytes=0) as ld:
        n = sum(len(b["windows"]) for b in ld)
        st = ld.stats()
    assert n == 20
    # (the readers go on into the next epoch: counted per sample read)
    # every sample: its first round; those in the overlap one more
    k = st["samples_read"]
    assert k >= n and k < st["read_rounds"] <= 2 * k, st


def test_a_padded_date_does_not_read_its_scene_again(series):
    """A date of one scene padded beside dates of two (or a scene given
    twice) is read once: its repeat would fill nothing, so it is skipped
    even where the scene leaves pixels without data (its nodata edge)."""
    per_sample = []
    for date in ([series["scenes"][0][0]], [series["scenes"][0][0]] * 2):
        with cogfeed.Loader([[date]], grid=series["region"], sampler="grid",
                            patch_size=P, batch_size=4, resampling="nearest",
                            error_threshold=0, valid_mask=True, cache_bytes=0) as ld:
            n = sum(len(b["windows"]) for b in ld)
            st = ld.stats()
        assert n == 20
        per_sample.append(st["bytes_decoded"] / st["samples_read"])
    assert per_sample[0] == per_sample[1]
    # a series made of a string instead of a list of dates: a clear error
    with pytest.raises(ValueError, match="series 0 is .* not a list of dates"):
        cogfeed.Loader([series["scenes"]], scene_masks=["m.tif"], invalid_classes=CLASSES,
                       valid_mask=True, grid=series["region"])

"""Time series in the Loader (python/cogfeed/series.py): series of any
length made into samples of T dates (padded with a per-date validity
flag, or dealt into T-date draws from the seed), dates in every batch
(given, from file names, from TIFFTAG_DATETIME, from STAC), T = 1 keeping
its axis, resume and DDP sharding exact."""

import datetime as dt
import json
import os

import numpy as np
import pytest

import cogfeed
from cogfeed import series as cf_series

GT = (500000.0, 10.0, 0.0, 4000000.0, 0.0, -10.0)


def _scene(d, name, value, gt=GT, size=128):
    g = cogfeed.Grid("EPSG:32633", geotransform=gt, width=size, height=size)
    p = os.path.join(d, name)
    cogfeed.write(p, np.full((2, size, size), value, np.uint8), grid=g, tile_size=64)
    return p


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """Three locations with 2, 5 and 3 monthly scenes; every pixel of a
    scene holds its month (1..12) + 20 * location."""
    d = str(tmp_path_factory.mktemp("series"))
    out = []
    for loc, months in enumerate(([1, 2], [1, 2, 3, 4, 5], [3, 6, 9])):
        gt = (GT[0] + loc * 2000, GT[1], 0, GT[3], 0, GT[5])
        out.append([_scene(d, "L%d_2024%02d15.tif" % (loc, m), m + 20 * loc, gt)
                    for m in months])
    return out


def _month(v):
    return (np.asarray(v).astype("datetime64[M]").astype(int) % 12) + 1


def _check_batch(b, T):
    img = b["image"]
    assert img.ndim == 5 and img.shape[1] == T
    for k in range(img.shape[0]):
        loc = b["series"][k]
        for t in range(T):
            if b["date_valid"][k, t]:
                m = _month(b["dates"][k, t])
                assert (img[k, t] == m + 20 * loc).all()
            else:
                assert np.isnat(b["dates"][k, t]) and (img[k, t] == 0).all()


PATTERN = dict(date_pattern=r"_(?P<date>\d{8})", date_format="%Y%m%d")


def test_ragged_series_padded_and_drawn(scenes):
    T = 3
    seen = {}
    with cogfeed.Loader(scenes, time_steps=T, patch_size=64, batch_size=4,
                        sampler="grid", **PATTERN) as ld:
        for b in ld:
            _check_batch(b, T)
            for k in range(len(b["windows"])):
                loc = b["series"][k]
                ds = b["dates"][k][b["date_valid"][k]]
                assert list(ds) == sorted(ds) and len(set(ds)) == len(ds)
                seen.setdefault(loc, set()).update(_month(ds).tolist())
                if loc == 0:  # 2 dates padded to 3
                    assert list(b["date_valid"][k]) == [True, True, False]
                else:
                    assert b["date_valid"][k].all()
    # every date of every series is read in an epoch
    assert seen == {0: {1, 2}, 1: {1, 2, 3, 4, 5}, 2: {3, 6, 9}}


def test_draws_are_seeded(scenes):
    def draws(seed):
        with cogfeed.Loader(scenes, time_steps=2, patch_size=64, batch_size=4,
                            sampler="grid", seed=seed, **PATTERN) as ld:
            return sorted({(b["series"][k], tuple(_month(b["dates"][k])))
                           for b in ld for k in range(len(b["windows"]))})
    a, b2 = draws(1), draws(1)
    assert a == b2
    assert any(draws(s) != a for s in (2, 3, 4))
    # location 1 (5 dates, T 2): 3 draws of 2 distinct dates covering all 5
    loc1 = [d for s, d in a if s == 1]
    assert len(loc1) == 3 and set(m for d in loc1 for m in d) == {1, 2, 3, 4, 5}


def test_one_date_keeps_its_axis_and_given_dates(scenes):
    one = [[s[0]] for s in scenes]
    dates = [[dt.datetime(2024, 1, 15, tzinfo=dt.timezone.utc)],
             ["2024-01-15T00:00:00Z"], [np.datetime64("2024-03-15")]]
    with cogfeed.Loader(one, dates=dates, patch_size=64, batch_size=2,
                        sampler="grid") as ld:
        b = next(iter(ld))
        assert b["image"].shape == (2, 1, 2, 64, 64)
        assert b["dates"].shape == (2, 1) and b["date_valid"].all()
        f = b["windows"][0][0]
        assert b["dates"][0, 0] == np.datetime64(["2024-01-15", "2024-01-15",
                                                  "2024-03-15"][f], "s")


def test_dates_from_tiff_tags(tmp_path):
    import rasterio
    from rasterio.transform import Affine
    paths = []
    for m in (4, 2):
        p = str(tmp_path / ("t%d.tif" % m))
        with rasterio.open(p, "w", driver="GTiff", width=64, height=64, count=1,
                           dtype="uint8", crs="EPSG:32633",
                           transform=Affine(10, 0, 500000, 0, -10, 4000000)) as ds:
            ds.write(np.full((1, 64, 64), m, np.uint8))
            ds.update_tags(TIFFTAG_DATETIME="2024:%02d:01 12:30:00" % m)
        paths.append(p)
    with cogfeed.Loader([paths], dates="tiff", time_steps=2, patch_size=64,
                        batch_size=1) as ld:
        b = next(iter(ld))
        # date order, not the given order
        assert list(b["dates"][0]) == [np.datetime64("2024-02-01T12:30:00"),
                                       np.datetime64("2024-04-01T12:30:00")]
        assert b["image"][0, 0, 0, 0, 0] == 2 and b["image"][0, 1, 0, 0, 0] == 4
    with pytest.raises(ValueError, match="no TIFFTAG_DATETIME"):
        cogfeed.Loader([[_scene(str(tmp_path), "x.tif", 1)]], dates="tiff")


def test_refusals(scenes):
    with pytest.raises(ValueError, match="different lengths.*time_steps"):
        cogfeed.Loader(scenes)
    with pytest.raises(ValueError, match="date_pattern .* does not match"):
        cogfeed.Loader(scenes, time_steps=2, date_pattern=r"(?P<date>\d{12})")
    with pytest.raises(ValueError, match="does not match date_format"):
        cogfeed.Loader(scenes, time_steps=2, date_pattern=r"_(?P<date>\d{8})",
                       date_format="%d%m%Y")
    with pytest.raises(ValueError, match="one date per scene"):
        cogfeed.Loader(scenes, time_steps=2, dates=[["2024-01-01"]])
    with pytest.raises(ValueError, match="not with mosaic"):
        cogfeed.Loader(scenes, time_steps=2, mosaic=True)
    with pytest.raises(ValueError, match="must be time series"):
        cogfeed.Loader(scenes[0], time_steps=2)


def test_resume_is_exact(scenes):
    kw = dict(time_steps=2, patch_size=64, batch_size=2, sampler="random",
              epoch_length=12, seed=5, **PATTERN)
    with cogfeed.Loader(scenes, **kw) as ld:
        it = iter(ld)
        next(it)
        next(it)
        state = ld.state_dict()
        want = []
        for _ in range(3):  # (arrays view the ring until the next batch)
            b = next(it)
            want.append((b["windows"], b["dates"].copy(), b["image"].copy()))
    with cogfeed.Loader(scenes, **kw) as ld:
        ld.load_state_dict(state)
        it = iter(ld)
        for w, d, img in want:
            b = next(it)
            assert b["windows"] == w and np.array_equal(b["dates"], d)
            assert np.array_equal(b["image"], img)


def test_ddp_shards_disjoint_and_complete(scenes):
    def samples(rank, world):
        with cogfeed.Loader(scenes, time_steps=2, patch_size=64, batch_size=1,
                            sampler="grid", rank=rank, world_size=world,
                            drop_last=False, **PATTERN) as ld:
            return [(b["series"][0], tuple(b["windows"][0][1:3]),
                     tuple(_month(b["dates"][0]))) for b in ld]
    whole = samples(0, 1)
    r0, r1 = samples(0, 2), samples(1, 2)
    assert not set(r0) & set(r1)
    assert sorted(r0 + r1) == sorted(whole)


def test_plan_weights_keep_locations_equal():
    d = [[np.datetime64("2024-01-%02d" % (i + 1), "s") for i in range(n)] for n in (1, 7)]
    paths = [["a%d" % i for i in range(1)], ["b%d" % i for i in range(7)]]
    picks, dates, ok, owner, w = cf_series.plan(paths, d, 3, seed=0)
    assert owner == [0, 1, 1, 1]
    assert w[0] == 1.0 and abs(sum(w[1:]) - 1.0) < 1e-12
    assert picks[0] == [0, 0, 0] and list(ok[0]) == [True, False, False]


def _item(iid, href, gt, when):
    x0, y0 = gt[0], gt[3]
    poly = [[x0, y0], [x0 + 1280, y0], [x0 + 1280, y0 - 1280], [x0, y0 - 1280], [x0, y0]]
    return {"type": "Feature", "stac_version": "1.1.0", "id": iid,
            "stac_extensions": ["https://stac-extensions.github.io/projection/v2.0.0/schema.json"],
            "geometry": {"type": "Polygon", "coordinates": [poly]}, "bbox": [0, 0, 1, 1],
            "properties": {"datetime": when, "proj:code": "EPSG:32633",
                           "proj:transform": [gt[1], 0, gt[0], 0, gt[5], gt[3]],
                           "proj:shape": [128, 128]},
            "links": [], "assets": {"data": {"href": href, "type": "image/tiff"}}}


def test_stac_items_grouped_into_series(scenes, tmp_path):
    feats = []
    for loc, s in enumerate(scenes):
        gt = (GT[0] + loc * 2000, GT[1], 0, GT[3], 0, GT[5])
        for p in reversed(s):  # given out of date order
            m = int(os.path.basename(p)[7:9])
            feats.append(_item("%d-%d" % (loc, m), p, gt, "2024-%02d-15T10:00:00Z" % m))
    path = str(tmp_path / "search.json")
    with open(path, "w") as f:
        json.dump({"type": "FeatureCollection", "features": feats}, f)
    hrefs, dates = cogfeed.stac.items(path).select(["data"]).series()
    assert sorted(len(h) for h in hrefs) == [2, 3, 5]
    for h, d in zip(hrefs, dates):
        assert d == sorted(d)
        assert [os.path.basename(x) for x in h] == sorted(os.path.basename(x) for x in h)
    with cogfeed.Loader(hrefs, dates=dates, time_steps=3, patch_size=64,
                        batch_size=4, sampler="grid") as ld:
        b = next(iter(ld))
        for k in range(4):
            for t in range(3):
                if b["date_valid"][k, t]:
                    m = _month(b["dates"][k, t])
                    assert (b["image"][k, t] % 20 == m).all()


def test_cog_dataset_carries_dates(scenes):
    torch = pytest.importorskip("torch")
    from cogfeed.torch import CogDataset
    ds = CogDataset(scenes, time_steps=3, patch_size=64, batch_size=4,
                    sampler="grid", **PATTERN)
    b = next(iter(torch.utils.data.DataLoader(ds, batch_size=None)))
    assert b["image"].shape == (4, 3, 2, 64, 64)
    assert b["date_valid"].dtype == torch.bool and b["dates"].shape == (4, 3)
    assert b["dates"].dtype == torch.int64
    ok = b["date_valid"]
    assert (b["dates"][ok] > 1.7e9).all() and (b["dates"][~ok] == -2**63).all()
    assert len(b["series"]) == 4


def test_date_strings_with_offsets_are_utc():
    """An offset moves the instant: "+02:00" was cut off (10:00 stayed
    10:00) and "-05:00" left to numpy (a warning)."""
    import warnings
    from cogfeed import series
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = [series._to_dt64(v, "t") for v in (
            "2024-01-15T10:00:00+02:00", "2024-01-15T10:00:00-05:00",
            "2024-01-15T10:00:00.123456789Z", "2024-01-15T10:00:00", "2024-01-15",
            "2024:01:15 10:00:00")]
    assert [str(g) for g in got] == [
        "2024-01-15T08:00:00", "2024-01-15T15:00:00", "2024-01-15T10:00:00",
        "2024-01-15T10:00:00", "2024-01-15T00:00:00", "2024-01-15T10:00:00"]
    with pytest.raises(ValueError, match="not a date"):
        series._to_dt64("2024-01-15T25:00:00Z", "t")


def test_time_of_interest_keeps_dates_inside(scenes, tmp_path):
    """toi= keeps each series' dates inside the time of interest; a series
    left without one is left out with its mask (each location's mask
    holds its number); a STAC selection keeps the items inside it."""
    masks = []
    for loc in range(3):
        p = str(tmp_path / ("m%d.tif" % loc))
        gt = (GT[0] + loc * 2000, GT[1], 0, GT[3], 0, GT[5])
        cogfeed.write(p, np.full((1, 128, 128), 100 + loc, np.uint8),
                      grid=cogfeed.Grid("EPSG:32633", geotransform=gt, width=128, height=128),
                      tile_size=64)
        masks.append(p)
    seen = {}
    # March to May: location 0 (Jan, Feb) has none; 1 keeps 3, 4, 5; 2 keeps 3.
    with cogfeed.Loader(scenes, masks=masks, time_steps=3, patch_size=64, batch_size=4,
                        sampler="grid", toi="2024-03-01/2024-05-31", **PATTERN) as ld:
        assert len(ld) == 2   # 4 patches each of 2 locations, in batches of 4
        for b in ld:
            _check_batch(b, 3)
            for k in range(len(b["windows"])):
                loc = b["series"][k]
                assert (b["mask"][k] == 100 + loc).all()
                seen.setdefault(loc, set()).update(
                    _month(b["dates"][k][b["date_valid"][k]]).tolist())
    assert seen == {1: {3, 4, 5}, 2: {3}}
    # Without time_steps the kept series must agree in length.
    with pytest.raises(ValueError, match="keep 1 to 3 dates: give time_steps"):
        cogfeed.Loader(scenes, patch_size=64, toi="2024-03-01/2024-05-31", **PATTERN)
    with cogfeed.Loader([s[:1] for s in scenes], patch_size=64, batch_size=4,
                        sampler="grid", toi=("2024-01-01", "2024-01-31"), **PATTERN) as ld:
        assert {loc for b in ld for loc in b["series"]} == {0, 1}
    with pytest.raises(ValueError, match="no date of any series is inside it"):
        cogfeed.Loader(scenes, patch_size=64, toi="2025-01-01/..", **PATTERN)
    with pytest.raises(ValueError, match="toi: the series need dates"):
        cogfeed.Loader(scenes, patch_size=64, time_steps=2, toi="2024-03-01/..")
    with pytest.raises(ValueError, match="toi: needs dates"):
        cogfeed.Loader([s[0] for s in scenes], patch_size=64, toi="2024-03-01/..")
    # A STAC selection: the items meeting the time of interest.
    from cogfeed import stac
    flat = [(loc, p) for loc, s in enumerate(scenes) for p in s]
    items = stac.items([_item("i%d" % k, p, (GT[0] + loc * 2000, GT[1], 0, GT[3], 0, GT[5]),
                              "2024-%02d-15T10:00:00Z" % _month_of(p))
                        for k, (loc, p) in enumerate(flat)])
    sel = items.select(["data"])
    with cogfeed.Loader(sel, patch_size=64, batch_size=64, sampler="grid",
                        toi="2024-04-01/2024-06-30") as ld:
        files = sorted({w[0] for b in ld for w in b["windows"]})
    kept = [p for _, p in flat if 4 <= _month_of(p) <= 6]
    assert len(files) == len(kept) == 3
    assert [sel.within("2024-04-01/2024-06-30").images()[f] for f in files] == kept
    with pytest.raises(stac.StacError, match="no selected item is inside"):
        sel.within("2030-01-01/..")


def _month_of(path):
    return int(os.path.basename(path).split("_")[1][4:6])

"""Regions of interest (issue 27): Loader(roi=...) keeps every patch to a
bbox or polygons (with holes, in any CRS).  Which windows meet the region
is checked here by an independent test (sampled points of the window and
of the polygon's edges), and the grid's kept windows against the full
epoch: every pixel of the region in some kept window, nothing kept that
misses it."""

import os
import sys

import numpy as np
import pytest

import cogfeed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import geo_fixtures as F  # noqa: E402

RES, X0, Y1 = 10.0, 500000.0, 4000000.0
W, H, P = 1000, 800, 64


@pytest.fixture(scope="module")
def img(tmp_path_factory):
    d = tmp_path_factory.mktemp("roi")
    a = np.random.default_rng(4).integers(1, 999, (1, H, W), dtype=np.uint16)
    return F.write_cog(str(d / "img.tif"), a, (X0, RES, 0, Y1, 0, -RES), blocksize=128)


def to_px(x, y):
    return (x - X0) / RES, (Y1 - y) / RES


def inside(rings, px, py):
    """Even-odd over every ring (pixel coordinates)."""
    c = False
    for r in rings:
        n = len(r)
        for i in range(n):
            (xi, yi), (xj, yj) = r[i], r[i - 1]
            if (yi > py) != (yj > py) and px < (xj - xi) * (py - yi) / (yj - yi) + xi:
                c = not c
    return c


def meets(rings, x, y, w, h):
    """Whether window (x, y, w, h) shares area with the rings: a point of a
    fine lattice of the window inside, or a point of an edge inside the
    window (independent of roi.c's exact test; a hair's breadth apart from
    it, which the regions below avoid)."""
    for fy in np.linspace(0.01, 0.99, 25):
        for fx in np.linspace(0.01, 0.99, 25):
            if inside(rings, x + fx * w, y + fy * h):
                return True
    for r in rings:
        for i in range(len(r)):
            (ax, ay), (bx, by) = r[i - 1], r[i]
            for f in np.linspace(0, 1, 4000):
                px, py = ax + (bx - ax) * f, ay + (by - ay) * f
                if x < px < x + w and y < py < y + h:
                    return True
    return False


# A triangle with a square hole, in UTM 33N.
TRI = [(X0 + 1000, Y1 - 1000), (X0 + 8000, Y1 - 1500), (X0 + 3000, Y1 - 7000)]
HOLE = [(X0 + 2500, Y1 - 2200), (X0 + 4000, Y1 - 2200), (X0 + 4000, Y1 - 3700),
        (X0 + 2500, Y1 - 3700)]
GEOJSON = {"type": "Polygon", "coordinates": [TRI + [TRI[0]], HOLE + [HOLE[0]]]}


def px_rings():
    return [[to_px(*p) for p in TRI], [to_px(*p) for p in HOLE]]


def windows(ld):
    out = []
    it = iter(ld)
    for _ in range(len(ld)):
        out += [tuple(w) for w in next(it)["windows"]]
    return out


def test_grid_keeps_the_windows_that_meet_a_polygon_with_a_hole(img):
    rings = px_rings()
    with cogfeed.Loader(img, patch_size=P, batch_size=16, sampler="grid") as ld:
        every = windows(ld)
    with cogfeed.Loader(img, patch_size=P, batch_size=16, sampler="grid", roi=GEOJSON,
                        roi_crs=32633) as ld:
        kept = windows(ld)
        st = ld.stats()
    assert set(kept) <= set(every) and len(kept) + st["empty_left_out"] == len(every)
    for w in every:
        assert (w in kept) == meets(rings, *w[1:]), w
    # A window wholly inside the hole exists, and is left out.
    assert any(not meets(rings, *w[1:]) and inside([rings[0]], w[1] + 32, w[2] + 32)
               for w in every)
    # Every pixel of the region lies in a kept window.
    ys, xs = np.mgrid[0:H, 0:W]
    cover = np.zeros((H, W), bool)
    for _, x, y, w, h in kept:
        cover[y:y + h, x:x + w] = True
    for py in range(5, H, 37):
        for px in range(5, W, 37):
            if inside(rings, px + 0.5, py + 0.5):
                assert cover[py, px], (px, py)


def test_geojson_in_longitude_latitude(img):
    """GeoJSON dicts are longitude / latitude unless roi_crs says otherwise:
    the same triangle given in EPSG:4326 keeps windows that meet it."""
    warp = pytest.importorskip("rasterio.warp")
    lon, lat = warp.transform("EPSG:32633", "EPSG:4326", [p[0] for p in TRI],
                              [p[1] for p in TRI])
    tri = list(zip(lon, lat))
    geo = {"type": "Feature", "properties": {},
           "geometry": {"type": "Polygon", "coordinates": [tri + [tri[0]]]}}
    with cogfeed.Loader(img, patch_size=P, batch_size=16, sampler="grid", roi=geo) as ld:
        kept = windows(ld)
    rings = [[to_px(*p) for p in TRI]]
    for w in kept:
        assert meets(rings, w[1] - 1, w[2] - 1, w[3] + 2, w[4] + 2), w
    assert 10 < len(kept) < 150


def test_random_patches_meet_the_region(img):
    rings = px_rings()
    kw = dict(patch_size=P, batch_size=32, sampler="random", seed=5, epoch_length=256,
              roi=GEOJSON, roi_crs=32633)
    with cogfeed.Loader(img, **kw) as ld:
        got = windows(ld)
        first = [ld.window(j) for j in range(8)]
    assert len(got) == 256
    for w in got:
        assert meets(rings, *w[1:]), w
    with cogfeed.Loader(img, **kw) as ld:
        again = [ld.window(j) for j in range(8)]
    assert first == again


def test_bbox_far_from_the_origin(img):
    """A small bbox at the far corner: random draws there, not by redraws
    over the whole file."""
    bbox = (X0 + 9000, Y1 - 7900, X0 + 9600, Y1 - 7300)
    with cogfeed.Loader(img, patch_size=P, batch_size=32, sampler="random", epoch_length=128,
                        roi=bbox) as ld:
        got = windows(ld)
        st = ld.stats()
    x0, y0 = to_px(bbox[0], bbox[3])
    x1, y1 = to_px(bbox[2], bbox[1])
    for _, x, y, w, h in got:
        assert x < x1 and x0 < x + w and y < y1 and y0 < y + h
    assert st["empty_redrawn"] == 0


def test_a_region_that_misses_every_file_is_an_error(img):
    with pytest.raises(cogfeed.ArgumentError, match="meets none"):
        cogfeed.Loader(img, sampler="random", roi=(0, 0, 10, 10), roi_crs=32633)
    with pytest.raises(cogfeed.ArgumentError, match="no grid window"):
        cogfeed.Loader(img, sampler="grid", roi=(0, 0, 10, 10), roi_crs=32633)
    with pytest.raises(ValueError, match="Polygon"):
        cogfeed.Loader(img, roi={"type": "Point", "coordinates": [1, 2]})
    with pytest.raises(cogfeed.ArgumentError, match="tile-shuffle"):
        cogfeed.Loader(img, sampler="tile-shuffle", roi=GEOJSON, roi_crs=32633)


def test_random_meets_a_region_in_the_first_pixel_and_a_frame(img):
    """Review findings: a region within pixel (0, 0) (its box of origins
    is the single origin 0, 0) and a frame (a large hole: redraws may run
    out, then a window around the region's outline is taken)."""
    corner = (X0 + 2, Y1 - 8, X0 + 8, Y1 - 2)
    with cogfeed.Loader(img, patch_size=P, batch_size=64, sampler="random", epoch_length=64,
                        roi=corner, roi_crs=32633) as ld:
        for _, x, y, w, h in windows(ld):
            assert x == 0 and y == 0
    outer = [(X0, Y1), (X0 + W * RES, Y1), (X0 + W * RES, Y1 - H * RES), (X0, Y1 - H * RES)]
    inset = [(X0 + 50, Y1 - 50), (X0 + W * RES - 50, Y1 - 50),
             (X0 + W * RES - 50, Y1 - H * RES + 50), (X0 + 50, Y1 - H * RES + 50)]
    frame = {"type": "Polygon", "coordinates": [outer + [outer[0]], inset + [inset[0]]]}
    rings = [[to_px(*p) for p in outer], [to_px(*p) for p in inset]]
    with cogfeed.Loader(img, patch_size=P, batch_size=64, sampler="random", epoch_length=256,
                        roi=frame, roi_crs=32633, seed=1) as ld:
        got = windows(ld)
    for w in got:
        assert meets(rings, *w[1:]), w


def test_overlapping_parts_of_a_multipolygon_are_a_union(img):
    a = [(X0 + 1000, Y1 - 1000), (X0 + 3000, Y1 - 1000), (X0 + 3000, Y1 - 3000),
         (X0 + 1000, Y1 - 3000)]
    b = [(x + 1000, y - 1000) for x, y in a]
    mp = {"type": "MultiPolygon", "coordinates": [[a + [a[0]]], [b + [b[0]]]]}
    with cogfeed.Loader(img, patch_size=32, batch_size=64, sampler="grid", roi=mp,
                        roi_crs=32633) as ld:
        kept = {tuple(w[1:3]) for w in windows(ld)}
    # A window wholly in the overlap (pixels 200..300) is kept.
    assert (224, 224) in kept and (256, 256) in kept


@pytest.mark.parametrize("sampler", ["grid", "random"])
def test_shards_and_resume_with_a_region(img, sampler):
    """DDP shards of a region's epoch are disjoint and make the whole
    epoch; a loader resumed from state_dict continues with the same
    windows."""
    kw = dict(patch_size=P, batch_size=8, sampler=sampler, roi=GEOJSON, roi_crs=32633, seed=3,
              epoch_length=96 if sampler == "random" else None)
    with cogfeed.Loader(img, **kw) as ld:
        whole = [w for w in windows(ld)]
    parts = []
    for r in range(3):
        with cogfeed.Loader(img, rank=r, world_size=3, **kw) as ld:
            parts += windows(ld)
    # (Random windows are a function of the epoch's index, whatever the
    # rank that reads it.)
    assert sorted(parts) == sorted(whole) and len(parts) == len(whole)
    if sampler == "grid":
        assert len(set(parts)) == len(parts)
    with cogfeed.Loader(img, **kw) as ld:
        it = iter(ld)
        next(it), next(it)
        state = ld.state_dict()
        rest = [tuple(w) for w in next(it)["windows"]]
    with cogfeed.Loader(img, **kw) as ld:
        ld.load_state_dict(state)
        assert [tuple(w) for w in next(iter(ld))["windows"]] == rest

"""A Loader over STAC items places each file from its item's projection
and raster fields and reads the file's header only when a sample first
reads it (issue 27: "its first batch comes without reading a single
header when the projection extension is present"; docs/datasets.md,
"Grids without reading headers").  Over the test nginx, whose log counts
the requests: none while the Loader starts; none ever for a scene whose
footprint misses every patch; the batches equal those of the same Loader
given plain paths (every header read when it starts); a catalog that
disagrees with its file, or a href that is gone, fails the first batch
reading it, naming the item and asset."""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
pytest.importorskip("rasterio")  # the fixture's COG writer
import stac_fixture as fx  # noqa: E402
from servers import Nginx  # noqa: E402

import cogfeed  # noqa: E402
from cogfeed import stac  # noqa: E402

# s33-a and s33-b (UTM 33N, overlapping by half) and part of their
# neighbourhood; s34-a lies some 270 km east, in UTM 34N: its footprint
# misses every patch of this region.
REGION = cogfeed.Grid.from_bounds(32633, (500640, 4996800, 504480, 5000000), 10)
IDS = ("s33-b", "s33-a", "s34-a")


@pytest.fixture(scope="module")
def cat(tmp_path_factory):
    return fx.make(str(tmp_path_factory.mktemp("stac")))


@pytest.fixture(scope="module")
def srv(cat):
    with Nginx(cat["root"]) as s:
        yield s


def io_options():
    return {"max_retries": 0, "connect_timeout_s": 2, "request_timeout_s": 20}


def data_requests(srv):
    """GETs nginx saw for each scene's files, those with any."""
    seen = {}
    for sid in (s[0] for s in fx.SCENES):
        for band in ("B02", "B03", "B04", "B08", "landcover"):
            name = "%s_%s.tif" % (sid, band)
            n = srv.requests("/data/" + name)
            if n:
                seen[name] = n
    return seen


def selection(srv, ids=IDS, names=("red", "nir")):
    its = stac.items(srv.url("catalog.json"))
    by_id = {i.id: i for i in its}
    return its.filter(lambda i: i.id in ids).sorted(lambda i: ids.index(i.id)) \
        .select(list(names)), by_id


def batches(ld):
    return [(b["image"], b.get("valid"), b["windows"]) for b in ld]


def mosaic(images, **kw):
    return cogfeed.Loader(images, grid=REGION, mosaic=True, valid_mask=True, sampler="grid",
                          patch_size=96, batch_size=4, copy=True, io_options=io_options(),
                          **kw)


def test_hrefs_carry_their_description(srv):
    sel, _ = selection(srv)
    imgs = sel.images()
    assert [h.item_id for h in imgs] == list(IDS) and {h.key for h in imgs} == {"B04"}
    g, dt, n = imgs[1].description()
    assert (g.width, g.height, dt, n) == (fx.SIZE, fx.SIZE, "uint16", 1)
    assert g.geotransform == (500000.0, fx.PIXEL, 0.0, 5000000.0, 0.0, -fx.PIXEL)
    assert g.crs.epsg == 32633
    # The Selection of Item objects (not the C index) says the same.
    one = stac.Selection(sel.names, list(zip(sel.items, sel.assets)), None)
    assert [h.description()[0].geotransform for h in one.images()] == \
        [h.description()[0].geotransform for h in imgs]


def test_no_header_read_until_a_sample_reads_the_file(srv):
    sel, _ = selection(srv)
    srv.reset()
    ld = mosaic(sel)
    assert data_requests(srv) == {}, "the Loader read headers as it started"
    first = next(iter(ld))
    seen = data_requests(srv)
    assert seen, "the first batch read nothing"
    assert not any(k.startswith("s34-a") for k in seen), seen
    # The whole epoch: s34-a's footprint misses every patch, so its files
    # are never opened; the two scenes the region covers are.
    rest = batches(ld)
    seen = data_requests(srv)
    assert not any(k.startswith("s34-a") for k in seen), seen
    for sid in ("s33-a", "s33-b"):
        for band in ("B04", "B08"):
            assert seen.get("%s_%s.tif" % (sid, band), 0) >= 1, (sid, band, seen)
    ld.close()
    # The same mosaic from plain paths: every header is read as the Loader
    # starts, s34-a's too; and the same batches.
    srv.reset()
    plain = mosaic([[str(h) for h in sel.images()]],
                   layers=[[[str(r[0]) for r in sel.layers()]]])
    opened = data_requests(srv)
    assert all(opened.get("%s_%s.tif" % (s, b), 0) >= 1 for s in IDS for b in ("B04", "B08"))
    want = batches(plain)
    got = [(first["image"], first["valid"], first["windows"])] + rest
    assert len(got) == len(want) > 1
    for (gi, gv, gw), (wi, wv, ww) in zip(got, want):
        assert gw == ww
        np.testing.assert_array_equal(gi, wi)
        np.testing.assert_array_equal(gv, wv)
    assert any(v.any() for _, v, _ in want) and not all(v.all() for _, v, _ in want)


def test_each_item_its_own_sample_and_the_index_of_hrefs(srv, cat):
    """Without mosaic: one sample source per item, placed on the region
    from STAC alone; hrefs from the C index (sel.hrefs) as well."""
    sel, _ = selection(srv, ids=("s33-a", "s33-b"), names=("nir",))
    srv.reset()
    ld = cogfeed.Loader(sel.hrefs("nir"), grid=REGION, sampler="grid", patch_size=128,
                        batch_size=2, copy=True, io_options=io_options())
    assert data_requests(srv) == {}
    got = batches(ld)
    want = batches(cogfeed.Loader([cat["data"][i]["B08"] for i in ("s33-a", "s33-b")],
                                  grid=REGION, sampler="grid", patch_size=128, batch_size=2,
                                  copy=True))
    for (gi, _, gw), (wi, _, ww) in zip(got, want):
        assert gw == ww
        np.testing.assert_array_equal(gi, wi)


def edited_catalog(cat, tmp_path, edit):
    """s33-a as an item document whose hrefs point at the fixture's files,
    changed by edit(item dict)."""
    return fx.item_copy(cat, "s33-a", str(tmp_path / "edited.json"), edit)


@pytest.mark.parametrize("field,value,says", [
    ("proj:shape", [512, 512], "it is 256x256 pixels, described as 512x512"),
    ("proj:transform", [10.0, 0.0, 500010.0, 0.0, -10.0, 5000000.0], "its geotransform is"),
    ("proj:code", "EPSG:32634", "its CRS is"),
])
def test_a_catalog_that_disagrees_with_its_file_fails_naming_it(cat, tmp_path, field, value,
                                                                says):
    def edit(d):
        d["assets"]["B04"][field] = value
    sel = stac.items(edited_catalog(cat, tmp_path, edit)).select(["red"])
    ld = cogfeed.Loader(sel, grid=REGION, sampler="grid", patch_size=96, batch_size=2)
    with pytest.raises(cogfeed.FormatError) as ei:
        next(iter(ld))
    msg = str(ei.value)
    assert msg.startswith("item 's33-a', asset 'B04': ") and says in msg, msg
    assert "disagrees with its description" in msg and "s33-a_B04.tif" in msg
    # The catalog is wrong, not the file: given as a path, it reads.
    assert next(iter(cogfeed.Loader([str(h) for h in sel.images()], grid=REGION,
                                    sampler="grid", patch_size=96, batch_size=2)))


def test_a_wrong_dtype_fails_and_skip_errors_drops_its_samples(cat, tmp_path):
    def edit(d):
        d["assets"]["B04"]["bands"][0]["data_type"] = "float32"
    sel = stac.items(edited_catalog(cat, tmp_path, edit)).select(["red"])
    with pytest.raises(cogfeed.FormatError, match="reads as 1 bands of uint16, described as 1 "
                                                  "of float32"):
        next(iter(cogfeed.Loader(sel, grid=REGION, sampler="grid", patch_size=96,
                                 batch_size=2)))
    # Dropped and counted with skip_errors (not a failure of the run).
    ld = cogfeed.Loader(sel, grid=REGION, sampler="grid", patch_size=96, batch_size=2,
                        skip_errors=True, skip_limit=1.0)
    got = batches(ld)
    assert got and all(len(w) == 0 for _, _, w in got)
    assert ld.stats()["skipped"] == 16   # every sample of the epoch


@pytest.mark.parametrize("name", ["gone.tif", "d" * 240 + "/gone.tif"])
def test_a_gone_href_fails_the_first_batch_naming_item_and_asset(cat, srv, tmp_path, name):
    """Also a href longer than the C side's names (200 bytes: its middle
    cut out), as Planetary Computer's and Earth Search's often are."""
    def edit(d):
        d["assets"]["B04"]["href"] = srv.url("data/" + name) + "?token=SECRET"
    sel = stac.items(edited_catalog(cat, tmp_path, edit)).select(["red"])
    ld = cogfeed.Loader(sel, grid=REGION, sampler="grid", patch_size=96, batch_size=2,
                        io_options=io_options())
    with pytest.raises(cogfeed.NotFoundError) as ei:
        next(iter(ld))
    msg = str(ei.value)
    assert msg.startswith("item 's33-a', asset 'B04': ") and "gone.tif" in msg, msg
    assert "SECRET" not in msg


def test_a_failure_that_may_pass_is_tried_again_after_a_backoff(cat, srv, tmp_path):
    """A file answering 503: the first sample's try fails, and the other
    samples of that moment (and the same sample's own reads) get the
    failure without a request of their own; after each backoff (half a
    second, doubling) one sample tries again: over 2.5 s of samples, 3
    tries (at 0, 0.5 and 1.5 s), where each sample tried before.  A file
    answering 503 once is read after the first backoff."""
    import time

    def loader(fault):
        def edit(d):
            d["assets"]["B04"]["href"] = srv.url("data/s33-a_B04.tif", fault=fault)
        sel = stac.items(edited_catalog(cat, tmp_path, edit)).select(["red"])
        return cogfeed.Loader(sel, grid=REGION, sampler="grid", patch_size=96, batch_size=4,
                              skip_errors=True, skip_limit=1.0, copy=True,
                              io_options={"max_retries": 0})
    srv.reset()
    ld = loader("status-503-1000")
    path = "/fault/status-503-1000/data/s33-a_B04.tif"
    t0, samples = time.monotonic(), 0
    while time.monotonic() - t0 < 2.5:
        samples += sum(len(w) for _, _, w in batches(ld))
    assert samples == 0 and ld.stats()["skipped"] > 100
    assert 2 <= srv.requests(path) <= 3
    ld.close()
    ld = loader("status-503-1")
    t0, samples = time.monotonic(), 0
    while samples == 0 and time.monotonic() - t0 < 10:
        samples += sum(len(w) for _, _, w in batches(ld))
    assert samples > 0 and time.monotonic() - t0 >= 0.5


def test_without_a_target_grid_headers_are_read_at_the_start(srv):
    """The descriptions need a target grid (and level 0, random or grid
    patches); otherwise the Loader reads each header as it starts."""
    sel, _ = selection(srv, ids=("s33-a",), names=("nir",))
    srv.reset()
    cogfeed.Loader(sel, sampler="grid", patch_size=128, batch_size=2,
                   io_options=io_options()).close()
    assert data_requests(srv).get("s33-a_B08.tif", 0) >= 1

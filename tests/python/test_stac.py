"""cogfeed.stac (issue 27, "STAC in"; docs/datasets.md): STAC Items,
ItemCollections, Collections and Catalogs read from disk and through the
test nginx, assets selected by key and by common name, grids from the
projection extension (the header only where it is missing, counted),
broken hrefs named by item and asset, hostile catalogs refused, credentials
only to an href's own store, lazy signing kept out of the header cache key,
and a Loader over the items giving the arrays of the files themselves.

The catalog is built at test time (tests/python/stac_fixture.py) from
`cogfeed synth`'s scenes."""
import json
import os
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
pytest.importorskip("rasterio")  # the fixture's COG writer
import stac_fixture as fx  # noqa: E402
from servers import Nginx  # noqa: E402
import hostile  # noqa: E402

import cogfeed  # noqa: E402
from cogfeed import stac  # noqa: E402


@pytest.fixture(scope="module")
def cat(tmp_path_factory):
    return fx.make(str(tmp_path_factory.mktemp("stac")))


@pytest.fixture(scope="module")
def srv(cat):
    with Nginx(cat["root"]) as s:
        yield s


def fast_io(**kw):
    return cogfeed.IO(retry_base_ms=20, retry_max_ms=200, request_timeout_s=20,
                      connect_timeout_s=2, max_retries=1, **kw)


IDS = [s[0] for s in fx.SCENES]


# -- reading ---------------------------------------------------------------

@pytest.mark.parametrize("doc", ["catalog", "collection", "search"])
def test_every_document_kind_gives_the_items(cat, doc):
    its = stac.items(cat[doc])
    assert [i.id for i in its] == IDS
    a = its[0].assets["B04"]
    assert a.href == cat["data"]["s33-a"]["B04"]          # resolved, absolute
    assert its[0].datetime.isoformat() == "2024-05-01T10:00:00+00:00"
    assert its[1].cloud_cover == 55.5
    assert its[0].geometry["type"] == "Polygon"


def test_single_item_and_file_url_and_dict(cat):
    p = cat["items"]["s34-a"]
    a = stac.items(p)
    b = stac.items("file://" + p)
    assert [i.id for i in a] == [i.id for i in b] == ["s34-a"]
    assert a[0].assets["B08"].href == cat["data"]["s34-a"]["B08"]
    assert b[0].assets["B08"].href == "file://" + cat["data"]["s34-a"]["B08"]
    with open(p) as f:
        d = json.load(f)
    # A dict has no location: relative hrefs need an absolute self link.
    with pytest.raises(stac.StacError, match=r"item 's34-a', asset 'B02': relative href"):
        stac.items(d)
    d["links"].append({"rel": "self", "href": "file://" + p})
    assert stac.items(d)[0].assets["B02"].href == "file://" + cat["data"]["s34-a"]["B02"]


def test_grids_from_the_projection_extension(cat):
    """proj:code (1.1, per asset) and proj:epsg (1.0, item level, one in
    the 9-number form): the grid equals the file's, with no header read."""
    sel = stac.items(cat["catalog"]).filter(lambda i: i.id != "s33-noproj") \
        .select(["red"])
    io = fast_io()
    grids = sel.grids(io)
    assert io.stats()["requests"] == 0 and sel.header_grids == []
    assert len(sel.stac_grids) == 4
    for it, g in zip(sel.items, grids):
        want = cogfeed.Grid.like(cat["data"][it.id]["B04"])
        assert g.crs == want.crs
        assert g.transform == want.transform and (g.width, g.height) == (
            want.width, want.height)
    am = sel.items[3]
    assert am.id == "s60-am" and 179.9 < am.bbox[0] < am.bbox[2] < 180.0
    assert grids[3].crs.epsg == 32660


def test_missing_projection_fields_fall_back_to_the_header(cat):
    sel = stac.items(cat["catalog"]).select(["red", "nir"])
    io = fast_io()
    grids = sel.grids(io)
    assert sel.header_grids == [("s33-noproj", "B04")]
    assert len(sel.stac_grids) == 4
    assert io.stats()["requests"] > 0        # that one header was read
    want = cogfeed.Grid.like(cat["data"]["s33-noproj"]["B04"])
    assert grids[4].transform == want.transform and grids[4].crs == want.crs


def test_raster_fields_stac_10_and_11(cat):
    its = stac.items(cat["catalog"])
    for it in its:
        for band in ("B02", "B08"):
            a = it.assets[band]
            assert (a.nodata, a.scale, a.offset, a.data_type) == (
                0.0, 0.0001, 0.0, "uint16"), it.id
    assert its[0].assets["landcover"].data_type == "uint8"
    assert its[0].assets["landcover"].nodata is None
    assert its[0].assets["thumbnail"].bands == ()


# -- asset selection -------------------------------------------------------

def test_select_by_key_and_by_common_name(cat):
    its = stac.items(cat["search"])
    by_name = its.select(["red", "green", "blue", "nir"])
    by_key = its.select(["B04", "B03", "B02", "B08"])
    mixed = its.select(["B04", "green", "B02", "nir"])
    assert by_name.images() == by_key.images() == mixed.images()
    assert by_name.layers() == by_key.layers() == mixed.layers()
    assert by_name.images()[0] == cat["data"]["s33-a"]["B04"]
    assert by_name.layers()[0] == [cat["data"]["s33-a"][b] for b in ("B03", "B02", "B08")]
    assert its.select(["landcover"]).layers() is None


def test_unknown_asset_names_the_item(cat):
    its = stac.items(cat["catalog"])
    with pytest.raises(stac.StacError,
                       match=r"item 's33-a': no asset with key or common name 'swir16'"):
        its.select(["red", "swir16"])
    with pytest.raises(stac.StacError, match="no item has these assets"):
        its.select(["swir16"], missing="skip")


def test_ambiguous_common_name_prefers_the_geotiff(cat, tmp_path):
    with open(cat["items"]["s33-a"]) as f:
        d = json.load(f)
    jp2 = dict(d["assets"]["B04"], type="image/jp2")
    d["assets"]["B04_jp2"] = jp2
    p = fx.write_json(str(tmp_path / "sentinel" / "items" / "x.json"), d)
    sel = stac.items(p).select(["red"])
    assert sel.assets[0][0].key == "B04"
    d["assets"]["B04_jp2"]["type"] = d["assets"]["B04"]["type"]
    fx.write_json(p, d)
    with pytest.raises(stac.StacError, match="several assets"):
        stac.items(p).select(["red"])


# -- the Loader over items -------------------------------------------------

def grid_batches(images, **kw):
    ld = cogfeed.Loader(images, patch_size=128, batch_size=4, sampler="grid",
                        copy=True, **kw)
    return [(b["image"], b["windows"]) for b in ld]


def test_loader_over_items_equals_over_paths_and_the_pixels(cat):
    sel = stac.items(cat["catalog"]).filter(
        lambda i: i.id in ("s33-a", "s34-a")).select(["red", "green", "blue", "nir"])
    got = grid_batches(sel)
    paths = [cat["data"][i][b] for i in ("s33-a", "s34-a") for b in ("B04",)]
    lays = [[cat["data"][i][b] for b in ("B03", "B02", "B08")] for i in ("s33-a", "s34-a")]
    want = grid_batches(paths, layers=lays)
    assert len(got) == len(want) == 2
    for (ga, gw), (wa, ww) in zip(got, want):
        assert gw == ww
        np.testing.assert_array_equal(ga, wa)
    # And the pixels are synth's bands in the order asked for.
    ids = ("s33-a", "s34-a")
    for img, wins in got:
        for k, (fi, x, y, w, h) in enumerate(wins):
            src = cat["arrays"][ids[fi]][[2, 1, 0, 3], y:y + h, x:x + w]
            np.testing.assert_array_equal(img[k], src)


def test_loader_with_a_mask_asset(cat):
    sel = stac.items(cat["catalog"]).filter(lambda i: i.id == "s33-b") \
        .select(["nir"])
    masks = sel.hrefs("landcover")
    assert masks == [cat["data"]["s33-b"]["landcover"]]
    ld = cogfeed.Loader(sel, masks=masks, patch_size=128, batch_size=4,
                        sampler="grid")
    b = next(iter(ld))
    assert b["image"].shape == (4, 1, 128, 128) and b["mask"].shape == (4, 1, 128, 128)
    with pytest.raises(stac.StacError, match="item 's33-b': no asset .* 'swir16'"):
        sel.hrefs("swir16")


def test_cog_dataset_takes_the_selection_lists(cat):
    pytest.importorskip("torch")
    from cogfeed.torch import CogDataset
    sel = stac.items(cat["catalog"]).filter(lambda i: i.id == "s33-a") \
        .select(["red", "nir"])
    ds = CogDataset(**sel.loader_inputs(), patch_size=128, batch_size=4,
                    sampler="grid")
    b = next(iter(ds))
    want = cat["arrays"]["s33-a"][[2, 3]]
    for k, (fi, x, y, w, h) in enumerate(b["windows"]):
        np.testing.assert_array_equal(b["image"][k].numpy(), want[:, y:y + h, x:x + w])


def test_loader_over_an_http_catalog(cat, srv):
    """The catalog read through the io from nginx; its relative hrefs
    resolved to nginx URLs; the Loader reads the same arrays."""
    its = stac.items(srv.url("catalog.json"), io=fast_io())
    sel = its.filter(lambda i: i.id == "s34-a").select(["nir", "red"])
    assert sel.images() == [srv.url("data/s34-a_B08.tif")]
    assert sel.layers() == [[srv.url("data/s34-a_B04.tif")]]
    before = srv.requests("/data/s34-a_B08.tif")
    got = grid_batches(sel)
    assert srv.requests("/data/s34-a_B08.tif") > before
    want = grid_batches([cat["data"]["s34-a"]["B08"]],
                        layers=[[cat["data"]["s34-a"]["B04"]]])
    for (ga, gw), (wa, ww) in zip(got, want):
        assert gw == ww
        np.testing.assert_array_equal(ga, wa)


# -- broken hrefs ----------------------------------------------------------

def broken_item(cat, tmp_path, href, name="broken.json"):
    def edit(d):
        d["id"] = "bad-item"
        d["assets"]["B08"]["href"] = href
    return fx.item_copy(cat, "s33-b", str(tmp_path / name), edit)


def test_broken_href_names_item_and_asset(cat, tmp_path):
    p = broken_item(cat, tmp_path, "./no_such_band.tif")
    sel = stac.items(p).select(["red", "nir"])
    with pytest.raises(cogfeed.NotFoundError,
                       match=r"item 'bad-item', asset 'B08': .*no_such_band.tif"):
        cogfeed.Loader(sel, patch_size=64, batch_size=2)
    with pytest.raises(cogfeed.NotFoundError, match=r"item 'bad-item', asset 'B08'") as ei:
        sel.check()
    assert ei.value.code == cogfeed.Status.NOTFOUND


def test_broken_http_href_names_item_and_asset(cat, srv, tmp_path):
    p = broken_item(cat, tmp_path, srv.url("data/gone.tif") + "?token=SECRET")
    sel = stac.items(p).select(["nir"])
    with pytest.raises(cogfeed.NotFoundError) as ei:
        cogfeed.Loader(sel, patch_size=64, batch_size=2,
                       io_options={"max_retries": 0})
    msg = str(ei.value)
    assert "item 'bad-item', asset 'B08'" in msg and "gone.tif" in msg
    assert "SECRET" not in msg


def test_not_a_tiff_names_item_and_asset(cat, tmp_path):
    p = broken_item(cat, tmp_path, cat["catalog"])
    with pytest.raises(cogfeed.Error, match=r"item 'bad-item', asset 'B08'"):
        stac.items(p).select(["nir"]).check()


# -- hostile catalogs ------------------------------------------------------

def catalog(links, id="c"):
    return {"type": "Catalog", "id": id, "description": "x", "stac_version": "1.1.0",
            "links": links}


def test_link_loop_refused(tmp_path):
    a = fx.write_json(str(tmp_path / "a.json"),
                      catalog([{"rel": "child", "href": "./sub/b.json"}], "a"))
    fx.write_json(str(tmp_path / "sub" / "b.json"),
                  catalog([{"rel": "child", "href": "../a.json"}], "b"))
    with pytest.raises(stac.StacError, match=r"b.json: link loop: links\[0\] \(child\) leads back to .*a.json"):
        stac.items(a)
    # A catalog linking itself.
    s = fx.write_json(str(tmp_path / "self.json"),
                      catalog([{"rel": "child", "href": "./self.json"}]))
    with pytest.raises(stac.StacError, match="link loop"):
        stac.items(s)


def test_diamond_is_read_once_not_a_loop(cat, tmp_path):
    col = cat["collection"]
    a = fx.write_json(str(tmp_path / "d.json"), catalog(
        [{"rel": "child", "href": col}, {"rel": "child", "href": col}]))
    assert [i.id for i in stac.items(a)] == IDS


def test_depth_and_counts_bounded(cat, tmp_path):
    # A chain deeper than max_depth.
    for i in range(6):
        fx.write_json(str(tmp_path / ("c%d.json" % i)),
                      catalog([{"rel": "child", "href": "./c%d.json" % (i + 1)}]))
    fx.write_json(str(tmp_path / "c6.json"), catalog([]))
    with pytest.raises(stac.StacError, match="nested deeper than 3 levels"):
        stac.items(str(tmp_path / "c0.json"), limits=stac.Limits(max_depth=3))
    assert len(stac.items(str(tmp_path / "c0.json"))) == 0
    with pytest.raises(stac.StacError, match="more than 3 documents"):
        stac.items(str(tmp_path / "c0.json"), limits=stac.Limits(max_documents=3))
    # A search result with more features than allowed: refused before any is parsed.
    with pytest.raises(stac.StacError, match="5 features, more than the 2 items allowed"):
        stac.items(cat["search"], limits=stac.Limits(max_items=2))
    many = fx.write_json(str(tmp_path / "many.json"),
                         catalog([{"rel": "item", "href": "./x%d.json" % i}
                                  for i in range(50)]))
    with pytest.raises(stac.StacError, match="50 links"):
        stac.items(many, limits=stac.Limits(max_links=10))


def test_absurd_fields_refused_naming_item_and_asset(cat, tmp_path):
    with open(cat["items"]["s33-a"]) as f:
        d = json.load(f)
    cases = [
        (("assets", "B04", "proj:shape"), [10**12, 5], r"asset 'B04': proj:shape .* out of range"),
        (("assets", "B04", "proj:transform"), [1, 2, 3], r"asset 'B04': proj:transform needs 6 or 9"),
        (("assets", "B04", "proj:code"), "+init=epsg:4326", r"asset 'B04': proj:code .* is not AUTHORITY:CODE"),
        (("assets", "B04", "href"), 7, r"asset 'B04': no href"),
        (("properties", "datetime"), "yesterday", r"item 's33-a': datetime: 'yesterday'"),
        (("properties", "eo:cloud_cover"), "lots", r"item 's33-a': eo:cloud_cover: a number"),
    ]
    for path, value, pat in cases:
        e = json.loads(json.dumps(d))
        node = e
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        p = fx.write_json(str(tmp_path / "sentinel" / "items" / "absurd.json"), e)
        with pytest.raises(stac.StacError, match=pat):
            stac.items(p)
    # NaN is not JSON; a file that is not JSON, or nested without end, is named.
    p = tmp_path / "nan.json"
    p.write_text(json.dumps(d).replace('"eo:cloud_cover": 10.0', '"eo:cloud_cover": NaN'))
    with pytest.raises(stac.StacError, match="nan.json: not valid JSON"):
        stac.items(str(p))
    p.write_text("[" * 100000)
    with pytest.raises(stac.StacError, match="nan.json: JSON nested deeper than 64"):
        stac.items(str(p))
    # A document larger than max_bytes: refused by the io before it is read.
    with pytest.raises(cogfeed.LimitError, match=r"search.json: \d+ bytes, more than the 1000 allowed"):
        stac.items(cat["search"], limits=stac.Limits(max_bytes=1000))


def test_remote_catalog_may_not_name_local_files(cat, srv):
    root = cat["root"]
    fx.write_json(os.path.join(root, "evil", "cat.json"), catalog(
        [{"rel": "child", "href": "file:///etc/passwd"}]))
    with pytest.raises(stac.StacError,
                       match=r"evil/cat.json: links\[0\]: file:///etc/passwd is a local "
                             r"file named by a remote document"):
        stac.items(srv.url("evil/cat.json"), io=fast_io())
    fx.write_json(os.path.join(root, "evil", "abs.json"), catalog(
        [{"rel": "item", "href": "/etc/passwd"}]))
    # An absolute path in an http document is a path on that server.
    with pytest.raises(cogfeed.NotFoundError, match="/etc/passwd"):
        stac.items(srv.url("evil/abs.json"), io=fast_io())
    with open(cat["items"]["s33-a"]) as f:
        d = json.load(f)
    d["assets"]["B04"]["href"] = "file:///etc/passwd"
    fx.write_json(os.path.join(root, "evil", "item.json"), d)
    with pytest.raises(stac.StacError,
                       match=r"item 's33-a', asset 'B04': file:///etc/passwd is a local"):
        stac.items(srv.url("evil/item.json"), io=fast_io())


def test_relative_hrefs_resolve_against_the_document():
    d = {"type": "Feature", "id": "x", "properties": {"datetime": "2024-01-01T00:00:00Z"},
         "links": [], "assets": {
             "a": {"href": "./b/../x.tif?sig=a/../b"}, "up": {"href": "../../../../y.tif"},
             "abs": {"href": "/z.tif"}, "s3": {"href": "s3://bucket/k.tif"}}}
    it = stac.item_from_dict(d, href="https://h.example/c/d/item.json?token=T")
    assert {k: a.href for k, a in it.assets.items()} == {
        "a": "https://h.example/c/d/x.tif?sig=a/../b", "up": "https://h.example/y.tif",
        "abs": "https://h.example/z.tif", "s3": "s3://bucket/k.tif"}
    it = stac.item_from_dict(d, href="s3://bucket/stac/item.json")
    assert it.assets["a"].href == "s3://bucket/stac/x.tif?sig=a/../b"


def test_https_document_may_not_name_plain_http():
    with pytest.raises(stac.StacError, match="plain http, named by an https document"):
        stac.item_from_dict(
            {"type": "Feature", "id": "x", "properties": {"datetime": "2024-01-01T00:00:00Z"},
             "assets": {"a": {"href": "http://example.com/a.tif"}}, "links": []},
            href="https://example.com/x.json")
    with pytest.raises(stac.StacError, match="unsupported URL scheme 'ftp'"):
        stac.item_from_dict(
            {"type": "Feature", "id": "x", "properties": {"datetime": "2024-01-01T00:00:00Z"},
             "assets": {"a": {"href": "ftp://example.com/a.tif"}}, "links": []},
            href="https://example.com/x.json")


# -- credentials -----------------------------------------------------------

CRED_ENV = {
    "AWS_ACCESS_KEY_ID": "AKIASTACTESTKEY", "AWS_SECRET_ACCESS_KEY": "STACSECRETKEY",
    "AWS_REGION": "us-east-1",
    "AZURE_STORAGE_ACCOUNT": "victimacct",
    "AZURE_STORAGE_SAS_TOKEN": "sv=2021-08-06&sp=r&sig=STACSASSECRET",
    "GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.STACGCSSECRET",
}
MARKERS = ["sig=", "STACSASSECRET", "Authorization", "AWS4-HMAC", "X-Amz-",
           "AKIASTACTEST", "STACSECRETKEY", "Bearer", "STACGCSSECRET"]


def test_credentials_only_to_the_hrefs_own_store(cat, srv, monkeypatch):
    """A catalog (on nginx) whose assets name a hostile server directly, an
    Azure host over plain http and a look-alike (through the hostile server
    as proxy), and s3:// on the endpoint the user configured: only the
    last gets a signature."""
    for k in ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
              "AWS_NO_SIGN_REQUEST", "AZURE_STORAGE_ACCESS_KEY",
              "AZURE_STORAGE_CONNECTION_STRING", "STORAGE_EMULATOR_HOST",
              "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY",
              "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(k, raising=False)
    for k, v in CRED_ENV.items():
        monkeypatch.setenv(k, v)
    with hostile.Hostile() as evil, hostile.Hostile() as store:
        monkeypatch.setenv("AWS_ENDPOINT_URL", store.base)
        monkeypatch.setenv("http_proxy", evil.proxy)
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        with open(cat["items"]["s33-a"]) as f:
            d = json.load(f)
        d["assets"] = {
            "direct": {"href": evil.url("x.tif")},
            "azure_http": {"href": "http://victimacct.blob.core.windows.net/c/x.tif"},
            "lookalike": {"href": "http://victimacct.blob.core.attacker.example/c/x.tif"},
            "gs_named": {"href": "http://storage.googleapis.com.attacker.example/b/x.tif"},
            "own_s3": {"href": "s3://bucket/x.tif"},
        }
        fx.write_json(os.path.join(cat["root"], "creds", "item.json"), d)
        io = fast_io()
        its = stac.items(srv.url("creds/item.json"), io=io)
        for key in ("direct", "azure_http", "lookalike", "gs_named", "own_s3"):
            with pytest.raises(cogfeed.Error):
                its.select([key]).check(io)
        seen = evil.text()
        assert "x.tif" in seen and "victimacct.blob.core.attacker.example" in seen
        assert "storage.googleapis.com.attacker.example" in seen
        for m in MARKERS:
            assert m.lower() not in seen.lower(), "%r reached the hostile server" % m
        # The configured S3 endpoint is the store those credentials are for.
        mine = store.text()
        assert "/bucket/x.tif" in mine and "AWS4-HMAC-SHA256" in mine


# -- signing ---------------------------------------------------------------

def test_signing_is_lazy_renewed_and_out_of_the_header_cache_key(cat, srv, tmp_path):
    calls = []

    def sign(href):
        calls.append(href)
        # An Azure-style SAS that expires in 10 minutes (se=).
        se = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 600))
        return href + "?sv=2021-08-06&sp=r&se=%s&sig=S%d" % (se, len(calls))

    its = stac.items(srv.url("search.json"), io=fast_io())
    sel = its.filter(lambda i: i.id == "s33-a").select(["red", "nir"], sign=sign)
    assert calls == []                      # nothing signed until used
    imgs, lays = sel.images(), sel.layers()
    assert imgs[0].endswith("sig=S1") and lays[0][0].endswith("sig=S2")
    assert len(calls) == 2
    sel.images()
    assert len(calls) == 2                  # still valid: not signed again
    # Within the margin of its expiry (se= in 10 min, margin 15 min): signed again.
    sel.signer.margin_s = 900
    again = sel.images()[0]
    assert again.endswith("sig=S3") and len(calls) == 3
    # The header cache files the header without the signature: a
    # re-signed href opened by a new IO on the same cache dir is a hit.
    hc = str(tmp_path / "hc")
    io1 = fast_io(header_cache_dir=hc)
    with cogfeed.open(imgs[0], io=io1):
        pass
    io2 = fast_io(header_cache_dir=hc)
    with cogfeed.open(again, io=io2):
        pass
    assert io2.stats()["header_cache_hits"] == 1
    for f in os.listdir(hc):
        if os.path.isfile(os.path.join(hc, f)):
            with open(os.path.join(hc, f), "rb") as fh:
                assert b"sig=S" not in fh.read()


def test_signing_with_an_explicit_expiry_and_a_moving_signer(cat):
    n = [0]

    def sign(href):
        n[0] += 1
        return href + "?token=%d" % n[0], time.time() - 1   # already expired

    sel = stac.items(cat["catalog"]).select(["red"], sign=sign)
    sel.images()
    sel.images()
    assert n[0] == 2 * len(sel)              # expired: signed at every use
    bad = stac.items(cat["catalog"]).select(["red"], sign=lambda h: "http://evil.example/x.tif")
    with pytest.raises(stac.StacError, match="a signer may add a query, not move the href"):
        bad.images()


# -- pystac objects (optional) ---------------------------------------------

def test_pystac_objects(cat):
    pystac = pytest.importorskip("pystac")
    it = pystac.Item.from_file(cat["items"]["s33-a"])
    got = stac.items(it)
    assert [i.id for i in got] == ["s33-a"]
    assert got[0].assets["B04"].href == cat["data"]["s33-a"]["B04"]
    # Items read from their own files keep their self links: hrefs resolve.
    ic = pystac.ItemCollection([pystac.Item.from_file(cat["items"][i]) for i in IDS])
    got = stac.items(ic)
    assert [i.id for i in got] == IDS
    assert got[2].assets["B08"].href == cat["data"]["s34-a"]["B08"]
    # A search result file's items have no location (pystac keeps none):
    # their relative hrefs are refused by name rather than guessed.
    with pytest.raises(stac.StacError, match="item 's33-a', asset 'B02': relative href"):
        stac.items(pystac.ItemCollection.from_file(cat["search"]))
    c = pystac.Catalog.from_file(cat["catalog"])
    assert sorted(i.id for i in stac.items(c)) == sorted(IDS)


# -- STAC GeoParquet (optional: pyarrow; the file written by stac-geoparquet) --

def test_geoparquet_gives_the_items_of_the_json(cat, srv, tmp_path):
    pytest.importorskip("pyarrow")
    sga = pytest.importorskip("stac_geoparquet.arrow")
    with open(cat["search"]) as f:
        feats = json.load(f)["features"]
    path = os.path.join(cat["root"], "items.parquet")   # beside search.json
    sga.to_parquet(sga.parse_stac_items_to_arrow(feats), path)
    for src in (path, srv.url("items.parquet")):
        got = stac.items(src, io=fast_io())
        want = stac.items(cat["search"] if src == path else srv.url("search.json"),
                          io=fast_io())
        assert [i.id for i in got] == IDS
        for g, w in zip(got, want):
            assert (g.time, g.cloud_cover, g.collection) == (w.time, w.cloud_cover,
                                                             w.collection)
            assert g.geometry["type"] == w.geometry["type"] == "Polygon"
            np.testing.assert_allclose(g.geometry["coordinates"], w.geometry["coordinates"])
            np.testing.assert_allclose(g.bbox, w.bbox)
            assert set(g.assets) == set(w.assets)
            for k, a in w.assets.items():
                b = g.assets[k]
                assert (b.href, b.crs, b.transform, b.shape, b.nodata, b.scale,
                        b.data_type, b.common_names) == (
                    a.href, a.crs, a.transform, a.shape, a.nodata, a.scale,
                    a.data_type, a.common_names), (g.id, k)
        assert got.select(["red", "nir"]).images() == want.select(["red", "nir"]).images()
    with pytest.raises(stac.StacError, match="items.parquet: 5 rows, more than the 3 items"):
        stac.items(path, limits=stac.Limits(max_items=3))
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really PAR1")
    with pytest.raises(stac.StacError, match="bad.parquet: unreadable Parquet"):
        stac.items(str(bad))


# -- typing ------------------------------------------------------------------

TYPED_USER = '''\
import datetime
from typing import List, Optional, Tuple

from typing_extensions import assert_type

import cogfeed
from cogfeed import stac


def sign(href: str) -> str:
    return href + "?sig=x"


its = stac.items("catalog.json", limits=stac.Limits(max_items=10))
assert_type(its, stac.Items)
it = its[0]
assert_type(it.time, Optional[datetime.datetime])
assert_type(it.cloud_cover, Optional[float])
sel = its.filter(lambda i: (i.cloud_cover or 0) < 20).select(["red", "nir"], sign=sign)
assert_type(sel.images(), List[str])
assert_type(sel.header_grids, List[Tuple[str, str]])
grids: List[cogfeed.Grid] = sel.grids()
loader = cogfeed.Loader(sel, patch_size=64)
sel.select  # typo: select
'''


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_stac_api_type_checks(tmp_path, checker):
    """A user's script over cogfeed.stac passes mypy --strict and pyright
    strict, but for the one marked typo (a Selection has no select)."""
    import test_package
    d = tmp_path / "u"
    d.mkdir()
    script = d / "stac_user.py"
    script.write_text(TYPED_USER)
    run = test_package._mypy if checker == "mypy" else test_package._pyright
    errors, out = run(str(script), tmp_path)
    assert set(errors) == {len(TYPED_USER.splitlines())}, out[-4000:]


def _it(id_, bbox, props):
    return {"type": "Feature", "stac_version": "1.0.0", "id": id_, "bbox": bbox,
            "geometry": None, "links": [], "properties": props,
            "assets": {"a": {"href": "/x/%s.tif" % id_}}}


def test_search_by_bbox_datetime_and_cloud_cover():
    """Items.search: a STAC API's bbox / datetime / eo:cloud_cover rules,
    without the API (the antimeridian, open intervals, date-only ends,
    intervals of items)."""
    items = stac.items([
        _it("rome", [12.3, 41.7, 12.7, 42.0],
            {"datetime": "2024-07-01T10:00:00Z", "eo:cloud_cover": 5}),
        _it("fiji", [178.0, -18.5, -179.5, -16.0],          # across 180
            {"datetime": "2024-07-10T22:30:00Z", "eo:cloud_cover": 40}),
        _it("span", [12.0, 41.0, 13.0, 42.5],
            {"datetime": None, "start_datetime": "2024-06-20T00:00:00Z",
             "end_datetime": "2024-07-02T00:00:00Z"}),
        _it("nobox", None, {"datetime": "2024-07-01T10:00:00Z"}),
    ])
    ids = lambda r: [i.id for i in r]  # noqa: E731
    assert ids(items.search(bbox=[12.5, 41.8, 12.6, 41.9])) == ["rome", "span"]
    assert ids(items.search(bbox=[179.0, -17.0, 179.5, -16.5])) == ["fiji"]
    assert ids(items.search(bbox=[-179.9, -17.0, -179.6, -16.5])) == ["fiji"]
    assert ids(items.search(bbox=[170.0, -20.0, -170.0, -10.0])) == ["fiji"]  # both across
    assert ids(items.search(datetime="2024-07-01")) == ["rome", "span", "nobox"]
    assert ids(items.search(datetime="2024-07-03/..")) == ["fiji"]
    assert ids(items.search(datetime="../2024-06-25")) == ["span"]
    assert ids(items.search(datetime=("2024-07-10T22:30:00Z", None))) == ["fiji"]
    assert ids(items.search(datetime="2024-07-01T10:00:00Z")) == ["rome", "span", "nobox"]
    assert ids(items.search(max_cloud_cover=10)) == ["rome"]
    assert ids(items.search(bbox=[12, 41, 13, 43], datetime="2024-06-01/2024-06-30")) == ["span"]
    with pytest.raises(ValueError, match="bbox"):
        items.search(bbox=[1, 2, 3])
    with pytest.raises(ValueError, match="before it starts"):
        items.search(datetime="2024-07-02/2024-07-01")
    with pytest.raises(stac.StacError, match="RFC 3339"):
        items.search(datetime="yesterday")

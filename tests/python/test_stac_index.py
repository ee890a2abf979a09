"""The C STAC index (cf_stac, lib/stac/) against the reference reader
(stac.item_from_dict): cogfeed.stac.items() reads JSON documents with the
index, which refuses whole any document it does not read exactly as the
reference does, and the reference then reads it.  So for every form below
items() must give the very Items (and the very errors) the reference
gives, and the forms the index is meant to take must not fall back.

Also: search / sorted / select on the index against the same operations
on a list of the reference's items, a collection larger than the document
bound, and the memory map letting go of parsed pages."""
import copy
import datetime as dt
import json
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from cogfeed import stac  # noqa: E402


def base_item(i=0, style="1.1", rel=False):
    """A Sentinel-2-like item (the fields datasets use, both STAC 1.0 and
    1.1 band styles)."""
    x0, y0 = 300000.0 + 1000 * i, 5000040.0
    proj = {"proj:code" if style == "1.1" else "proj:epsg":
            "EPSG:32633" if style == "1.1" else 32633,
            "proj:transform": [10.0, 0.0, x0, 0.0, -10.0, y0],
            "proj:shape": [10980, 10980]}
    props = {"datetime": "2024-05-%02dT10:%02d:31.024Z" % (1 + i % 28, i % 60),
             "eo:cloud_cover": (i * 37 % 100) + 0.25, "platform": "sentinel-2b",
             "instruments": ["msi"], "s2:nested": {"a": [1, 2, {"b": None}]}}
    if style == "1.0":
        props.update(proj)
    assets = {}
    for key, name, cn in (("B02", "B02", "blue"), ("B04", "B04", "red"),
                          ("B08", "B08", "nir")):
        h = ("./data/%d_%s.tif" % (i, key)) if rel else \
            "https://data.example.com/s2/%d/%s.tif" % (i, key)
        a = {"href": h, "type": "image/tiff; application=geotiff; profile=cloud-optimized",
             "roles": ["data"]}
        if style == "1.1":
            a.update(proj)
            a["bands"] = [{"name": name, "eo:common_name": cn, "nodata": 0,
                           "data_type": "uint16", "raster:scale": 0.0001,
                           "raster:offset": -0.1}]
        else:
            a["eo:bands"] = [{"name": name, "common_name": cn}]
            a["raster:bands"] = [{"nodata": 0, "data_type": "uint16", "scale": 0.0001,
                                  "offset": -0.1}]
        assets[key] = a
    assets["thumbnail"] = {"href": "https://data.example.com/s2/%d/t.png" % i,
                           "type": "image/png", "roles": ["thumbnail", "overview"]}
    lon = 14.0 + 0.01 * i
    return {"type": "Feature", "stac_version": "1.1.0", "id": "item-%d" % i,
            "collection": "s2",
            "geometry": {"type": "Polygon", "coordinates": [[[lon, 45.0], [lon + 1, 45.0],
                                                             [lon + 1, 46.0], [lon, 45.0]]]},
            "bbox": [lon, 45.0, lon + 1, 46.0], "properties": props, "assets": assets,
            "links": [{"rel": "self", "href": "https://stac.example.com/items/%d" % i}]}


def _set(path, value):
    def f(d):
        o = d
        for k in path[:-1]:
            o = o[k]
        if value is _DEL:
            del o[path[-1]]
        else:
            o[path[-1]] = value
    return f


_DEL = object()
P, A = "properties", "assets"

# (name, change of the item dict, the index reads it: True / False (the
# reference does) / "error" (both refuse, with the reference's message))
FORMS = [
    ("stac 1.1", lambda d: None, True),
    ("absent cloud cover", _set([P, "eo:cloud_cover"], _DEL), True),
    ("null cloud cover", _set([P, "eo:cloud_cover"], None), True),
    ("integer cloud cover", _set([P, "eo:cloud_cover"], 7), True),
    ("bool cloud cover", _set([P, "eo:cloud_cover"], True), "error"),
    ("9-number transform", _set([A, "B04", "proj:transform"],
                                [10.0, 0.0, 5.0, 0.0, -10.0, 6.0, 0.0, 0.0, 1.0]), True),
    ("bad 9-number transform", _set([A, "B04", "proj:transform"],
                                    [10.0, 0.0, 5.0, 0.0, -10.0, 6.0, 0.0, 1.0, 1.0]), "error"),
    ("7-number transform", _set([A, "B04", "proj:transform"], [1, 2, 3, 4, 5, 6, 7]), "error"),
    ("null transform", _set([A, "B04", "proj:transform"], None), True),
    ("float shape", _set([A, "B04", "proj:shape"], [10980.0, 10980]), "error"),
    ("zero shape", _set([A, "B04", "proj:shape"], [0, 10980]), "error"),
    ("bool shape", _set([A, "B04", "proj:shape"], [True, 10980]), "error"),
    ("proj:bbox 4", _set([A, "B04", "proj:bbox"], [1.0, 2.0, 3.0, 4.0]), True),
    ("proj:bbox 6", _set([A, "B04", "proj:bbox"], [1.0, 2.0, 0.0, 3.0, 4.0, 9.0]), True),
    ("proj:bbox 5", _set([A, "B04", "proj:bbox"], [1, 2, 3, 4, 5]), "error"),
    ("epsg at the asset", _set([A, "B04", "proj:code"], _DEL), True),
    ("epsg number", lambda d: d[A]["B04"].update({"proj:code": None, "proj:epsg": 32634}), True),
    ("epsg text", lambda d: d[A]["B04"].update({"proj:code": None, "proj:epsg": "32634"}),
     "error"),
    ("epsg float", lambda d: d[A]["B04"].update({"proj:code": None, "proj:epsg": 32634.0}),
     "error"),
    ("epsg out of range", lambda d: d[A]["B04"].update({"proj:code": None,
                                                        "proj:epsg": 10 ** 7}), "error"),
    ("code and bad epsg", lambda d: d[A]["B04"].update({"proj:epsg": "junk"}), True),
    ("bad code", _set([A, "B04", "proj:code"], "EPSG 32633"), "error"),
    ("64-character code", _set([A, "B04", "proj:code"], "A" * 31 + ":" + "1" * 32), True),
    ("65-character code", _set([A, "B04", "proj:code"], "A" * 32 + ":" + "1" * 32), "error"),
    ("empty common name", _set([A, "B04", "bands", 0, "eo:common_name"], ""), True),
    ("code with a file", _set([A, "B04", "proj:code"], "+init=/etc/passwd"), "error"),
    ("wkt2", lambda d: d[A]["B04"].update({"proj:code": None, "proj:wkt2":
                                           '  PROJCRS["x", BASEGEOGCRS["y"]]  '}), True),
    ("not wkt", lambda d: d[A]["B04"].update({"proj:code": None, "proj:wkt2": "junk"}),
     "error"),
    ("projjson", lambda d: d[A]["B04"].update({"proj:code": None, "proj:projjson":
                                               {"type": "ProjectedCRS", "name": "x"}}), False),
    ("item-level proj, 1.0 bands", lambda d: d.update(base_item(0, "1.0")), True),
    ("band lists of several lengths", lambda d: d[A]["B04"].update({
        "eo:bands": [{"name": "a", "common_name": "red"}, {"name": "b"}],
        "raster:bands": [{"nodata": "nan", "data_type": "float32"}]}), True),
    ("nodata inf", _set([A, "B04", "bands", 0, "nodata"], "-inf"), True),
    ("nodata word", _set([A, "B04", "bands", 0, "nodata"], "none"), "error"),
    ("asset-level band fields", lambda d: d[A]["B04"].update({
        "nodata": 5, "raster:scale": 2.0, "data_type": "int16",
        "bands": [{"name": "x"}]}), True),
    ("asset-level fields, no band list", lambda d: d[A]["B08"].update({"nodata": 5}) or
     d[A]["B08"].pop("bands"), True),
    ("null band list", _set([A, "B04", "bands"], None), True),
    ("band list not a list", _set([A, "B04", "bands"], {"name": "x"}), "error"),
    ("band not an object", _set([A, "B04", "bands"], ["x"]), "error"),
    ("long common name", _set([A, "B04", "bands", 0, "eo:common_name"], "r" * 65), "error"),
    ("no roles", _set([A, "B04", "roles"], _DEL), True),
    ("null roles", _set([A, "B04", "roles"], None), "error"),
    ("role not text", _set([A, "B04", "roles"], ["data", 3]), "error"),
    ("70 roles", _set([A, "B04", "roles"], ["r%d" % k for k in range(70)]), True),
    ("null type", _set([A, "B04", "type"], None), True),
    ("long type", _set([A, "B04", "type"], "t" * 257), "error"),
    ("no href", _set([A, "B04", "href"], _DEL), "error"),
    ("empty href", _set([A, "B04", "href"], ""), "error"),
    ("control character in href", _set([A, "B04", "href"], "https://x/a\x01.tif"), "error"),
    ("ftp href", _set([A, "B04", "href"], "ftp://x/a.tif"), "error"),
    ("s3 href", _set([A, "B04", "href"], "s3://bucket/a.tif"), True),
    ("relative href", _set([A, "B04", "href"], "./data/../x/a.tif"), True),
    ("absolute local href", _set([A, "B04", "href"], "/data/a.tif"), True),
    ("asset not an object", _set([A, "B04"], "x"), "error"),
    ("null assets", _set([A], None), "error"),
    ("no assets", _set([A], _DEL), "error"),
    ("no properties", _set([P], _DEL), "error"),
    ("no id", _set(["id"], _DEL), "error"),
    ("empty id", _set(["id"], ""), "error"),
    ("numeric id", _set(["id"], 5), "error"),
    ("unicode id", _set(["id"], "sc\u00e8ne-\U0001f30d"), True),
    ("long id", _set(["id"], "i" * 1025), "error"),
    ("not a Feature", _set(["type"], "feature"), "error"),
    ("null geometry", _set(["geometry"], None), True),
    ("geometry not an object", _set(["geometry"], [1, 2]), "error"),
    ("no bbox", _set(["bbox"], _DEL), True),
    ("6-number bbox", _set(["bbox"], [14.0, 45.0, 0.0, 15.0, 46.0, 100.0]), True),
    ("5-number bbox", _set(["bbox"], [1, 2, 3, 4, 5]), "error"),
    ("antimeridian bbox", _set(["bbox"], [179.5, 45.0, -179.5, 46.0]), True),
    ("numeric collection", _set(["collection"], 3), True),
    ("null links", _set(["links"], None), "error"),
    ("links not objects", _set(["links"], ["x", 3]), True),
    ("no datetime, start", lambda d: d[P].update({"datetime": None,
                                                  "start_datetime": "2024-01-01T00:00:00Z",
                                                  "end_datetime": "2024-02-01T00:00:00Z"}),
     True),
    ("no date at all", _set([P, "datetime"], None), "error"),
    ("offset date", _set([P, "datetime"], "2024-05-01T10:00:00.123456789+05:30"), True),
    ("negative offset", _set([P, "datetime"], "2024-05-01t23:59:59-11:45"), True),
    ("space separator", _set([P, "datetime"], "2024-05-01 10:00:00z"), True),
    ("leap second", _set([P, "datetime"], "2016-12-31T23:59:60Z"), True),
    ("29 February", _set([P, "datetime"], "2024-02-29T00:00:00Z"), True),
    ("30 February", _set([P, "datetime"], "2024-02-30T00:00:00Z"), "error"),
    ("month 13", _set([P, "datetime"], "2024-13-01T00:00:00Z"), "error"),
    ("offset of a day", _set([P, "datetime"], "2024-05-01T00:00:00+24:00"), "error"),
    ("13 fraction digits", _set([P, "datetime"], "2024-05-01T00:00:00.1234567890123Z"),
     "error"),
    ("no zone", _set([P, "datetime"], "2024-05-01T00:00:00"), "error"),
    ("date alone", _set([P, "datetime"], "2024-05-01"), "error"),
    ("year 0", _set([P, "datetime"], "0000-05-01T00:00:00Z"), "error"),
    ("numeric date", _set([P, "datetime"], 20240501), "error"),
]


def _write(path, feats, text=None):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text if text is not None else
                json.dumps({"type": "FeatureCollection", "features": feats}))
    return str(path)


def _reference(path):
    """The reference's items of a FeatureCollection file."""
    with open(path, "rb") as f:
        doc = json.loads(f.read())
    return [stac.item_from_dict(f, href=path, where="%s: features[%d]" % (path, i))
            for i, f in enumerate(doc["features"])]


def _both(path):
    """(items() result or its error, the reference's or its error)."""
    try:
        got = stac.items(path)
    except stac.StacError as e:
        got = e
    try:
        ref = _reference(path)
    except stac.StacError as e:
        ref = e
    return got, ref


@pytest.mark.parametrize("name,change,fast", FORMS, ids=[f[0] for f in FORMS])
def test_index_reads_as_the_reference(tmp_path, name, change, fast):
    d = base_item(1)
    change(d)
    path = _write(tmp_path / "c.json", [base_item(0), d, base_item(2, "1.0")])
    got, ref = _both(path)
    if fast == "error":
        assert isinstance(got, stac.StacError) and isinstance(ref, stac.StacError), (got, ref)
        assert str(got) == str(ref)
        return
    assert not isinstance(ref, Exception), ref
    assert not isinstance(got, Exception), got
    assert list(got) == ref
    # The index took it (or, for a form it leaves to the reference, did not).
    assert (got._idx is not None) == fast, name


def _raw_forms():
    """Documents that differ from json.dumps' output only in their text."""
    item = json.dumps(base_item(0))
    feats = json.dumps({"type": "FeatureCollection", "features": [base_item(0), base_item(1)]})
    return [
        ("pretty-printed", json.dumps(json.loads(feats), indent=3), True),
        ("type after features", '{"features": [%s], "type": "FeatureCollection"}' % item, True),
        ("one Item", item, True),
        ("escaped key", item.replace('"proj:code"', '"proj\\u003acode"', 1), True),
        ("escaped strings", item.replace('"platform": "sentinel-2b"',
                                         '"platform": "s\\u00e9ntinel\\ud83c\\udf0d\\n"'), True),
        ("raw unicode", item.replace('"sentinel-2b"', '"s\u00e9ntinel \U0001f30d"'), True),
        ("escaped href", item.replace("https://data.example.com", "https:\\/\\/data.example.com"),
         True),
        ("escaped href to a control character", item.replace(
            "https://data.example.com", "https://data.example.com/\\u0007"), "error"),
        ("escaped asset key", item.replace('"B04": {', '"B\\u00304": {'), False),
        ("duplicate id", item.replace('"id": "item-0"', '"id": "a", "id": "item-0"'), False),
        ("duplicate asset", item.replace('"B08": {', '"B04": {"href": "https://x/y.tif"}, '
                                         '"B08": {'), False),
        ("empty collection", '{"type": "FeatureCollection", "features": []}', True),
        ("lone surrogate in properties", item.replace('"sentinel-2b"', '"\\ud800x"'), True),
        ("lone surrogate in the id", item.replace('"id": "item-0"', '"id": "\\ud800x"'), False),
        ("byte order mark", "\ufeff" + item, False),
        ("NaN", item.replace('"eo:cloud_cover": 0.25', '"eo:cloud_cover": NaN'), "error"),
        ("trailing comma", item.replace('"instruments": ["msi"]', '"instruments": ["msi",]'),
         "error"),
        ("trailing data", item + " x", "error"),
        ("cut short", item[:-40], "error"),
        ("huge integer", item.replace('"proj:shape": [10980, 10980]',
                                      '"proj:shape": [10980, 123456789012345678901234567890]'),
         "error"),
        ("deep nesting", item.replace('"instruments": ["msi"]',
                                      '"instruments": ' + "[" * 70 + "]" * 70), "error"),
        ("not an object", "[1, 2]", "error"),
        ("a Catalog", json.dumps({"type": "Catalog", "id": "c", "description": "d",
                                  "links": []}), True),
    ]


@pytest.mark.parametrize("name,text,fast", _raw_forms(), ids=[f[0] for f in _raw_forms()])
def test_index_reads_texts_as_the_reference(tmp_path, name, text, fast):
    path = _write(tmp_path / "c.json", None, text)
    try:
        got = stac.items(path)
    except stac.StacError as e:
        got = e
    w = stac._Walk(None, stac.Limits())
    try:
        with open(path, "rb") as f:
            w.document(stac._parse(f.read(), stac._shown(path), w.limits), path, ())
        ref = list(w.result())
    except stac.StacError as e:
        ref = e
    if fast == "error":
        assert isinstance(got, stac.StacError) and isinstance(ref, stac.StacError), (got, ref)
        assert str(got) == str(ref)
        return
    assert not isinstance(got, Exception), got
    assert list(got) == ref
    if name != "a Catalog":
        assert (got._idx is not None) == fast, name


def test_relative_hrefs_and_remote_rules(tmp_path):
    """Relative hrefs are joined to the document's own location (a local
    folder or a file:// URL); a remote document may not name local files."""
    path = _write(tmp_path / "sub" / "c.json" if os.makedirs(tmp_path / "sub") is None
                  else None, [base_item(0, rel=True), base_item(1)])
    its = stac.items(path)
    assert its._idx is not None
    assert list(its) == _reference(path)
    assert its[0].assets["B04"].href == str(tmp_path / "sub" / "data" / "0_B04.tif")
    assert its.select(["B04"]).images()[0] == str(tmp_path / "sub" / "data" / "0_B04.tif")
    url = "file://" + path
    its = stac.items(url)
    assert its[0].assets["B04"].href == "file://" + str(tmp_path / "sub" / "data" / "0_B04.tif")


def test_search_sorted_select_agree(tmp_path):
    """The index's search, sorted and select give what the same calls give
    over a list of the reference's items (in the same order)."""
    rng = np.random.default_rng(5)
    feats = []
    for i in range(300):
        d = base_item(i, "1.1" if i % 2 else "1.0")
        lon = float(rng.uniform(-179.9, 179.9))
        w = float(rng.uniform(0.1, 3.0))
        east = lon + w if lon + w <= 180 else lon + w - 360
        d["bbox"] = [lon, float(rng.uniform(-60, 50)), east, 0.0]
        d["bbox"][3] = d["bbox"][1] + float(rng.uniform(0.1, 3))
        if i % 7 == 0:
            del d["bbox"]
        if i % 5 == 0:
            del d[P]["eo:cloud_cover"]
        if i % 11 == 0:
            d[P]["datetime"] = None
            d[P]["start_datetime"] = "2024-0%d-01T00:00:00+02:00" % (1 + i % 9)
            d[P]["end_datetime"] = "2024-0%d-15T00:00:00Z" % (1 + i % 9)
        if i % 13 == 0:   # ties in time
            d[P]["datetime"] = "2024-06-01T00:00:00Z"
        if i == 7:        # an empty common name names nothing
            d[A]["extra"] = {"href": "https://x/e.tif", "bands": [{"eo:common_name": ""}]}
        if i % 17 == 0:   # an item whose only red is by key name
            d[A]["red"] = d[A].pop("B04")
            d[A]["red"].pop("bands", None)
            d[A]["red"].pop("eo:bands", None)
        feats.append(d)
    path = _write(tmp_path / "c.json", feats)
    fast = stac.items(path)
    slow = stac.Items(_reference(path))
    assert fast._idx is not None and slow._idx is None
    assert list(fast) == list(slow)
    for bbox in ([10, -20, 60, 30], [170, -70, -170, 70], [-180, -90, 180, 90], None,
                 [185, -10, 175, 10]):
        for when in ("2024-05-01/2024-05-20", "../2024-03-01", "2024-06-01", None):
            for mc in (None, 30.0, float("nan")):
                a = fast.search(bbox=bbox, datetime=when, max_cloud_cover=mc)
                b = slow.search(bbox=bbox, datetime=when, max_cloud_cover=mc)
                assert [i.id for i in a] == [i.id for i in b], (bbox, when, mc)
                # on a view (searched again, sorted) as on the whole
                assert [i.id for i in a.sorted("clear")] == [i.id for i in b.sorted("clear")]
    for by in ("recent", "clear"):
        assert [i.id for i in fast.sorted(by)] == [i.id for i in slow.sorted(by)]
    key = lambda i: (i.collection, -(i.cloud_cover or 0))  # noqa: E731
    assert [i.id for i in fast.sorted(key)] == [i.id for i in slow.sorted(key)]
    sub = fast.sorted("clear")[5:200:3]
    ssub = slow.sorted("clear")[5:200:3]
    assert [i.id for i in sub] == [i.id for i in ssub]
    for names, missing in ((["red", "nir"], "skip"), (["B02", "thumbnail"], "error")):
        a = sub.select(names, missing=missing)
        b = ssub.select(names, missing=missing)
        assert a.images() == b.images() and a.layers() == b.layers()
        assert [i.id for i in a.items] == [i.id for i in b.items]
        assert [list(r) for r in a.assets] == [list(r) for r in b.assets]
        assert a.hrefs("blue") == b.hrefs("blue")
        for odd in ("", "blue\x00x"):
            with pytest.raises(stac.StacError, match="no item has these assets"):
                fast.select([odd], missing="skip")
            with pytest.raises(stac.StacError, match="no item has these assets"):
                slow.select([odd], missing="skip")
            with pytest.raises(stac.StacError) as ea:
                a.hrefs(odd)
            with pytest.raises(stac.StacError) as eb:
                b.hrefs(odd)
            assert str(ea.value) == str(eb.value)
        assert a.grids() == b.grids()
        assert (a.stac_grids, a.header_grids) == (b.stac_grids, b.header_grids)
    with pytest.raises(stac.StacError, match=r"item 'item-0': no asset with key or "
                       r"common name 'swir16'") as e1:
        fast.select(["nir", "swir16"])
    with pytest.raises(stac.StacError) as e2:
        slow.select(["nir", "swir16"])
    assert str(e1.value) == str(e2.value)
    # An ambiguous common name: two GeoTIFF assets carry "red".
    feats[3][A]["B04b"] = copy.deepcopy(feats[3][A]["B04"])
    path2 = _write(tmp_path / "d.json", feats)
    with pytest.raises(stac.StacError, match="common name 'red' is the band of several"):
        stac.items(path2).select(["red"], missing="skip")


def test_refusals_of_the_c_api():
    """What items() never hands the index but its API takes: a self link
    of an unsupported scheme is no base for a local-looking href, and an
    integer past 64 bits is not saturated."""
    from cogfeed import _cogfeed
    lim = (100, 100, 100, 100, 64, (1 << 63) - 1)
    d = base_item(0)
    d["links"] = [{"rel": "self", "href": "ftp://host/items/0.json"}]
    d[A]["B04"]["href"] = "/etc/passwd"
    ix = _cogfeed._StacIndex()
    with pytest.raises(_cogfeed.UnsupportedError, match="unsupported scheme"):
        ix.add(json.dumps(d).encode(), None, lim)
    text = json.dumps(base_item(0)).replace('"proj:shape": [10980, 10980]',
                                            '"proj:shape": [9300000000000000000, 1]', 1)
    with pytest.raises(_cogfeed.UnsupportedError, match="beyond 64 bits"):
        ix.add(text.encode(), "/c.json", lim)
    assert ix.count() == 0
    with pytest.raises(stac.StacError, match="out of range"):
        stac.item_from_dict(json.loads(text), href="/c.json",
                            limits=stac.Limits(max_side=(1 << 63) - 1))


def test_large_collection_memory_map(tmp_path):
    """A collection bigger than the memory-map step (16 MiB) is read whole
    and right, its pages let go as the parser passes them (items() reads
    local files through cf_stac_add_file)."""
    n = 16000
    feats = [base_item(i) for i in range(n)]
    path = _write(tmp_path / "big.json", feats)
    assert os.path.getsize(path) > 24 << 20
    its = stac.items(path, limits=stac.Limits(max_bytes=1 << 30))
    assert its._idx is not None and len(its) == n
    for k in (0, 1, n // 2, n - 1):
        assert its[k] == stac.item_from_dict(feats[k], href=path,
                                             where="%s: features[%d]" % (path, k))
    with pytest.raises(stac.StacError, match="16000 features, more than the 100 items allowed"):
        stac.items(path, limits=stac.Limits(max_bytes=1 << 30, max_items=100))


def test_items_and_selections_pickle(tmp_path):
    """Items and selections on the index pickle as the lists they stand
    for (DataLoader workers, multiprocessing)."""
    import pickle
    its = stac.items(_write(tmp_path / "p.json", [base_item(0), base_item(1, rel=True)]))
    assert its._idx is not None
    back = pickle.loads(pickle.dumps(its))
    assert list(back) == list(its) and back._idx is None
    sel = its.select(["red", "nir"])
    sb = pickle.loads(pickle.dumps(sel))
    assert (sb.images(), sb.layers(), list(sb.items)) == (sel.images(), sel.layers(),
                                                          list(sel.items))


def test_time_of_items(tmp_path):
    """Dates with offsets are compared as instants (UTC)."""
    a, b = base_item(0), base_item(1)
    a[P]["datetime"] = "2024-05-01T23:30:00-02:00"   # 2024-05-02T01:30Z
    b[P]["datetime"] = "2024-05-02T01:00:00Z"
    its = stac.items(_write(tmp_path / "t.json", [a, b]))
    assert [i.id for i in its.sorted("recent")] == ["item-0", "item-1"]
    assert [i.id for i in its.search(datetime="2024-05-02")] == ["item-0", "item-1"]
    assert [i.id for i in its.search(datetime=(None, dt.datetime(2024, 5, 2, 1, 15,
                                                                  tzinfo=dt.timezone.utc)))] \
        == ["item-1"]


def _parquet_reference(path):
    import pyarrow.parquet as pq
    rows = pq.read_table(path).to_pylist()
    return [stac._row_item(r, path, "%s: row %d" % (path, i), stac.Limits())
            for i, r in enumerate(rows)]


def test_geoparquet_rows_read_as_the_reference(tmp_path):
    """STAC GeoParquet (stac-geoparquet's layout) through the index: each
    row as its item's JSON, in C, batch by batch (8192 rows), equal to the
    reference's reading of pyarrow's rows; a batch the index refuses (a
    NaN) is read by the reference; an error names the row."""
    pytest.importorskip("pyarrow")
    sga = pytest.importorskip("stac_geoparquet.arrow")
    feats = []
    for i in range(9000):
        d = base_item(i, "1.1" if i % 3 else "1.0", rel=(i % 5 == 0))
        del d[P]["s2:nested"]      # a list of mixed types: not a Parquet column
        if i % 7 == 0:
            del d[P]["eo:cloud_cover"]          # a null in the union schema
        if i % 11 == 0:
            d[A]["extra"] = {"href": "https://x/%d.tif" % i, "roles": ["data"]}
        if i == 8500:
            d[P]["datetime"] = "2024-05-01T10:00:00.123456+02:00"
        feats.append(d)
    path = str(tmp_path / "items.parquet")
    sga.to_parquet(sga.parse_stac_items_to_arrow(feats), path)
    got = stac.items(path)
    assert got._idx is not None and len(got) == 9000
    ref = _parquet_reference(path)
    for k in list(range(0, 9000, 97)) + [8191, 8192, 8500, 8999]:
        assert got[k] == ref[k], k
    assert got.select(["red", "nir"]).images() == stac.Items(ref).select(["red", "nir"]).images()
    assert got[8192].assets["B04"].where.endswith("items.parquet: row 8192")
    # A NaN in the second batch: that batch is the reference's.
    feats[8300][P]["score"] = float("nan")
    for f in feats:
        f[P].setdefault("score", 1.5)
    sga.to_parquet(sga.parse_stac_items_to_arrow(feats), path)
    got = stac.items(path)
    assert got._idx is None and len(got) == 9000
    ref = _parquet_reference(path)
    assert [got[k] for k in (0, 8191, 8192, 8299, 8999)] == \
        [ref[k] for k in (0, 8191, 8192, 8299, 8999)]
    assert np.isnan(got[8300].properties["score"])
    # An all-null column (inferred as Arrow's null type) is no field.
    for f in feats:
        f[P]["score"] = 1.5
        f[A]["B02"]["type"] = None
    sga.to_parquet(sga.parse_stac_items_to_arrow(feats), path)
    got = stac.items(path)
    assert got._idx is not None
    assert [got[k] for k in (0, 8192, 8999)] == [_parquet_reference(path)[k]
                                                 for k in (0, 8192, 8999)]
    # A row without a date: the reference's error, naming it.
    feats[8300][P]["score"] = 2.0
    feats[8400][P]["datetime"] = None
    sga.to_parquet(sga.parse_stac_items_to_arrow(feats), path)
    with pytest.raises(stac.StacError, match=r"items.parquet: row 8400: item 'item-8400': "
                       "neither datetime nor start_datetime"):
        stac.items(path)


def test_geoparquet_geometries_of_either_byte_order(tmp_path):
    """WKB geometries (Point, Polygon, MultiPolygon; little- and big-endian,
    ISO Z) read by the index as the reference reads them."""
    import struct
    pytest.importorskip("pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq
    sga = pytest.importorskip("stac_geoparquet.arrow")

    def wkb(order, kind, body):
        return struct.pack(order + "I", kind).join([b"\x01" if order == "<" else b"\x00", b""]) \
            + body

    def pts(order, xy):
        return struct.pack(order + "I", len(xy)) + b"".join(struct.pack(order + "dd", *p) for p in xy)
    ring = [(12.0, 45.0), (13.5, 45.0), (13.5, 46.25), (12.0, 45.0)]
    geoms = []
    for order in "<>":
        poly = wkb(order, 3, struct.pack(order + "I", 1) + pts(order, ring))
        geoms += [wkb(order, 1, struct.pack(order + "dd", 12.25, -45.5)), poly,
                  wkb(order, 6, struct.pack(order + "I", 2) + poly + poly),
                  wkb(order, 1001, struct.pack(order + "ddd", 1.0, 2.0, 3.0))]
    feats = [base_item(i, "1.1") for i in range(len(geoms))]
    for f in feats:
        del f[P]["s2:nested"]
    table = sga.parse_stac_items_to_arrow(feats)
    if isinstance(table, pa.RecordBatchReader):
        table = table.read_all()
    col = table.schema.get_field_index("geometry")
    table = table.set_column(col, "geometry", pa.array(geoms, pa.binary()))
    path = str(tmp_path / "g.parquet")
    pq.write_table(table, path)
    got = stac.items(path)
    assert got._idx is not None and len(got) == len(geoms)
    ref = _parquet_reference(path)
    for k in range(len(geoms)):
        assert got[k] == ref[k], k
    assert got[4] == ref[4] and got[1].geometry == got[5].geometry  # the same either way

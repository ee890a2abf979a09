"""A local STAC catalog built at test time on `cogfeed synth`'s scenes:
per-band COGs (B02 blue, B03 green, B04 red, B08 nir, and a uint8 land
cover), items with the projection, raster and eo extensions (STAC 1.0
eo:bands + raster:bands on some, STAC 1.1 bands on others), several dates,
two UTM zones (33N, 34N), overlapping footprints, one scene near 180
degrees (UTM 60N), and one item without projection fields (the header
fallback).  Layout, all hrefs relative so that the same tree works from
disk and through the test nginx:

    ROOT/catalog.json                      child -> sentinel/collection.json
    ROOT/sentinel/collection.json          item  -> items/ID.json
    ROOT/sentinel/items/ID.json            assets -> ../../data/ID_BAND.tif
    ROOT/search.json                       the same items as a FeatureCollection
    ROOT/data/ID_BAND.tif

No binary file is committed: make(ROOT) writes everything.
"""
import json
import os

import numpy as np

from cogfeed.tools.synth import BANDS, make_scene

SIZE = 256
PIXEL = 10.0
COMMON = {"B02": "blue", "B03": "green", "B04": "red", "B08": "nir"}

#: id, EPSG, upper-left x, y, date, cloud cover, style of the metadata
SCENES = [
    ("s33-a", 32633, 500000.0, 5000000.0, "2024-05-01T10:00:00Z", 10.0, "1.1"),
    # Overlaps s33-a by half its width, a month later.
    ("s33-b", 32633, 501280.0, 5000000.0, "2024-06-01T10:00:00Z", 55.5, "1.0"),
    ("s34-a", 32634, 300000.0, 5000000.0, "2024-05-15T10:00:00Z", 20.0, "1.0"),
    # UTM 60N at 65 N, some 140 km east of 177 E: just west of 180.
    ("s60-am", 32660, 638000.0, 7210000.0, "2024-07-01T00:00:00Z", 0.0, "1.1"),
    # No projection fields: its grid comes from the header.
    ("s33-noproj", 32633, 498720.0, 5001280.0, "2024-05-20T10:00:00Z", 5.0, "none"),
]


def write_cog(path, arr, epsg, gt, nodata=None):
    """arr (bands, H, W) as a COG through the GDAL of rasterio's wheel."""
    import rasterio
    import rasterio.shutil
    from rasterio.io import MemoryFile
    from rasterio.transform import Affine
    b, h, w = arr.shape
    with MemoryFile() as mf:
        with mf.open(driver="GTiff", width=w, height=h, count=b,
                     dtype=arr.dtype.name, crs="EPSG:%d" % epsg,
                     transform=Affine.from_gdal(*gt), nodata=nodata) as m:
            m.write(arr)
        with mf.open() as m:
            rasterio.shutil.copy(m, path, driver="COG", BLOCKSIZE=128,
                                 COMPRESS="DEFLATE", OVERVIEWS="NONE")
    return path


def footprint(epsg, gt):
    """(geometry, bbox) in lon/lat of the scene's four corners."""
    from rasterio.warp import transform
    x0, y0 = gt[0], gt[3]
    x1, y1 = x0 + SIZE * PIXEL, y0 - SIZE * PIXEL
    xs, ys = transform("EPSG:%d" % epsg, "EPSG:4326", [x0, x1, x1, x0],
                       [y0, y0, y1, y1])
    ring = [[round(x, 7), round(y, 7)] for x, y in zip(xs, ys)]
    ring.append(ring[0])
    bbox = [min(xs), min(ys), max(xs), max(ys)]
    return {"type": "Polygon", "coordinates": [ring]}, bbox


def item_dict(sid, epsg, x0, y0, date, cloud, style, data_rel):
    gt = (x0, PIXEL, 0.0, y0, 0.0, -PIXEL)
    geom, bbox = footprint(epsg, gt)
    props = {"datetime": date, "eo:cloud_cover": cloud, "platform": "synth"}
    ext = ["https://stac-extensions.github.io/eo/v1.1.0/schema.json",
           "https://stac-extensions.github.io/raster/v1.1.0/schema.json"]
    proj = {}
    if style != "none":
        ext.append("https://stac-extensions.github.io/projection/v2.0.0/schema.json")
        if style == "1.1":
            proj["proj:code"] = "EPSG:%d" % epsg
        else:
            proj["proj:epsg"] = epsg
        tr = [PIXEL, 0.0, x0, 0.0, -PIXEL, y0]
        if sid == "s34-a":
            tr += [0.0, 0.0, 1.0]   # the 9-number form
        proj.update({"proj:transform": tr, "proj:shape": [SIZE, SIZE],
                     "proj:bbox": [x0, y0 - SIZE * PIXEL, x0 + SIZE * PIXEL, y0]})
    # Grid fields at the item level for one style, per asset for the other
    # (asset fields override item fields).
    if style == "1.0":
        props.update(proj)
    assets = {}
    for band in BANDS:
        a = {"href": "%s/%s_%s.tif" % (data_rel, sid, band),
             "type": "image/tiff; application=geotiff; profile=cloud-optimized",
             "roles": ["data"]}
        if style == "1.1":
            a.update(proj)
            a["bands"] = [{"name": band, "eo:common_name": COMMON[band],
                           "nodata": 0, "data_type": "uint16",
                           "raster:scale": 0.0001, "raster:offset": 0.0}]
        else:
            a["eo:bands"] = [{"name": band, "common_name": COMMON[band]}]
            a["raster:bands"] = [{"nodata": 0, "data_type": "uint16",
                                  "scale": 0.0001, "offset": 0.0}]
        assets[band] = a
    lc = {"href": "%s/%s_landcover.tif" % (data_rel, sid),
          "type": "image/tiff; application=geotiff", "roles": ["labels"],
          "raster:bands": [{"data_type": "uint8"}]}
    if style == "1.1":
        lc.update(proj)
    assets["landcover"] = lc
    assets["thumbnail"] = {"href": "%s/%s.png" % (data_rel, sid),
                           "type": "image/png", "roles": ["thumbnail"]}
    return {
        "type": "Feature", "stac_version": "1.1.0", "stac_extensions": ext,
        "id": sid, "collection": "synth", "geometry": geom, "bbox": bbox,
        "properties": props, "assets": assets,
        "links": [{"rel": "collection", "href": "../collection.json"},
                  {"rel": "root", "href": "../../catalog.json"}],
    }


def make(root):
    """Write the catalog under root; returns {"root", "catalog",
    "collection", "search", "items": {id: item path}, "data": {id: {band:
    path}}, "arrays": {id: (4, H, W) uint16}}."""
    data = os.path.join(root, "data")
    items_dir = os.path.join(root, "sentinel", "items")
    os.makedirs(data, exist_ok=True)
    os.makedirs(items_dir, exist_ok=True)
    out = {"root": root, "items": {}, "data": {}, "arrays": {}}
    feats = []
    for i, (sid, epsg, x0, y0, date, cloud, style) in enumerate(SCENES):
        img, cls, _ = make_scene(7, i, SIZE)
        gt = (x0, PIXEL, 0.0, y0, 0.0, -PIXEL)
        paths = {}
        for b, band in enumerate(BANDS):
            paths[band] = write_cog(os.path.join(data, "%s_%s.tif" % (sid, band)),
                                    img[b:b + 1], epsg, gt, nodata=0)
        paths["landcover"] = write_cog(os.path.join(data, "%s_landcover.tif" % sid),
                                       cls[None].astype(np.uint8), epsg, gt)
        out["data"][sid] = paths
        out["arrays"][sid] = img
        d = item_dict(sid, epsg, x0, y0, date, cloud, style, "../../data")
        p = os.path.join(items_dir, sid + ".json")
        with open(p, "w") as f:
            json.dump(d, f, indent=1)
        out["items"][sid] = p
        # In the search result the items sit at ROOT: hrefs relative to it.
        f2 = item_dict(sid, epsg, x0, y0, date, cloud, style, "./data")
        feats.append(f2)
    col = {
        "type": "Collection", "stac_version": "1.1.0", "id": "synth",
        "description": "cogfeed synth scenes", "license": "CC0-1.0",
        "extent": {"spatial": {"bbox": [[-180, -90, 180, 90]]},
                   "temporal": {"interval": [["2024-05-01T00:00:00Z", None]]}},
        "links": [{"rel": "root", "href": "../catalog.json"},
                  {"rel": "parent", "href": "../catalog.json"}] +
                 [{"rel": "item", "href": "./items/%s.json" % s[0]}
                  for s in SCENES],
    }
    out["collection"] = os.path.join(root, "sentinel", "collection.json")
    with open(out["collection"], "w") as f:
        json.dump(col, f, indent=1)
    cat = {"type": "Catalog", "stac_version": "1.1.0", "id": "root",
           "description": "test catalog",
           "links": [{"rel": "self", "href": "./catalog.json"},
                     {"rel": "child", "href": "./sentinel/collection.json"}]}
    out["catalog"] = os.path.join(root, "catalog.json")
    with open(out["catalog"], "w") as f:
        json.dump(cat, f, indent=1)
    out["search"] = os.path.join(root, "search.json")
    with open(out["search"], "w") as f:
        json.dump({"type": "FeatureCollection", "features": feats}, f)
    return out


def write_json(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def item_copy(cat, sid, path, edit):
    """Item sid of the catalog cat (make()'s) written alone at path, its
    hrefs made absolute (the fixture's files), after edit(item dict)."""
    with open(cat["items"][sid]) as f:
        d = json.load(f)
    for a in d["assets"].values():
        if a["href"].startswith("../"):
            a["href"] = os.path.join(cat["root"], "data", os.path.basename(a["href"]))
    edit(d)
    return write_json(path, d)

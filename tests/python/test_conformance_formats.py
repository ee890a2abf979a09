"""Conformance beyond the COG matrix: the TIFF variants GDAL reads (issue 19).

Fixtures come from format_fixtures.py (one small file per class, made at
test time).  For each "read" fixture cogfeed must give what GDAL gives, bit
for bit: band count, dtype, size, overview levels, and every window of a
set crossing tile edges and the image's edges, with band subsets, at every
level; the dataset's default metadata too.  Fixtures marked raw are also
read with raw_color=True and compared with GDAL's GTIFF_RAW: reading.
"refuse" fixtures must fail at open, naming the feature (and `cogfeed info`
must exit 1 with the same message).  Files GDAL tolerates must open, and
report what they tolerated in Cog.warnings.

GDAL is the one conformance.py uses: rasterio's (3.10), except for JPEG
files and complex integers of 32 bits, which Debian's GDAL command-line
tools (3.6) read: rasterio's libjpeg 9 decodes differently from
libjpeg-turbo, and rasterio reads CInt32 as complex64, losing the low bits
that GDAL's ReadAsArray keeps in complex128 (docs/conformance.md).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import rasterio
from rasterio.errors import RasterioIOError
from rasterio.windows import Window

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conformance as C  # noqa: E402
import format_fixtures as F  # noqa: E402

import cogfeed  # noqa: E402

READ = [f.name for f in F.FIXTURES if f.expect == "read"]
REFUSE = [f.name for f in F.FIXTURES if f.expect == "refuse"]
RAW = [f.name for f in F.FIXTURES if f.raw and f.expect == "read"]
COGFEED = os.environ.get("COGFEED_BIN", "cogfeed")


@pytest.fixture(scope="module")
def paths():
    return F.generate_all()


def gdal_open(path):
    """GDAL's dataset (rasterio; a file whose IFD chain breaks after the
    first IFD opens, GDAL only logs the error)."""
    return rasterio.open(path)


def _gdal_type(ds):
    """GDAL's name of band 1's type (Debian's gdalinfo): rasterio names
    CInt32 and CFloat32 alike (complex64)."""
    r = subprocess.run(["gdalinfo", "-json", "--config", "GDAL_PAM_ENABLED", "NO", ds.name],
                       capture_output=True, text=True, check=True, timeout=120)
    return json.loads(r.stdout)["bands"][0]["type"]


def np_dtype(ds):
    """NumPy type of GDAL's ReadAsArray (complex integers widened)."""
    if ds.dtypes[0] == "complex_int16":
        return np.dtype("complex64")
    if ds.dtypes[0] == "complex64" and _gdal_type(ds) == "CInt32":
        return np.dtype("complex128")
    return C.numpy_dtype(ds)


def gdal_read(ds, window, bands=None, level=0):
    """GDAL's pixels of the window, nodata (or 0) outside the image."""
    dt = np_dtype(ds)
    ot = "CFloat64" if dt == np.complex128 and ds.dtypes[0] == "complex64" else None
    return C.gdal_read(ds, window, bands, level, dtype=dt, debian_ot=ot)


def compare(cog, ds, name):
    """Every mismatch of cog against GDAL's ds over the standard windows of
    every level; a window GDAL cannot read must fail in cogfeed too."""
    failures = []
    nlev = 1 + C.overview_count(ds)
    for level in range(nlev):
        W, H = C.level_size(ds, level)
        tw, th = C.block_size(ds, level)
        if level == 0:
            wins = C.windows_for(W, H, tw, th)
            sets = C.band_sets(ds.count)
        else:
            wins = C.level_windows(W, H, tw, th)
            sets = [None, [ds.count]]
        for wname, win in wins:
            for bands in sets:
                try:
                    exp = gdal_read(ds, win, bands, level)
                except RasterioIOError as e:
                    try:
                        cog.read(window=win, bands=bands, level=level)
                        failures.append("%s L%d %s %s: GDAL fails (%s), cogfeed reads" %
                                        (name, level, wname, win, e))
                    except cogfeed.Error:
                        pass
                    continue
                try:
                    got = cog.read(window=win, bands=bands, level=level)
                except cogfeed.Error as e:
                    failures.append("%s L%d %s %s bands=%s: raised %s" %
                                    (name, level, wname, win, bands, e))
                    continue
                if got.shape != exp.shape or got.dtype != exp.dtype or \
                        got.tobytes() != exp.tobytes():
                    bad = "shape/dtype %s %s vs %s %s" % (got.shape, got.dtype, exp.shape,
                                                          exp.dtype)
                    if got.shape == exp.shape and got.dtype == exp.dtype:
                        g = got.view(np.uint8).reshape(got.shape + (-1,))
                        e2 = exp.view(np.uint8).reshape(exp.shape + (-1,))
                        d = np.any(g != e2, axis=-1)
                        i = tuple(int(v) for v in np.argwhere(d)[0])
                        bad = "%d samples differ, first %s: %r vs %r" % (
                            int(d.sum()), i, got[i], exp[i])
                    failures.append("%s L%d %s %s bands=%s: %s" %
                                    (name, level, wname, win, bands, bad))
    return failures


def check_structure(cog, ds):
    assert (cog.width, cog.height, cog.count) == (ds.width, ds.height, ds.count)
    assert np.dtype(cog.dtype) == np_dtype(ds)
    assert [tuple(o) for o in cog.overviews] == C.overview_sizes(ds)


@pytest.mark.parametrize("name", READ)
def test_reads_like_gdal(paths, name):
    ds = gdal_open(paths[name])
    cog = cogfeed.open(paths[name])
    check_structure(cog, ds)
    failures = compare(cog, ds, name)
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("name", READ)
def test_metadata_like_gdal(paths, name):
    """The dataset's default-domain metadata, and per band: description,
    unit, nodata, scale, offset and default-domain metadata."""
    ds = gdal_open(paths[name])
    cog = cogfeed.open(paths[name])
    assert cog.metadata == ds.tags(), name
    for b in range(1, ds.count + 1):
        assert cog.descriptions[b - 1] == (ds.descriptions[b - 1] or "")
        assert cog.units[b - 1] == (ds.units[b - 1] or "")
        nd = ds.nodatavals[b - 1]
        got = cog.nodatas[b - 1]
        assert (got is None) == (nd is None)
        if nd is not None:
            assert got == nd or (np.isnan(got) and np.isnan(nd))
        # rasterio gives GDAL's scale and offset, 1 and 0 where unset
        assert cog.scales[b - 1] == ds.scales[b - 1]
        assert cog.offsets[b - 1] == ds.offsets[b - 1]
        assert cog.get_metadata(band=b) == ds.tags(b)
    for dom in ds.tag_namespaces() or []:
        if dom in ("", "IMAGE_STRUCTURE", "DERIVED_SUBDATASETS", "SUBDATASETS"):
            continue
        assert cog.get_metadata(domain=dom) == ds.tags(ns=dom), dom


@pytest.mark.parametrize("name", RAW)
def test_raw_color_like_gdal_raw(paths, name):
    """raw_color=True against GDAL's GTIFF_RAW: (subsampled YCbCr, which
    GDAL cannot give raw, against its data units spread per pixel)."""
    path = paths[name]
    cog = cogfeed.open(path, raw_color=True)
    if F.FIXTURES_BY_NAME[name].cls == "YCbCr":
        _check_ycbcr_raw(cog, path)
        return
    ds = gdal_open("GTIFF_RAW:" + path)
    assert (cog.width, cog.height, cog.count) == (ds.width, ds.height, ds.count)
    assert np.dtype(cog.dtype) == np_dtype(ds)
    failures = compare_level0(cog, ds, name + " (raw)")
    # GDAL opens the overviews of a GTIFF_RAW: file converted (they do not
    # inherit the flag): each is compared with its own IFD opened raw.
    for level in range(1, len(cog.overviews) + 1):
        ods = gdal_open("GTIFF_RAW:GTIFF_DIR:%d:%s" % (level + 1, path))
        for wname, win in C.level_windows(ods.width, ods.height, 16, 16):
            exp = gdal_read(ods, win)
            got = cog.read(window=win, level=level)
            if got.tobytes() != exp.tobytes():
                failures.append("%s raw L%d %s differs" % (name, level, wname))
    assert not failures, "\n".join(failures[:20])


def compare_level0(cog, ds, name):
    tw, th = C.block_size(ds)
    failures = []
    for wname, win in C.windows_for(ds.width, ds.height, tw, th):
        for bands in C.band_sets(ds.count):
            exp = gdal_read(ds, win, bands)
            got = cog.read(window=win, bands=bands)
            if got.tobytes() != exp.tobytes() or got.dtype != exp.dtype:
                failures.append("%s %s %s bands=%s differs" % (name, wname, win, bands))
    return failures


def _check_ycbcr_raw(cog, path):
    """Y per pixel, Cb and Cr of its block: from the stored data units."""
    _, ifds = F.read_tiff(path)
    d = ifds[0]
    sh, sv = d.get(530)
    tiled = 322 in d.tags
    cw = d.get(322) if tiled else cog.width
    ch = d.get(323) if tiled else d.get(278)
    across = -(-cog.width // cw)
    comp = d.get(259)
    exp = np.zeros((3, cog.height, cog.width), np.uint8)
    for k, chunk in enumerate(d.chunks):
        cx, cy = k % across, k // across
        rows = ch if tiled else min(ch, cog.height - cy * ch)
        bw = -(-cw // sh)
        if comp == 5 or comp == 8:
            chunk = _gdal_decompress(chunk, comp, bw * (-(-rows // sv)) * (sh * sv + 2))
        u = np.frombuffer(chunk, np.uint8)[:bw * (-(-rows // sv)) * (sh * sv + 2)]
        u = u.reshape(-1, bw, sh * sv + 2)
        for y in range(rows):
            for x in range(cw):
                X, Y = cx * cw + x, cy * ch + y
                if X >= cog.width or Y >= cog.height:
                    continue
                unit = u[y // sv, x // sh]
                exp[:, Y, X] = (unit[(y % sv) * sh + x % sh], unit[sh * sv], unit[sh * sv + 1])
    got = cog.read()
    assert got.tobytes() == exp.tobytes()


def _gdal_decompress(chunk, comp, size):
    """A stream decompressed by GDAL (libtiff): as a 1-row strip of `size`
    bytes."""
    if comp == 8:
        import zlib
        return zlib.decompress(chunk)
    import tempfile
    tmp = tempfile.mktemp(suffix=".tif")
    try:
        F.write_tiff(tmp, [F.plain_ifd(size, 1, 8, [chunk], comp=5)])
        with rasterio.open(tmp) as ds:
            return ds.read(1, window=Window(0, 0, size, 1)).tobytes()
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@pytest.mark.parametrize("name", REFUSE)
def test_refused_at_open_by_name(paths, name):
    fx = F.FIXTURES_BY_NAME[name]
    with pytest.raises(cogfeed.Error) as ei:
        cogfeed.open(paths[name])
    assert fx.reason in str(ei.value), str(ei.value)
    assert os.path.basename(paths[name]) in str(ei.value)
    r = subprocess.run([COGFEED, "info", paths[name]], capture_output=True, text=True)
    assert r.returncode == 1 and fx.reason in r.stderr, r.stderr


def test_refusal_of_band_interleaved_cmyk_lifts_with_raw(paths):
    path = paths["cmyk_u8x4_band"]
    cog = cogfeed.open(path, raw_color=True)
    ds = gdal_open("GTIFF_RAW:" + path)
    check_structure(cog, ds)
    assert not compare(cog, ds, "cmyk_u8x4_band raw")


def test_ojpeg_reports_gdals_band_count(paths):
    """GDAL takes an old-style JPEG file without SamplesPerPixel as 3
    bands (it used to be reported as 1 band).  This one's strips are
    new-style JPEG streams whose tables sit in a JPEGTables tag, which
    old-style JPEG ignores: GDAL opens it and fails to read it; cogfeed
    refuses it at open, saying why."""
    ds = gdal_open(paths["ojpeg_no_spp"])
    assert ds.count == 3
    with pytest.raises(Exception):
        C.debian_gdal_read(paths["ojpeg_no_spp"])
    with pytest.raises(cogfeed.Error) as ei:
        cogfeed.open(paths["ojpeg_no_spp"])
    assert "OJPEG" in str(ei.value) and "quantization table 0" in str(ei.value)


@pytest.mark.parametrize("name", [n for n in REFUSE if n.startswith("ojpeg_")])
def test_ojpeg_refused_where_gdal_fails(paths, name):
    """The old-style JPEG layouts cogfeed refuses are ones Debian's GDAL
    (libtiff's tif_ojpeg.c) cannot read either."""
    with pytest.raises(Exception):
        C.debian_gdal_read(paths[name])


def test_ojpeg_truncated_strip_fails_naming_it(tmp_path):
    """A truncated old-style JPEG strip: GDAL warns and hands out gray
    pixels; cogfeed fails the read, naming the file and the strip."""
    for layout, rps, tile in (("tables", 16, "tile 4"), ("whole", None, "tile 0")):
        path = str(tmp_path / ("ojpeg_truncated_%s.tif" % layout))
        F.ojpeg_file((3, 70, 45), layout, rps=rps, bad="truncated")(path)
        cog = cogfeed.open(path)
        with pytest.raises(cogfeed.Error) as ei:
            cog.read()
        msg = str(ei.value)
        assert path in msg and tile in msg and "premature end" in msg, msg


def test_ojpeg_is_not_read_raw(paths):
    """GDAL's GTIFF_RAW: refuses old-style JPEG (libtiff reads it only
    through its RGBA interface); so does the raw option."""
    with pytest.raises(cogfeed.Error) as ei:
        cogfeed.open(paths["ojpeg_if_ycbcr22"], raw_color=True)
    assert "raw" in str(ei.value)


@pytest.mark.parametrize("name,words", [
    ("truncated", ["past the end", "tile"]),
    ("ifd_loop", ["loop", "IFD 3"]),
    ("ifd_past_eof", ["past end of file", "IFD 3"]),
    ("ifd_bad_trailing", ["no entries", "IFD 3"]),
])
def test_tolerated_problems_are_reported(paths, name, words):
    cog = cogfeed.open(paths[name])
    text = "\n".join(cog.warnings)
    for w in words:
        assert w in text, text
    r = subprocess.run([COGFEED, "info", "--json", paths[name]], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["warnings"] == cog.warnings
    r = subprocess.run([COGFEED, "info", paths[name]], capture_output=True, text=True)
    assert "Warning:" in r.stdout


def test_ccitt_codecs_named_as_gdal_names_them(paths):
    """`info` names the CCITT codecs as GDAL's COMPRESSION metadata does
    (they were UNKNOWN(2), (3) and (4))."""
    for name in ("ccittrle", "ccittfax3", "ccittfax4"):
        gdal = gdal_open(paths[name]).tags(ns="IMAGE_STRUCTURE")["COMPRESSION"]
        r = subprocess.run([COGFEED, "info", "--json", paths[name]], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["compression"] == gdal


def test_truncated_file_names_the_missing_tile(paths):
    cog = cogfeed.open(paths["truncated"])
    with pytest.raises(cogfeed.Error) as ei:
        cog.read(window=(cog.width - 10, cog.height - 10, 10, 10))
    assert "tile" in str(ei.value) and "outside the file" in str(ei.value)
    cog.read(window=(0, 0, 64, 64))  # an intact tile reads


def test_pages_not_read_are_not_checked(paths):
    """A page GDAL does not read as part of the image (subfile type 0 after
    the first IFD) may use anything; the image still opens and reads."""
    for name in ("page_with_jbig_not_read", "page_with_bits40_not_read"):
        ds = gdal_open(paths[name])
        cog = cogfeed.open(paths[name])
        assert len(cog.overviews) == C.overview_count(ds) == 1


def test_metadata_in_info_json(paths):
    r = subprocess.run([COGFEED, "info", "--json", paths["metadata_gdal"]], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    ds = gdal_open(paths["metadata_gdal"])
    assert j["datetime"] == "2024:05:06 07:08:09"
    assert j["metadata"][""] == ds.tags()
    for b, jb in enumerate(j["bands"], 1):
        assert jb["description"] == (ds.descriptions[b - 1] or "")
        assert jb["unit"] == (ds.units[b - 1] or "")
        assert jb["nodata"] == ds.nodatavals[b - 1]
        assert jb["metadata"].get("", {}) == ds.tags(b)
    cog = cogfeed.open(paths["metadata_gdal"])
    assert cog.datetime == "2024:05:06 07:08:09"
    r = subprocess.run([COGFEED, "info", paths["metadata_gdal"]], capture_output=True, text=True)
    assert "TIFFTAG_DATETIME=2024:05:06 07:08:09" in r.stdout
    assert "red & <edge> (m)" in r.stdout


def test_complex_read_as_numpy_complex(paths):
    """CInt16 reads as complex64 and CInt32 as complex128 (exactly), as
    GDAL's ReadAsArray gives them; the CLI writes the same to .npy."""
    for name, dt in (("cint16", np.complex64), ("cint32_lzw", np.complex128),
                     ("cfloat32_band", np.complex64), ("cfloat64_be", np.complex128)):
        cog = cogfeed.open(paths[name])
        assert np.dtype(cog.dtype) == dt
        a = cog.read(window=(3, 2, 20, 10))
        assert a.dtype == dt
        out = np.zeros_like(a)
        cog.read(window=(3, 2, 20, 10), out=out)
        assert out.tobytes() == a.tobytes()
        [m] = cogfeed.read_many([(cog, (3, 2, 20, 10))])
        assert m.tobytes() == a.tobytes()


def test_complex_cli_npy(paths, tmp_path):
    out = tmp_path / "c.npy"
    r = subprocess.run([COGFEED, "read", paths["cint16"], "--window", "0,0,30,20", "-o",
                        str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    a = np.load(out)
    ds = gdal_open(paths["cint16"])
    assert a.dtype == np.complex64
    assert a.tobytes() == gdal_read(ds, (0, 0, 30, 20)).tobytes()


def test_loader_refuses_complex(paths):
    with pytest.raises(cogfeed.Error) as ei:
        cogfeed.Loader([paths["cint16"]], patch_size=16, batch_size=2)
    assert "complex" in str(ei.value) and "Cog.read" in str(ei.value)


def test_fixture_list_covers_the_issue():
    """Every class of the issue has at least one fixture."""
    classes = {f.cls for f in F.FIXTURES}
    for c in ("CMYK", "CIELab", "ICCLab", "ITULab", "YCbCr", "FillOrder", "bits", "float16",
              "complex", "LZMA", "CCITT", "JPEG", "OJPEG", "tolerate", "refuse", "pages",
              "metadata"):
        assert c in classes, c
    names = set(F.FIXTURES_BY_NAME)
    for n in ("ccittrle", "ccittfax3", "ccittfax4", "cint16", "cint32_lzw", "cfloat32_band",
              "cfloat64_be", "deflate_trailing_bytes", "packbits_overrun",
              "tiles_in_stripoffsets", "truncated", "ifd_loop", "overviews_in_subifds"):
        assert n in names, n

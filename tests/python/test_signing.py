"""Hrefs signed while they are read (cf_io_options.sign): against Azurite,
which checks a SAS signature and its expiry (se=) on every request.

A signature that expires while a Loader runs must be renewed by the io
before its requests fail: the signing function is called when a file is
opened and again sign_margin_s before the signature expires.  The same
run with hrefs signed once up front (what cogfeed did before) fails with
403 once the token expires: that is the control that shows these tests
can fail.
"""

import datetime as dt
import json
import os
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
sys.path.insert(0, HERE)

import cogfeed  # noqa: E402
from cogfeed import stac  # noqa: E402

LIFE_S = 4  # the tokens' life: the runs below outlast it
H = W = 512


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for v in ("AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_ACCESS_KEY",
              "AZURE_STORAGE_CONNECTION_STRING"):
        monkeypatch.delenv(v, raising=False)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Two georeferenced uint16 COGs (red, nir) of one scene in Azurite,
    and their local copies."""
    from azurite import Azurite
    d = tmp_path_factory.mktemp("signed")
    yy, xx = np.mgrid[0:H, 0:W]
    files = {}
    for k, name in enumerate(("red", "nir")):
        a = ((xx * (k + 3) + yy * 7) % 50000 + 1).astype(np.uint16)[None]
        files[name] = write_utm(str(d / ("%s.tif" % name)), a)
    try:
        az = Azurite().start()
    except RuntimeError as e:
        pytest.skip("azurite not available: %s" % e)
    try:
        az.create_container("scenes")
        for name, p in files.items():
            az.put_file("scenes", "scene/%s.tif" % name, p)
        yield az, files
    finally:
        az.stop()


def write_utm(path, a):
    import rasterio.shutil
    from rasterio.io import MemoryFile
    from rasterio.transform import Affine
    prof = dict(driver="GTiff", width=W, height=H, count=1, dtype="uint16",
                crs="EPSG:32633", transform=Affine(10, 0, 500000, 0, -10, 4000000))
    with MemoryFile() as mf:
        with mf.open(**prof) as m:
            m.write(a)
        with mf.open() as m:
            rasterio.shutil.copy(m, path, driver="COG", COMPRESS="DEFLATE", BLOCKSIZE=256)
    return path


def short_lived(az, calls):
    """A signing function as a data provider's (Planetary Computer's
    sign()): a blob SAS valid for LIFE_S seconds, computed anew at each
    call."""
    def sign(href):
        calls.append(href)
        blob = href.split("/scenes/", 1)[1].split("?")[0]
        exp = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=LIFE_S)
        return href.split("?")[0] + "?" + az.sas("scenes", blob, expiry=exp)
    return sign


def item_doc(az):
    href = "%s/scenes/scene/%%s.tif" % az.endpoint
    return {
        "type": "Feature", "stac_version": "1.0.0", "id": "scene", "bbox": [14, 36, 15, 37],
        "geometry": {"type": "Polygon", "coordinates": [[[14, 36], [15, 36], [15, 37],
                                                          [14, 37], [14, 36]]]},
        "properties": {"datetime": "2026-06-01T10:00:00Z", "proj:epsg": 32633,
                       "proj:shape": [H, W],
                       "proj:transform": [10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0]},
        "assets": {b: {"href": href % b, "type": "image/tiff; application=geotiff"}
                   for b in ("red", "nir")},
        "links": []}


def catalog(az, tmp_path):
    p = tmp_path / "item.json"
    p.write_text(json.dumps(item_doc(az)))
    return stac.items(str(p))


def epoch(ld):
    return [(b["image"].copy(), [tuple(w) for w in b["windows"]]) for b in ld]


LOADER = dict(patch_size=64, batch_size=4, sampler="grid", cache_bytes=0, prefetch=2)


def test_loader_renews_signatures_while_it_runs(site, tmp_path):
    az, files = site
    calls = []
    sel = catalog(az, tmp_path).select(["red", "nir"], sign=short_lived(az, calls))
    ld = cogfeed.Loader(sel, io_options={"sign_margin_s": 1, "max_retries": 0}, **LOADER)
    ref = cogfeed.Loader([files["red"]], layers=[[files["nir"]]], **LOADER)
    try:
        assert len(calls) == 2                    # each asset, when opened
        want = epoch(ref)
        first = epoch(ld)
        time.sleep(LIFE_S + 1)                    # every signature has expired
        second = epoch(ld)
        for got in (first, second):
            assert len(got) == len(want) == 64 // 4
            for (a, wa), (b, wb) in zip(got, want):
                assert np.array_equal(a, b) and wa == wb
        assert len(calls) >= 4                    # signed again during the run
        assert all("?" not in c for c in calls)   # the catalog's hrefs, unsigned
    finally:
        ld.close()
        ref.close()


def test_hrefs_signed_once_fail_when_the_token_expires(site, tmp_path):
    # The control: the same run with the hrefs signed when handed out.
    az, files = site
    calls = []
    sel = catalog(az, tmp_path).select(["red", "nir"], sign=short_lived(az, calls))
    ld = cogfeed.Loader(sel.images(), layers=sel.layers(),
                        io_options={"max_retries": 0}, **LOADER)
    try:
        epoch(ld)
        time.sleep(LIFE_S + 1)
        with pytest.raises(cogfeed.Error) as e:
            epoch(ld)
        assert e.value.http_status == 403, str(e.value)
        assert "sig=" not in str(e.value)
    finally:
        ld.close()


def test_io_sign_renews_for_window_reads(site):
    az, files = site
    calls = []
    io = cogfeed.IO(sign=short_lived(az, calls), sign_margin_s=1, cache_bytes=-1,
                    max_retries=0)
    with cogfeed.open("%s/scenes/scene/red.tif" % az.endpoint, io=io) as c, \
            cogfeed.open(files["red"]) as l:
        a = c.read(window=(0, 0, 256, 256))
        time.sleep(LIFE_S + 1)
        b = c.read(window=(256, 256, 256, 256))
        assert np.array_equal(a, l.read(window=(0, 0, 256, 256)))
        assert np.array_equal(b, l.read(window=(256, 256, 256, 256)))
    assert len(calls) == 2


def test_a_short_token_is_not_signed_at_every_request(site):
    # sign_margin_s (300 s) longer than the token's life: renewed halfway
    # through its life instead, not before each request.
    az, files = site
    calls = []
    io = cogfeed.IO(sign=short_lived(az, calls), cache_bytes=-1, max_retries=0)
    with cogfeed.open("%s/scenes/scene/red.tif" % az.endpoint, io=io) as c:
        for y in range(0, H, 64):
            c.read(window=(0, y, W, 64))
    assert len(calls) == 1


def test_bad_signers_are_refused_naming_the_url(site):
    az, files = site
    url = "%s/scenes/scene/red.tif" % az.endpoint

    def elsewhere(h):
        return "http://127.0.0.1:9/other.tif?sig=x"

    def failing(h):
        raise RuntimeError("token service down")

    def expired(h):
        return h + "?" + az.sas("scenes", "scene/red.tif",
                                expiry=dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc))

    for fn, what in ((elsewhere, "not move the href"),
                     (failing, "RuntimeError: token service down"),
                     (expired, "expired")):
        with pytest.raises(cogfeed.Error) as e:
            cogfeed.open(url, io=cogfeed.IO(sign=fn))
        msg = str(e.value)
        assert what in msg and "/scenes/scene/red.tif" in msg, msg
        assert "signing the URL" in msg and "sig=" not in msg, msg
    with pytest.raises(TypeError, match="sign must be a callable"):
        cogfeed.IO(sign="not a function")


def test_signer_pickles_without_its_signatures(site):
    import pickle
    s = stac.Signer(_module_sign, margin_s=60)
    s("http://127.0.0.1:1/a.tif")
    t = pickle.loads(pickle.dumps(s))
    assert t.margin_s == 60 and t.calls == 0
    assert t("http://127.0.0.1:1/a.tif") == "http://127.0.0.1:1/a.tif?sig=1"


def _module_sign(h):
    return h + "?sig=1"


def test_load_signs_through_its_loaders(site, tmp_path):
    az, files = site
    calls = []
    its = catalog(az, tmp_path)
    grid = {"like": files["red"]}
    got = cogfeed.load(its, ["red", "nir"], grid=grid, sign=short_lived(az, calls))
    want = np.concatenate([cogfeed.load([files[b]], grid=grid).data for b in ("red", "nir")],
                          axis=1)
    assert np.array_equal(got.data, want) and calls
    with pytest.raises(cogfeed.Error) as e:      # the container is private
        cogfeed.load(its, ["red"], grid=grid)
    assert e.value.http_status in (401, 403, 404), str(e.value)


def test_a_failed_renewal_keeps_the_signature_still_valid(site):
    """A token service failing once (a 503 of its own) while the signature
    in use is still valid: the reads go on with it and the renewal is
    tried again; once a signature has expired, a failing signer fails the
    read, naming the URL and the signer's error."""
    az, files = site
    calls, fail = [], {2}
    good = short_lived(az, [])

    def sign(h):
        calls.append(h)
        if len(calls) in fail or (fail == {"all"} and len(calls) > 1):
            raise ConnectionError("token service: 503")
        return good(h)
    io = cogfeed.IO(sign=sign, sign_margin_s=2, cache_bytes=-1, max_retries=0)
    url = "%s/scenes/scene/red.tif" % az.endpoint
    with cogfeed.open(url, io=io) as c, cogfeed.open(files["red"]) as l:
        want = l.read(window=(0, 0, 64, 64))
        # Past the renewal, its retry, the first expiry.  The SAS states its
        # expiry in whole seconds (se=), so a token lives 3 to 4 s and is
        # renewed 1.5 to 2 s after it was signed: the last read comes 1 s
        # after the retry, before the new token is due (1.5 s let a read
        # that came late sign a fourth time, one CI run in ten).
        for wait in (2.5, 0.8, 1.0):
            time.sleep(wait)
            assert np.array_equal(c.read(window=(0, 0, 64, 64)), want)
    assert len(calls) == 3                  # the failure, then a renewal that worked
    fail.clear()
    fail.add("all")
    calls.clear()
    io = cogfeed.IO(sign=sign, sign_margin_s=2, cache_bytes=-1, max_retries=0)
    with cogfeed.open(url, io=io) as c:
        time.sleep(LIFE_S + 0.5)
        with pytest.raises(cogfeed.Error) as e:
            c.read(window=(0, 0, 64, 64))
    msg = str(e.value)
    assert "ConnectionError: token service: 503" in msg and "/scenes/scene/red.tif" in msg
    assert "sig=" not in msg


_COLLECTED_INSIDE_SIGN = r"""
import faulthandler, gc, sys, threading, time
faulthandler.dump_traceback_later(60, exit=True)
import cogfeed
url, sas = sys.argv[1], sys.argv[2]
dropped = []
def sign(h):
    if dropped:
        gc.collect()                      # runs the Loader's dealloc on this reader
    return (h + "?" + sas, time.time() + 1.0)
gc.disable()
ld = cogfeed.Loader([url], patch_size=16, batch_size=4, sampler="grid", cache_bytes=0,
                    prefetch=16, sign=sign, io_options={"max_retries": 0})
ld.cycle = ld                             # only the collector frees it
it = iter(ld)
next(it)
del it, ld
dropped.append(1)
time.sleep(3)
print("done")
"""


def test_a_loader_collected_inside_sign_does_not_hang(site, tmp_path):
    """The garbage collector can run inside sign= on a reading thread and
    free the Loader that thread reads for: freeing it there joined the
    thread itself (a hang found by review); now another thread frees it."""
    import subprocess
    az, files = site
    exp = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
    p = subprocess.run([sys.executable, "-c", _COLLECTED_INSIDE_SIGN,
                        "%s/scenes/scene/red.tif" % az.endpoint,
                        az.sas("scenes", "scene/red.tif", expiry=exp)],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert p.returncode == 0 and "done" in p.stdout, p.stderr[-3000:]


def test_expiry_of_each_signing_scheme():
    t0 = dt.datetime(2026, 12, 7, tzinfo=dt.timezone.utc).timestamp()
    for q in ("X-Amz-Date=20261207T000000Z&X-Amz-Expires=900&X-Amz-Signature=x",
              "X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Date=20261207T000000Z"
              "&X-Goog-Expires=900&X-Goog-Signature=x"):
        assert stac._expiry("https://h/b/o.tif?" + q) == t0 + 900, q
    assert stac._expiry("https://h/c/o.tif?se=2026-12-07T00:15:00Z&sig=x") == t0 + 900
    assert stac._expiry("https://h/o.tif?Expires=%d&Signature=x" % (t0 + 900)) == t0 + 900
    assert stac._expiry("https://h/o.tif") is None


def test_series_and_loader_inputs_unsigned_for_a_signing_loader(site, tmp_path):
    az, files = site
    calls = []
    sel = catalog(az, tmp_path).select(["red"], sign=short_lived(az, calls))
    hrefs, _ = sel.series(signed=False, groupby="time")
    assert hrefs == [[["%s/scenes/scene/red.tif" % az.endpoint]]] and calls == []
    kw = sel.loader_inputs(signed=False)
    assert kw["sign"] is sel.signer and "?" not in kw["images"][0]
    ld = cogfeed.Loader(**kw, **LOADER)
    try:
        assert len(epoch(ld)) == 16 and len(calls) == 1
    finally:
        ld.close()

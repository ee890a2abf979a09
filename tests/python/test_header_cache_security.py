"""The on-disk header cache against a hostile cache folder, end to end over
a local nginx (docs/reader.md, "Header cache security").

The suite runs as root, so "another user" is simulated with os.chown to
an unused uid.  Each test names what it checked on the old code (43b28fd)
where that was a bug: a folder made by another user was used and a link
planted at the predictable temp name made the cache overwrite a root-owned
file; another user's entry with swapped tile offsets was served without a
request; bit flips in an entry gave wrong pixels; a rotated SAS made a new
entry; s3://b/k through another endpoint or access key got the first
one's entry; the folder grew without bound.
"""
import hashlib
import os
import random
import struct
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
from servers import Nginx  # noqa: E402

import cogfeed  # noqa: E402

OTHER = 4242  # "another user"
VICTIM_TEXT = b"root's private file: must never change\n"

needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="simulating another user needs root")


def make_cog(path, seed, size=256, tile=64):
    """An uncompressed tiled COG whose tiles all differ; returns the pixels
    and the tile offsets (from GDAL)."""
    from osgeo import gdal
    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 255, (size, size), dtype=np.uint8)
    mem = gdal.GetDriverByName("MEM").Create("", size, size, 1, gdal.GDT_Byte)
    mem.GetRasterBand(1).WriteArray(arr)
    gdal.Translate(str(path), mem, format="COG",
                   creationOptions=["BLOCKSIZE=%d" % tile, "COMPRESS=NONE",
                                    "OVERVIEWS=NONE"])
    ds = gdal.Open(str(path))
    b = ds.GetRasterBand(1)
    n = size // tile
    offs = [int(b.GetMetadataItem("BLOCK_OFFSET_%d_%d" % (x, y), "TIFF"))
            for y in range(n) for x in range(n)]
    return arr, offs


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("hcsec")
    (root / "bucket").mkdir()
    truth = {}
    for k, name in enumerate(["a.tif", "b.tif", "c.tif", "d.tif", "e.tif",
                              "f.tif"]):
        truth[name] = make_cog(root / name, k)
    truth["bucket/x.tif"] = make_cog(root / "bucket" / "x.tif", 99)
    with Nginx(str(root)) as srv:
        srv.truth = truth
        yield srv


def victim(tmp_path):
    v = tmp_path / "victim"
    v.write_bytes(VICTIM_TEXT)
    os.chmod(v, 0o600)
    return v


def old_names(url):
    """The names 43b28fd used: FNV-1a of the URL with two bases."""
    def fnv(h):
        for c in url.encode():
            h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        return h
    base = "%016x%016x.cfh" % (fnv(0xcbf29ce484222325), fnv(0x84222325cbf29ce4))
    return base, "%s.%d.tmp" % (base, os.getpid())


def entries(hc):
    return sorted(p for p in os.listdir(hc) if p.endswith(".cfh")
                  and os.path.isfile(os.path.join(hc, p))
                  and not os.path.islink(os.path.join(hc, p)))


def open_read(url, hc, **kw):
    cog = cogfeed.open(url, io=cogfeed.IO(header_cache_dir=str(hc), **kw))
    return cog, cog.read(window=(0, 0, cog.width, cog.height))[0]


def sealed(b):
    """True when b ends with the SHA-256 of the rest (the entry format of
    this version; the old one had no checksum)."""
    return len(b) > 32 and hashlib.sha256(b[:-32]).digest() == b[-32:]


def reseal(b, was_sealed):
    """What a forger does after editing an entry: fix its checksum."""
    if was_sealed:
        b[-32:] = hashlib.sha256(bytes(b[:-32])).digest()
    return b


@needs_root
def test_folder_of_another_user_is_refused(site, tmp_path, capfd):
    """Another user made the folder first (0777, as the old code did) and
    planted links at the entry's and the temp file's names, pointing at a
    root-owned 0600 file.  Old code: that file was overwritten with a
    cache entry.  Now the folder is refused, said once, and the file and
    the folder stay untouched; the reads are right."""
    hc = tmp_path / "hc"
    hc.mkdir()
    os.chmod(hc, 0o777)
    os.chown(hc, OTHER, OTHER)
    v = victim(tmp_path)
    url = site.url("a.tif")
    for name in old_names(url):
        os.symlink(v, hc / name)
        os.lchown(hc / name, OTHER, OTHER)
    io = cogfeed.IO(header_cache_dir=str(hc))
    for _ in range(3):
        cog = cogfeed.open(url, io=io)
        assert (cog.read(window=(0, 0, 256, 256))[0] == site.truth["a.tif"][0]).all()
    assert v.read_bytes() == VICTIM_TEXT
    assert entries(hc) == []
    err = capfd.readouterr().err
    assert err.count("the on-disk header cache is off") == 1, err
    assert "owned by uid %d, not by this user" % OTHER in err, err


def test_group_writable_folder_is_refused(site, tmp_path, capfd):
    """A folder its group may write to: refused (old code: used)."""
    hc = tmp_path / "hc"
    hc.mkdir()
    os.chmod(hc, 0o770)
    io = cogfeed.IO(header_cache_dir=str(hc))
    for name in ("a.tif", "b.tif"):
        cogfeed.open(site.url(name), io=io)
    assert os.listdir(hc) == []
    err = capfd.readouterr().err
    assert err.count("is writable by its group (mode 0770") == 1, err


def test_new_folder_and_entries_are_private(site, tmp_path):
    hc = tmp_path / "deep" / "hc"
    open_read(site.url("a.tif"), hc)
    assert os.stat(hc).st_mode & 0o777 == 0o700
    assert os.stat(tmp_path / "deep").st_mode & 0o777 == 0o700
    (e,) = entries(hc)
    st = os.stat(hc / e)
    assert st.st_mode & 0o777 == 0o600 and st.st_uid == os.geteuid()


@needs_root
def test_links_planted_in_the_folder_are_not_followed(site, tmp_path):
    """Links at the entry's name and at the temp names (the old,
    predictable ones) pointing at a root-owned file: never read, never
    written through (old code: the file was overwritten through the temp
    name's link)."""
    hc = tmp_path / "hc"
    hc.mkdir(mode=0o700)
    v = victim(tmp_path)
    url = site.url("b.tif")

    def plant(name):
        os.symlink(v, hc / name)
        os.lchown(hc / name, OTHER, OTHER)

    def opens_afresh():
        cog, px = open_read(url, hc)
        assert cog.header_requests == 1
        assert (px == site.truth["b.tif"][0]).all()
        assert v.read_bytes() == VICTIM_TEXT

    for name in old_names(url):
        plant(name)
    opens_afresh()
    (e,) = [p for p in entries(hc) if p not in old_names(url)]
    # Now a link at the current entry's name: not read, and the next
    # store replaces the link, never the file it points to.
    os.unlink(hc / e)
    plant(e)
    opens_afresh()
    assert not os.path.islink(hc / e) and os.path.isfile(hc / e)
    cog, _ = open_read(url, hc)
    assert cog.header_requests == 0


@needs_root
def test_entry_of_another_user_with_swapped_offsets_is_ignored(site, tmp_path):
    """Another user's entry, with the object's real ETag, a valid checksum
    and tiles 0 and 1 swapped.  Old code: tile 1's pixels for tile 0 with
    0 requests.  Now it is ignored: one request, the right pixels."""
    hc = tmp_path / "hc"
    url = site.url("c.tif")
    arr, offs = site.truth["c.tif"]
    open_read(url, hc)
    (e,) = entries(hc)
    b = bytearray((hc / e).read_bytes())
    was = sealed(b)
    packed = struct.pack("<%dI" % len(offs), *offs)
    at = bytes(b).find(packed)
    assert at > 0, "tile offsets not found in the entry"
    b[at:at + 8] = struct.pack("<2I", offs[1], offs[0])
    (hc / e).write_bytes(bytes(reseal(b, was)))
    # As the same user the forged entry would be trusted (the trust
    # boundary is the user, see the docs): the edit itself works ...
    cog, px = open_read(url, hc)
    assert cog.header_requests == 0
    assert (px[:64, :64] == arr[:64, 64:128]).all()
    # ... but owned by another user it is ignored.
    os.chown(hc / e, OTHER, OTHER)
    cog, px = open_read(url, hc)
    assert cog.header_requests == 1
    assert (px == arr).all()


def test_bit_flips_never_give_wrong_pixels(site, tmp_path):
    """200 entries with one random bit flipped (150 in the tile offsets and
    byte counts, 50 anywhere): every read returns the right pixels (old
    code: wrong pixels for most flips in the arrays)."""
    hc = tmp_path / "hc"
    url = site.url("d.tif")
    arr, offs = site.truth["d.tif"]
    open_read(url, hc)
    (e,) = entries(hc)
    good = (hc / e).read_bytes()
    at = good.find(struct.pack("<%dI" % len(offs), *offs))
    assert at > 0
    lo, hi = at, at + 8 * len(offs)  # offsets, then byte counts (GDAL)
    rng = random.Random(2024)
    wrong, errors, fresh = [], [], 0
    for t in range(200):
        b = bytearray(good)
        pos = rng.randrange(lo, hi) if t < 150 else rng.randrange(len(b))
        b[pos] ^= 1 << rng.randrange(8)
        (hc / e).write_bytes(bytes(b))
        try:
            cog, px = open_read(url, hc)
        except cogfeed.Error as ex:
            errors.append((pos, str(ex)))
            continue
        fresh += cog.header_requests == 1
        if not (px == arr).all():
            wrong.append(pos)
    assert not wrong and not errors, (len(wrong), errors[:3])
    assert fresh == 200


def test_sas_rotation_reuses_one_entry(site, tmp_path):
    """The same object under three SAS tokens: one entry, opened from the
    cache after the first (old code: a new entry and a request per token)."""
    hc = tmp_path / "hc"
    base = site.url("e.tif")
    sas = "?sv=2021-08-06&se=2030-01-0%dT00:00:00Z&sp=r&sr=b&sig=SIG%d%%3D"
    reqs = []
    for k in range(1, 4):
        cog, px = open_read(base + sas % (k, k), hc)
        reqs.append(cog.header_requests)
        assert (px == site.truth["e.tif"][0]).all()
    assert reqs == [1, 0, 0]
    assert len(entries(hc)) == 1
    # A plain server's own parameters still name different objects.
    cog, _ = open_read(base + "?v=2", hc)
    assert cog.header_requests == 1


def test_endpoints_and_access_keys_do_not_share(site, tmp_path, monkeypatch):
    """s3://bucket/x.tif through two endpoints and with two access keys
    (path-style on the local nginx): never each other's entry (old code:
    keyed by "s3://bucket/x.tif" alone, so served with 0 requests)."""
    hc = tmp_path / "hc"
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-real-secret")
    for var in ("AWS_NO_SIGN_REQUEST", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(var, raising=False)
    url = "s3://bucket/x.tif"
    truth = site.truth["bucket/x.tif"][0]

    def opened(endpoint, key_id):
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
        cog, px = open_read(url, hc)
        assert (px == truth).all()
        return cog.header_requests

    ep1 = "http://127.0.0.1:%d" % site.port
    ep2 = "http://localhost:%d" % site.port
    assert opened(ep1, "AKIAFIRST") == 1
    assert opened(ep1, "AKIAFIRST") == 0
    assert opened(ep2, "AKIAFIRST") == 1     # another endpoint
    assert opened(ep1, "AKIASECOND") == 1    # another access key
    assert opened(ep1, "AKIAFIRST") == 0
    assert opened(ep2, "AKIAFIRST") == 0
    assert len(entries(hc)) == 3


def test_least_recently_used_entries_are_evicted(site, tmp_path):
    """A cap of three and a half entries, six files, a.tif used again
    after the third and the fifth: the folder keeps at most the cap, and
    what goes is the least recently used (b, c, d), not the oldest
    written (first in, first out would keep d, e, f)."""
    import time
    hc = tmp_path / "hc"
    open_read(site.url("a.tif"), hc)
    (e,) = entries(hc)
    one = os.path.getsize(hc / e)
    os.unlink(hc / e)
    cap = 3 * one + one // 2
    for i, name in enumerate(["a.tif", "b.tif", "c.tif", "d.tif", "e.tif",
                              "f.tif"]):
        # File times tick with the kernel's clock (a few ms): keep each
        # step's apart, so that "least recently used" is well defined.
        time.sleep(0.02)
        assert open_read(site.url(name), hc,
                         header_cache_max_bytes=cap)[0].header_requests == 1
        if name in ("c.tif", "e.tif"):
            time.sleep(0.02)
            cog, _ = open_read(site.url("a.tif"), hc,
                               header_cache_max_bytes=cap)
            assert cog.header_requests == 0  # a hit: a.tif is the newest
    assert sum(os.path.getsize(hc / p) for p in entries(hc)) <= cap
    assert len(entries(hc)) == 3
    kept = {n for n in ["a.tif", "b.tif", "c.tif", "d.tif", "e.tif", "f.tif"]
            if open_read(site.url(n), hc, header_cache_max_bytes=10 * cap)[0]
            .header_requests == 0}
    assert kept == {"a.tif", "e.tif", "f.tif"}


# -- objects without an ETag: the entry carries Last-Modified ---------------

T1 = "Mon, 01 Jan 2024 00:00:00 GMT"


def test_memory_hit_checks_last_modified(site):
    """No ETag; Last-Modified T1 for the first request, T2 after (the
    object changed once its header was read).  An open from the io's
    memory must read with the header's date, as an open that reads its
    header does (If-Unmodified-Since: T1, 412, "changed").  Old code: the
    entry knew no date, the first tile read pinned T2 and the read went
    through on a header of the object as it was before."""
    site.reset()
    url = site.url("f.tif", fault="noetag-lmchange")
    io = cogfeed.IO()
    first = cogfeed.open(url, io=io)
    assert first.header_requests == 1
    again = cogfeed.open(url, io=io)
    assert again.header_requests == 0  # from memory
    with pytest.raises(cogfeed.Error, match="changed"):
        again.read(window=(0, 0, 64, 64))
    assert site.last_header("/fault/noetag-lmchange/f.tif", "ius") == T1


def test_last_modified_entries_go_to_disk(site, tmp_path):
    """Without an ETag but with a Last-Modified an entry is written to
    disk (old code: memory only, every process read the header again); a
    later process opens with no request and reads with
    If-Unmodified-Since, and a changed object is reported, never read
    with the old header."""
    hc = tmp_path / "hc"
    site.reset()
    url = site.url("e.tif", fault="noetag")
    open_read(url, hc)
    assert len(entries(hc)) == 1
    cog, px = open_read(url, hc)
    assert cog.header_requests == 0
    assert (px == site.truth["e.tif"][0]).all()
    assert site.last_header("/fault/noetag/e.tif", "ius") == T1
    assert site.last_header("/fault/noetag/e.tif", "im") == ""

    site.reset()
    hc2 = tmp_path / "hc2"
    url = site.url("e.tif", fault="noetag-lmchange")
    cogfeed.open(url, io=cogfeed.IO(header_cache_dir=str(hc2)))  # T1
    cog = cogfeed.open(url, io=cogfeed.IO(header_cache_dir=str(hc2)))
    assert cog.header_requests == 0
    with pytest.raises(cogfeed.Error, match="changed"):
        cog.read(window=(0, 0, 64, 64))
    assert entries(hc2) == []  # the stale entry is dropped

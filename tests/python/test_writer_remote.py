"""cogfeed.Writer / cogfeed.write / cogfeed.Stitcher to object storage:
s3:// as an S3 multipart upload to moto (SigV4 enforced), az:// as Azure
block blobs to Azurite, both through tests/servers/upload_faults.py, a
proxy that forwards every request unchanged, logs it, and fails the ones
a test scripts.

What is checked:
- the object is byte for byte the file the same write gives locally (the
  writer is deterministic), GDAL (rasterio) reads it pixel-equal and
  rio-cogeo's validator says it is a valid COG;
- the protocol: S3 CreateMultipartUpload, UploadPart with every part but
  the last (by number) at least part_size (>= 5 MiB), the header part
  (part 1) sent last, one CompleteMultipartUpload; Azure Put Block for
  each part, one Put Block List at the end;
- a failed part (503, 500, a dropped connection before, during or after
  the body, a 503 before 100 Continue, a storm of 503s) is sent again and
  the object is still complete and identical; no part is tried more than
  max_retries + 1 times;
- an upload that cannot finish raises cogfeed.Error naming the redacted
  URL and no secret, and leaves nothing: S3 sends AbortMultipartUpload
  (no object, no open upload), Azure commits no block list (no blob);
- a wrong secret is cogfeed.Error with status AUTH, and no object.

The first tests check the proxy itself with boto3, Azurite's own Shared
Key helper and curl (no cogfeed writer involved).
"""

import base64
import copy
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "servers"))

import cogfeed  # noqa: E402
from upload_faults import Proxy  # noqa: E402

rasterio = pytest.importorskip("rasterio")

MiB = 1 << 20
PART = 5 * MiB
CF_E_AUTH = cogfeed.Status.AUTH
MAX_RETRIES = 5
GT = (500000.0, 10.0, 0.0, 4100000.0, 0.0, -10.0)
# 2500 x 2200 float32: 22 MB at full resolution, ~29 MB with overviews,
# six parts of 5 MiB uncompressed; not a multiple of the 512 tile.
W, H = 2500, 2200

# every credential variable cogfeed reads, cleared around each test
from test_auth_servers import clean_env  # noqa: E402,F401  (an autouse fixture)


def fast_io():
    """Quick retries: the behaviour is the same, the suite stays fast."""
    return cogfeed.IO(max_retries=MAX_RETRIES, retry_base_ms=20, retry_max_ms=200,
                      request_timeout_s=60, connect_timeout_s=5)


def grid():
    return cogfeed.Grid(32633, width=W, height=H, geotransform=GT)


@pytest.fixture(scope="module")
def image():
    """Float32, smooth plus noise in the low bits (DEFLATE keeps it big)."""
    rng = np.random.default_rng(11)
    y, x = np.mgrid[0:H, 0:W]
    return (np.sin(x / 37.0) * 500 + y / 3.0 + rng.random((H, W)) * 10)[None].astype(np.float32)


@pytest.fixture(scope="module")
def local(image, tmp_path_factory):
    """local(compression) -> the bytes of the same write to a local file."""
    d, cache = tmp_path_factory.mktemp("local"), {}

    def get(compression):
        if compression not in cache:
            p = d / ("ref_%s.tif" % compression)
            cogfeed.write(p, image, grid=grid(), compression=compression)
            cache[compression] = p.read_bytes()
        return cache[compression]
    return get


def check_cog(data, ref, image, tmp_path):
    """data: the uploaded object."""
    assert len(data) == len(ref), "object %d bytes, local file %d" % (len(data), len(ref))
    assert data == ref, "object differs from the local file at byte %d" % next(
        i for i in range(len(ref)) if data[i] != ref[i])
    p = tmp_path / "downloaded.tif"
    p.write_bytes(data)
    with rasterio.open(p) as r:
        np.testing.assert_array_equal(r.read(), image)
        assert r.crs.to_epsg() == 32633 and r.transform.to_gdal() == GT
    from rio_cogeo.cogeo import cog_validate
    ok, errors, warnings = cog_validate(str(p), quiet=True)
    assert ok and not errors, (errors, warnings)


def assert_clean(text, *secrets):
    for s in secrets:
        assert s not in text, "secret leaked into: %s" % text
    for marker in ("sig=", "X-Amz-Signature", "X-Amz-Credential", "Authorization:",
                   "AccountKey", "SharedKey "):
        assert marker not in text, "%r in: %s" % (marker, text)


def retried_ok(attempts, key):
    """Every request that got a fault was followed by a successful one of
    the same part (key: its part number / block id)."""
    for i, r in enumerate(attempts):
        if r["status"] is None or r["status"] >= 300:
            assert any(key(s) == key(r) and s["status"] in (200, 201)
                       for s in attempts[i + 1:]), "part %s not sent again" % key(r)


# ---------------------------------------------------------------- servers

@pytest.fixture(scope="module")
def moto():
    from moto_server import Moto
    try:
        m = Moto().start()
    except RuntimeError as e:
        pytest.skip("moto server not available: %s" % e)
    try:
        m.key_id, m.secret = m.setup("out", {})
        import boto3
        m.s3 = boto3.client("s3", endpoint_url=m.endpoint, region_name=m.region,
                            aws_access_key_id=m.key_id, aws_secret_access_key=m.secret)
        yield m
    finally:
        m.stop()


@pytest.fixture(scope="module")
def azurite():
    from azurite import Azurite
    try:
        az = Azurite().start()
    except RuntimeError as e:
        pytest.skip("azurite not available: %s" % e)
    try:
        az.create_container("out")
        yield az
    finally:
        az.stop()


@pytest.fixture
def s3proxy(moto):
    with Proxy(moto.endpoint, flavor="s3") as p:
        yield p


@pytest.fixture
def azproxy(azurite):
    with Proxy(azurite.endpoint, flavor="azure") as p:
        yield p


def s3_env(env, moto, proxy, secret=None):
    env.setenv("AWS_ENDPOINT_URL", proxy.url)
    env.setenv("AWS_REGION", moto.region)
    env.setenv("AWS_ACCESS_KEY_ID", moto.key_id)
    env.setenv("AWS_SECRET_ACCESS_KEY", secret or moto.secret)


def az_env(env, proxy, key=None):
    from azurite import ACCOUNT, KEY
    env.setenv("AZURE_STORAGE_CONNECTION_STRING",
               "DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;"
               % (ACCOUNT, key or KEY, proxy.url))


def s3_get(moto, key):
    """The object's bytes, or None when there is none."""
    from botocore.exceptions import ClientError
    try:
        return moto.s3.get_object(Bucket="out", Key=key)["Body"].read()
    except ClientError as e:
        if e.response["Error"]["Code"] in ("NoSuchKey", "404"):
            return None
        raise


def s3_open_uploads(moto):
    return moto.s3.list_multipart_uploads(Bucket="out").get("Uploads", [])


def az_get(azurite, name):
    st, body = azurite._request("GET", "/out/" + name)
    if st == 404:
        return None
    assert st == 200, (st, body[:300])
    return body


def part_number(r):
    return int(dict(q.split("=", 1) for q in r["query"].split("&"))["partNumber"])


def block_id(r):
    return dict(q.split("=", 1) for q in r["query"].split("&"))["blockid"]


# ------------------------------------------------------ the proxy itself

def test_proxy_boto3_multipart_with_a_503(moto):
    """boto3 (SigV4 over the proxy's Host, Expect: 100-continue) through
    the proxy: two 5 MiB parts, the second refused once and retried by
    botocore; the object is whole."""
    parts = [np.random.default_rng(k).bytes(PART) for k in range(2)]
    with Proxy(moto.endpoint, faults=[("PUT?partNumber", 2, "503")]) as p:
        import boto3
        c = boto3.client("s3", endpoint_url=p.url, region_name=moto.region,
                         aws_access_key_id=moto.key_id, aws_secret_access_key=moto.secret)
        up = c.create_multipart_upload(Bucket="out", Key="selfcheck.bin")["UploadId"]
        done = [{"PartNumber": k + 1, "ETag": c.upload_part(
            Bucket="out", Key="selfcheck.bin", UploadId=up, PartNumber=k + 1,
            Body=d)["ETag"]} for k, d in enumerate(parts)]
        c.complete_multipart_upload(Bucket="out", Key="selfcheck.bin", UploadId=up,
                                    MultipartUpload={"Parts": done})
        puts = p.requests("PUT", "partNumber")
    assert s3_get(moto, "selfcheck.bin") == b"".join(parts)
    assert [(part_number(r), r["status"], r["bytes"]) for r in puts] == [
        (1, 200, PART), (2, 503, PART), (2, 200, PART)]
    assert puts[1]["fault"] == "503"
    assert all(r["headers"].get("expect") == "100-continue" for r in puts)
    assert [r["status"] for r in p.requests("POST")] == [200, 200]
    moto.s3.delete_object(Bucket="out", Key="selfcheck.bin")


def test_proxy_azurite_blocks_and_curl(azurite, tmp_path):
    """Put Block / Put Block List (Azurite's own Shared Key signer) and
    curl (a 6 MiB PUT with Expect: 100-continue, a service SAS) through
    the proxy, with faults."""
    from azurite import ACCOUNT
    blocks = [np.random.default_rng(10 + k).bytes(PART) for k in range(2)]
    ids = [base64.b64encode(b"block-%06d" % k).decode() for k in range(2)]
    with Proxy(azurite.endpoint, faults=[("PUT?comp=block", 1, "503"),
                                         ("PUT?comp=block", 3, "drop")]) as p:
        assert p.url.endswith("/" + ACCOUNT) and p.flavor == "azure"
        via = copy.copy(azurite)
        via.port = p.port

        def put_block(k):
            return via._request("PUT", "/out/sc.bin", {"comp": "block", "blockid": ids[k]},
                                body=blocks[k])
        st, body = put_block(0)
        assert st == 503 and b"<Code>ServerBusy</Code>" in body
        assert put_block(0)[0] == 201
        with pytest.raises(OSError):  # dropped: no answer at all
            put_block(1)
        assert put_block(1)[0] == 201
        xml = "<?xml version='1.0' encoding='utf-8'?><BlockList>%s</BlockList>" % "".join(
            "<Latest>%s</Latest>" % i for i in ids)
        assert via._request("PUT", "/out/sc.bin", {"comp": "blocklist"},
                            body=xml.encode())[0] == 201
        assert [r["status"] for r in p.requests("PUT", "comp=block")] == [503, 201, None, 201]
        assert [r["status"] for r in p.requests("PUT", "comp=blocklist")] == [201]
    assert az_get(azurite, "sc.bin") == b"".join(blocks)

    if not shutil.which("curl"):
        return
    f = tmp_path / "six.bin"
    f.write_bytes(np.random.default_rng(3).bytes(6 * MiB))
    sas = azurite.sas("out", "curl.bin", permissions="rcw")

    # not under the sanitizer build's preload (it breaks curl)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}

    def curl(proxy):
        return subprocess.run(
            ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-T", str(f),
             "-H", "x-ms-blob-type: BlockBlob", "%s/out/curl.bin?%s" % (proxy.url, sas)],
            capture_output=True, text=True, timeout=60, env=env)
    with Proxy(azurite.endpoint, faults=[("PUT", 1, "503-early"), ("PUT", 2, "drop-mid"),
                                         ("PUT", 3, "drop-after")]) as p:
        r = curl(p)
        assert r.stdout == "503", r  # refused before 100 Continue: no body sent
        assert curl(p).returncode != 0  # cut off half way through the body
        assert curl(p).returncode != 0  # stored, but the answer never came
        r = curl(p)
        assert r.returncode == 0 and r.stdout == "201", r
        log = p.requests("PUT")
        assert [(x["status"], x["fault"]) for x in log] == [
            (503, "503-early"), (None, "drop-mid"), (None, "drop-after"), (201, None)]
        assert log[0]["bytes"] == 0 and log[1]["bytes"] == 3 * MiB
        assert log[3]["bytes"] == 6 * MiB and log[3]["headers"]["expect"] == "100-continue"
    assert az_get(azurite, "curl.bin") == f.read_bytes()


# -------------------------------------------------------- S3 (moto) writes

def check_s3_protocol(proxy, size, part_size=PART):
    """One CreateMultipartUpload, every part once (numbers may leave
    gaps: each level of the COG has its own range), one
    CompleteMultipartUpload after them; part sizes as S3 wants them (each
    but the highest-numbered >= part_size); no abort.  Returns the part
    numbers stored."""
    assert [r["status"] for r in proxy.requests("POST", "uploads")
            if r["status"] == 200] == [200]
    puts = proxy.requests("PUT", "partNumber")
    ok = [r for r in puts if r["status"] == 200]
    nums = [part_number(r) for r in ok]
    assert len(set(nums)) == len(nums), "a part stored twice: %s" % nums
    assert len(nums) >= 3, "only %d parts: the test wants several" % len(nums)
    sizes = {part_number(r): r["bytes"] for r in ok}
    assert sum(sizes.values()) == size
    assert all(sizes[k] >= part_size for k in sizes if k != max(nums)), sizes
    done = [r for r in proxy.requests("POST", "uploadId") if r["status"] == 200]
    assert len(done) == 1
    assert done[0]["start"] >= max(r["time"] for r in ok)
    assert not proxy.requests("DELETE")
    return sorted(nums)


@pytest.mark.parametrize("compression", ["none", "deflate"])
def test_s3_write_matches_local(moto, s3proxy, clean_env, image, local, tmp_path,
                                compression):
    s3_env(clean_env, moto, s3proxy)
    key = "dir/cog_%s.tif" % compression
    cogfeed.write("s3://out/" + key, image, grid=grid(), compression=compression,
                  io=fast_io(), part_size=PART)
    data = s3_get(moto, key)
    assert data is not None, "no object s3://out/" + key
    check_cog(data, local(compression), image, tmp_path)
    check_s3_protocol(s3proxy, len(data))
    assert s3_open_uploads(moto) == []


def ring_mask():
    """A mask with holes, not aligned to tiles."""
    y, x = np.mgrid[0:H, 0:W]
    return ((x - W / 2) ** 2 + (y - H / 2) ** 2 < (H / 2.2) ** 2) & ((x // 7 + y // 5) % 3 != 0)


@pytest.mark.parametrize("store", ["s3", "az"])
def test_masked_write_matches_local(moto, s3proxy, azurite, azproxy, clean_env, image,
                                    tmp_path, store):
    """An internal mask goes up with its tiles (each mask tile after its
    image tile, the mask's overviews made on the way): the object is the
    local file's bytes, tiles written in reverse order, and GDAL reads
    the mask back."""
    m = ring_mask()
    ref = tmp_path / "masked.tif"
    cogfeed.write(ref, image, mask=m, grid=grid(), compression="deflate")
    if store == "s3":
        s3_env(clean_env, moto, s3proxy)
        url = "s3://out/dir/masked.tif"
    else:
        az_env(clean_env, azproxy)
        url = "az://out/masked.tif"
    with cogfeed.Writer(url, W, H, 1, "float32", grid=grid(), compression="deflate",
                        io=fast_io(), part_size=PART, mask=True) as w:
        tiles = [(tx, ty) for ty in range(w.tiles[1]) for tx in range(w.tiles[0])]
        for tx, ty in reversed(tiles):
            x, y, tw, th = w.tile_window(tx, ty)
            w.write_tile(tx, ty, image[:, y:y + th, x:x + tw], mask=m[y:y + th, x:x + tw])
    data = s3_get(moto, "dir/masked.tif") if store == "s3" else az_get(azurite, "masked.tif")
    assert data is not None, "no object " + url
    check_cog(data, ref.read_bytes(), image, tmp_path)
    with rasterio.open(tmp_path / "downloaded.tif") as r:
        np.testing.assert_array_equal(r.read_masks(1), np.where(m, 255, 0))
        assert len(r.overviews(1)) >= 2


def stored_tiles(path):
    """Each full-resolution tile's stored bytes and its mask tile's, by
    (tx, ty), from a COG on disk (Cog.tile_info's ranges)."""
    out = {}
    data = open(path, "rb").read()
    with cogfeed.open(path) as c:
        for k in range(c.tile_info(0, 0)["count"]):
            ti, mi = c.tile_info(k, 0), c.tile_info(k, 0, mask=True)
            out[ti["col"], ti["row"]] = (
                data[ti["offset"]:ti["offset"] + ti["byte_count"]],
                data[mi["offset"]:mi["offset"] + mi["byte_count"]])
    return out


def test_encoded_tiles_go_up_as_written(moto, s3proxy, clean_env, image, tmp_path):
    """Writer.write_encoded_tile to S3: a share's stored tiles (and their
    masks), written without overviews, copied in reverse order into a
    writer with overviews give the object byte for byte the local file
    written from the pixels; the copies' rows go up as they complete."""
    m = ring_mask()
    ref, share = tmp_path / "ref.tif", tmp_path / "share.tif"
    cogfeed.write(ref, image, mask=m, grid=grid(), compression="zstd")
    cogfeed.write(share, image, mask=m, grid=grid(), compression="zstd", overviews=0)
    tiles = stored_tiles(share)
    s3_env(clean_env, moto, s3proxy)
    with cogfeed.Writer("s3://out/copied.tif", W, H, 1, "float32", grid=grid(),
                        compression="zstd", io=fast_io(), part_size=PART, mask=True) as w:
        for (tx, ty), (b, mb) in sorted(tiles.items(), reverse=True):
            w.write_encoded_tile(tx, ty, b, mb)
    data = s3_get(moto, "copied.tif")
    assert data is not None and data == ref.read_bytes()


def to_store(store, env, moto, s3proxy, azproxy, key):
    """The store's credentials in env; the object's URL and its proxy."""
    if store == "s3":
        s3_env(env, moto, s3proxy)
        return "s3://out/" + key, s3proxy
    az_env(env, azproxy)
    return "az://out/" + key, azproxy


def fetched(store, moto, azurite, key):
    return s3_get(moto, key) if store == "s3" else az_get(azurite, key)


def assert_nothing_left(store, msg, url, moto, s3proxy, azurite, azproxy, key):
    """A failed upload: the error names the URL without a secret, and
    nothing stays (S3: no object, no open upload, an abort sent; Azure: no
    block list committed, no blob)."""
    assert url in msg, msg
    if store == "s3":
        assert_clean(msg, moto.secret)
        assert s3_get(moto, key) is None
        assert s3_open_uploads(moto) == []
        assert s3proxy.requests("DELETE", "uploadId"), "no abort sent"
    else:
        from azurite import KEY
        assert_clean(msg, KEY)
        assert az_get(azurite, key) is None
        assert not [r for r in azproxy.requests("PUT", "comp=blocklist") if r["status"] == 201]


SHARE_OPTS = dict(compression="zstd", mask=True)


def share_files(image, m, tmp_path):
    """Two share writers (Writer(share=)) of the image's rows of tiles,
    their carries passed on: their files and the rows of tiles of each
    level each made."""
    T, rows = 512, -(-H // 512)
    carry, out = None, []
    for k, (r0, n) in enumerate([(0, 2), (2, rows - 2)]):
        p = tmp_path / ("s%d.tif" % k)
        w = cogfeed.Writer(p, W, H, 1, "float32", grid=grid(), share=(r0, n), **SHARE_OPTS)
        y0, y1 = r0 * T, min((r0 + n) * T, H)
        w.write(image[:, y0:y1], 0, y0, mask=m[y0:y1])
        w.share_build()
        carry = w.share_carry(carry)
        out.append((p, [w.share_tiles(level) for level in range(w.levels)]))
        w.close()
    return out


def share_tiles(shares):
    """(k, level, tx, ty, bytes, mask bytes) of every tile each share made,
    shares in order, each level's rows in order."""
    for k, (p, made) in enumerate(shares):
        data = p.read_bytes()
        with cogfeed.open(p) as c:
            for level, (t0, t1) in enumerate(made):
                ntx = -(-(c.width if level == 0 else c.overviews[level - 1][0]) // 512)
                for ty in range(t0, t1):
                    for tx in range(ntx):
                        ti = c.tile_info(ty * ntx + tx, level)
                        mi = c.tile_info(ty * ntx + tx, level, mask=True)
                        yield (k, level, tx, ty, data[ti["offset"]:ti["offset"] + ti["byte_count"]],
                               data[mi["offset"]:mi["offset"] + mi["byte_count"]])


@pytest.mark.parametrize("store", ["s3", "az"])
def test_share_writers_assembled_into_an_object(moto, s3proxy, azurite, azproxy, clean_env,
                                                image, tmp_path, store):
    """Two share writers' tiles of every level copied into an object by a
    Writer(overviews_given=True), as predict(distributed=True) assembles
    its ranks' shares: the object is byte for byte the local file one
    writer makes; each overview level goes up as its tiles come in row
    order, and a level's tile out of row order is refused (StateError)
    without failing the upload."""
    m = ring_mask()
    ref = tmp_path / "ref.tif"
    cogfeed.write(ref, image, mask=m, grid=grid(), compression=SHARE_OPTS["compression"])
    shares = share_files(image, m, tmp_path)
    url, _ = to_store(store, clean_env, moto, s3proxy, azproxy, "assembled.tif")
    refused = 0
    with cogfeed.Writer(url, W, H, 1, "float32", grid=grid(), io=fast_io(), part_size=PART,
                        overviews_given=True, **SHARE_OPTS) as w:
        for k, level, tx, ty, b, mb in share_tiles(shares):
            if level == 1 and k == 1 and tx == 0 and not refused:
                with pytest.raises(cogfeed.StateError, match="row order"):
                    w.write_encoded_tile(1, ty, b, mb, level=1)
                refused += 1
            w.write_encoded_tile(tx, ty, b, mb, level=level)
    assert refused == 1
    got = fetched(store, moto, azurite, "assembled.tif")
    assert got is not None and got == ref.read_bytes()


@pytest.mark.parametrize("store", ["s3", "az"])
def test_share_assembly_whose_upload_fails_leaves_nothing(moto, s3proxy, azurite, azproxy,
                                                          clean_env, image, tmp_path, store):
    """The assembling writer (overviews_given) to an object whose every
    part fails: the upload is aborted, nothing is left, and the error
    names the URL without a secret."""
    shares = share_files(image, ring_mask(), tmp_path)
    url, proxy = to_store(store, clean_env, moto, s3proxy, azproxy, "fail/assembled.tif")
    proxy.set_faults([("PUT", 1, "503-always")])
    with pytest.raises(cogfeed.Error) as ei:
        with cogfeed.Writer(url, W, H, 1, "float32", grid=grid(), io=fast_io(),
                            part_size=PART, overviews_given=True, **SHARE_OPTS) as w:
            for _, level, tx, ty, b, mb in share_tiles(shares):
                w.write_encoded_tile(tx, ty, b, mb, level=level)
    assert_nothing_left(store, str(ei.value), url, moto, s3proxy, azurite, azproxy,
                        "fail/assembled.tif")


@pytest.mark.parametrize("store", ["s3", "az"])
def test_encoded_tiles_upload_that_fails_leaves_nothing(moto, s3proxy, azurite, azproxy,
                                                        clean_env, image, tmp_path, store):
    """Tiles given encoded (write_encoded_tile) go up through the same
    stream: when every part fails, the upload is aborted (S3: no object,
    no open upload; Azure: no block list committed) and the error names
    the URL without a secret."""
    share = tmp_path / "share.tif"
    cogfeed.write(share, image, mask=ring_mask(), grid=grid(), compression="none",
                  overviews=0)
    tiles = stored_tiles(share)
    url, proxy = to_store(store, clean_env, moto, s3proxy, azproxy, "fail/copied.tif")
    proxy.set_faults([("PUT", 1, "503-always")])
    with pytest.raises(cogfeed.Error) as ei:
        with cogfeed.Writer(url, W, H, 1, "float32", grid=grid(), compression="none",
                            io=fast_io(), part_size=PART, mask=True) as w:
            for (tx, ty), (b, mb) in sorted(tiles.items()):
                w.write_encoded_tile(tx, ty, b, mb)
    assert_nothing_left(store, str(ei.value), url, moto, s3proxy, azurite, azproxy,
                        "fail/copied.tif")


def write_tiles(w, image, order):
    tiles = [(tx, ty) for ty in range(w.tiles[1]) for tx in range(w.tiles[0])]
    for tx, ty in (reversed(tiles) if order == "reverse" else tiles):
        x, y, tw, th = w.tile_window(tx, ty)
        w.write_tile(tx, ty, image[:, y:y + th, x:x + tw])


def test_s3_writer_rows_stream_and_header_goes_up_at_close(moto, s3proxy, clean_env,
                                                           image, local, tmp_path):
    """Writer.write_tile in row order, 6 MiB parts: parts go up while tiles
    come; the header part (the lowest part number: S3 joins parts by
    number) only at close(), once every tile's size is known."""
    s3_env(clean_env, moto, s3proxy)
    with cogfeed.Writer("s3://out/rows.tif", W, H, 1, "float32", grid=grid(),
                        compression="none", io=fast_io(), part_size=6 * MiB) as w:
        write_tiles(w, image, "rows")
        # the log holds answered requests: let the parts in flight land
        seen, deadline = -1, time.monotonic() + 15
        while time.monotonic() < deadline:
            n = len(s3proxy.requests("PUT", "partNumber"))
            if n and n == seen:
                break
            seen = n
            time.sleep(0.5)
        before = {part_number(r) for r in s3proxy.requests("PUT", "partNumber")}
    data = s3_get(moto, "rows.tif")
    check_cog(data, local("none"), image, tmp_path)
    nums = check_s3_protocol(s3proxy, len(data), part_size=6 * MiB)
    assert before, "nothing was sent before close()"
    assert nums[0] not in before, "the header part %d went up before close()" % nums[0]


def test_s3_tiles_in_reverse_order_small_part_size(moto, s3proxy, clean_env, image,
                                                   local, tmp_path):
    """Tiles in reverse order (every row waits for the first until
    close()); part_size=1 MiB: S3's smallest part, 5 MiB, is taken."""
    s3_env(clean_env, moto, s3proxy)
    with cogfeed.Writer("s3://out/rev.tif", W, H, 1, "float32", grid=grid(),
                        compression="none", io=fast_io(), part_size=MiB) as w:
        write_tiles(w, image, "reverse")
    data = s3_get(moto, "rev.tif")
    check_cog(data, local("none"), image, tmp_path)
    check_s3_protocol(s3proxy, len(data), part_size=PART)


def test_s3_stitcher_small_output_matches_local(moto, s3proxy, clean_env, tmp_path):
    """One part smaller than 5 MiB (the last part may be): the stitcher's
    output, with the default part size."""
    s3_env(clean_env, moto, s3proxy)
    windows = cogfeed.grid_windows(300, 200, 128, 32)
    rng = np.random.default_rng(5)
    preds = [rng.random((3, 128, 128)).astype(np.float32) for _ in windows]
    g = cogfeed.Grid(32633, width=300, height=200, geotransform=GT)
    for out in ("s3://out/stitched.tif", tmp_path / "stitched.tif"):
        with cogfeed.Stitcher(out, windows, 3, grid=g, overlap=32, tile_size=128) as st:
            for p, w in zip(preds, windows):
                st.add(p, w)
    assert s3_get(moto, "stitched.tif") == (tmp_path / "stitched.tif").read_bytes()
    # one part (or one plain PutObject): the only part may be small
    assert [r["status"] for r in s3proxy.requests("PUT")] == [200]
    assert not s3proxy.requests("DELETE")


S3_FAULTS = [
    [("PUT?partNumber", 2, "503")],
    [("PUT?partNumber", 2, "500")],
    [("PUT?partNumber", 2, "429")],
    [("PUT?partNumber", 2, "drop")],
    [("PUT?partNumber", 3, "drop-mid")],
    [("PUT?partNumber", 2, "drop-after")],
    [("PUT?partNumber", 2, "503-early")],
    [("PUT?partNumber", 2, "storm:3")],
    [("PUT?partNumber=HEADER", 1, "503")],  # the header part
    [("POST?uploads", 1, "503")],      # CreateMultipartUpload
    [("POST?uploadId", 1, "500")],     # CompleteMultipartUpload
]


@pytest.fixture(scope="module")
def header_part(moto, image):
    """The header's part number for the image at 5 MiB parts (the writer
    is deterministic: found by one clean upload)."""
    found = []

    def get(env):
        if not found:
            with Proxy(moto.endpoint) as p:
                env.setenv("AWS_ENDPOINT_URL", p.url)
                cogfeed.write("s3://out/header_probe.tif", image, grid=grid(),
                              compression="none", io=fast_io(), part_size=PART)
                found.append(min(part_number(r) for r in p.requests("PUT", "partNumber")))
        return found[0]
    return get


@pytest.mark.parametrize("faults", S3_FAULTS, ids=lambda f: "%s-%d-%s" % f[0])
def test_s3_failed_parts_are_sent_again(moto, s3proxy, clean_env, image, local,
                                        tmp_path, faults, header_part):
    s3_env(clean_env, moto, s3proxy)
    if "HEADER" in faults[0][0]:
        n = header_part(clean_env)
        clean_env.setenv("AWS_ENDPOINT_URL", s3proxy.url)
        faults = [(faults[0][0].replace("HEADER", str(n)),) + faults[0][1:]]
    s3proxy.set_faults(faults)
    key = "faults/%s_%d_%s.tif" % (faults[0][0].replace("?", "_"), faults[0][1],
                                   faults[0][2].replace(":", "_"))
    cogfeed.write("s3://out/" + key, image, grid=grid(), compression="none",
                  io=fast_io(), part_size=PART)
    data = s3_get(moto, key)
    assert data is not None
    check_cog(data, local("none"), image, tmp_path)
    puts = s3proxy.requests("PUT", "partNumber")
    faulted = [r for r in s3proxy.log if r["fault"]]
    assert len(faulted) == (3 if faults[0][2].startswith("storm") else 1), s3proxy.log
    retried_ok(puts, part_number)
    check_s3_protocol(s3proxy, len(data))
    assert s3_open_uploads(moto) == []


def test_s3_every_put_fails_aborts_the_upload(moto, s3proxy, clean_env, image):
    s3_env(clean_env, moto, s3proxy)
    s3proxy.set_faults([("PUT", 1, "503-always")])
    url = "s3://out/fail/never.tif"
    with pytest.raises(cogfeed.Error) as ei:
        with cogfeed.Writer(url, W, H, 1, "float32", grid=grid(), compression="none",
                            io=fast_io(), part_size=PART) as w:
            w.write(image)
    msg = str(ei.value)
    assert url in msg, msg
    assert_clean(msg, moto.secret)
    assert s3_get(moto, "fail/never.tif") is None
    assert s3_open_uploads(moto) == []
    aborts = s3proxy.requests("DELETE", "uploadId")
    assert aborts and aborts[-1]["status"] == 204, s3proxy.log
    assert aborts[-1]["path"] == "/out/fail/never.tif"
    assert not s3proxy.requests("POST", "uploadId"), "an upload that failed was completed"
    puts = s3proxy.requests("PUT", "partNumber")
    assert puts, "no part was tried"
    for n in {part_number(r) for r in puts}:
        tries = sum(part_number(r) == n for r in puts)
        assert tries <= MAX_RETRIES + 1, "part %d tried %d times" % (n, tries)


def test_s3_wrong_secret_is_auth_and_leaves_nothing(moto, s3proxy, clean_env, image):
    wrong = "WRONGwrongWRONG/" + moto.secret[16:]
    s3_env(clean_env, moto, s3proxy, secret=wrong)
    url = "s3://out/auth/denied.tif"
    with pytest.raises(cogfeed.Error) as ei:
        cogfeed.write(url, image[:, :600, :600], grid=grid(), io=fast_io())
    e = ei.value
    assert e.code == CF_E_AUTH and e.http_status == 403, str(e)
    assert url in str(e)
    assert_clean(str(e), wrong, moto.secret)
    assert s3_get(moto, "auth/denied.tif") is None
    assert s3_open_uploads(moto) == []


# ------------------------------------------------------ Azure (Azurite)

BLOB = "dir/out put~\u00fc.tif"  # a space, '~' and unicode in the name


def check_az_protocol(proxy, size):
    blocks = [r for r in proxy.requests("PUT", "comp=block") if r["status"] == 201]
    assert len({block_id(r) for r in blocks}) >= 3, "only %d blocks" % len(blocks)
    lists = [r for r in proxy.requests("PUT", "comp=blocklist") if r["status"] == 201]
    assert len(lists) == 1
    assert lists[0]["start"] >= max(r["time"] for r in blocks)
    last = {block_id(r): r["bytes"] for r in blocks}
    assert sum(last.values()) == size
    assert sum(b < PART for b in last.values()) <= 1, last


@pytest.mark.parametrize("compression", ["none", "deflate"])
def test_azure_write_matches_local(azurite, azproxy, clean_env, image, local, tmp_path,
                                   compression):
    az_env(clean_env, azproxy)
    name = BLOB.replace(".tif", "_%s.tif" % compression)
    cogfeed.write("az://out/" + name, image, grid=grid(), compression=compression,
                  io=fast_io(), part_size=PART)
    data = az_get(azurite, name)
    assert data is not None, "no blob az://out/" + name
    check_cog(data, local(compression), image, tmp_path)
    check_az_protocol(azproxy, len(data))


AZ_FAULTS = [
    [("PUT?comp=block", 2, "503")],
    [("PUT?comp=block", 2, "drop")],
    [("PUT?comp=block", 3, "drop-mid")],
    [("PUT?comp=block", 2, "storm:3")],
    [("PUT?comp=blocklist", 1, "500")],
]


@pytest.mark.parametrize("faults", AZ_FAULTS, ids=lambda f: "%s-%d-%s" % f[0])
def test_azure_failed_blocks_are_sent_again(azurite, azproxy, clean_env, image, local,
                                            tmp_path, faults):
    az_env(clean_env, azproxy)
    azproxy.set_faults(faults)
    name = "faults/%s_%d_%s.tif" % (faults[0][0].replace("?", "_").replace("=", "_"),
                                    faults[0][1], faults[0][2].replace(":", "_"))
    cogfeed.write("az://out/" + name, image, grid=grid(), compression="none",
                  io=fast_io(), part_size=PART)
    data = az_get(azurite, name)
    assert data is not None
    check_cog(data, local("none"), image, tmp_path)
    log = azproxy.requests("PUT")
    assert len([r for r in log if r["fault"]]) == (
        3 if faults[0][2].startswith("storm") else 1), log
    retried_ok(azproxy.requests("PUT", "comp=block"), block_id)
    assert azproxy.requests("PUT", "comp=blocklist")[-1]["status"] == 201
    check_az_protocol(azproxy, len(data))


def test_azure_every_put_fails_commits_nothing(azurite, azproxy, clean_env, image):
    az_env(clean_env, azproxy)
    azproxy.set_faults([("PUT", 1, "503-always")])
    url = "az://out/fail/never.tif"
    with pytest.raises(cogfeed.Error) as ei:
        with cogfeed.Writer(url, W, H, 1, "float32", grid=grid(), compression="none",
                            io=fast_io(), part_size=PART) as w:
            w.write(image)
    msg = str(ei.value)
    assert url in msg, msg
    from azurite import KEY
    assert_clean(msg, KEY)
    assert az_get(azurite, "fail/never.tif") is None
    assert not [r for r in azproxy.requests("PUT", "comp=blocklist") if r["status"] == 201]
    blocks = azproxy.requests("PUT", "comp=block")
    assert blocks
    for b in {block_id(r) for r in blocks}:
        assert sum(block_id(r) == b for r in blocks) <= MAX_RETRIES + 1


def test_azure_wrong_key_is_auth_and_leaves_nothing(azurite, azproxy, clean_env, image):
    wrong = base64.b64encode(b"\x01" * 64).decode()
    az_env(clean_env, azproxy, key=wrong)
    url = "az://out/auth/denied.tif"
    with pytest.raises(cogfeed.Error) as ei:
        cogfeed.write(url, image[:, :600, :600], grid=grid(), io=fast_io())
    e = ei.value
    assert e.code == CF_E_AUTH and e.http_status == 403, str(e)
    assert url in str(e)
    assert_clean(str(e), wrong)
    assert az_get(azurite, "auth/denied.tif") is None


def test_azure_no_empty_block_when_a_level_fills_its_parts_exactly(
        azurite, azproxy, clean_env, image, local, tmp_path):
    """The full resolution uncompressed is 25 x 1 MiB tiles, exactly five
    5 MiB parts: no zero-byte Put Block may follow (Azure answers 400 to
    an empty block; Azurite takes it, see Azure/Azurite#329).  Last in
    the file: ctest runs pytest with -x."""
    az_env(clean_env, azproxy)
    cogfeed.write("az://out/exact.tif", image, grid=grid(), compression="none",
                  io=fast_io(), part_size=PART)
    check_cog(az_get(azurite, "exact.tif"), local("none"), image, tmp_path)
    empty = [block_id(r) for r in azproxy.requests("PUT", "comp=block") if r["bytes"] == 0]
    assert not empty, "zero-byte blocks sent: %s" % empty


def test_s3_tile_of_a_sent_row_is_refused_and_nothing_is_left(moto, s3proxy, clean_env,
                                                              image):
    """Locally a tile written twice replaces the first; once its row went
    up it cannot: StateError naming the tile, and the with block's
    exception aborts the upload.  (Also the abort with the GIL released:
    held, it waited out the request deadline on this process's proxy and
    left the upload open.)"""
    s3_env(clean_env, moto, s3proxy)
    with pytest.raises(cogfeed.StateError) as ei:
        with cogfeed.Writer("s3://out/twice.tif", W, H, 1, "float32", grid=grid(),
                            compression="none", io=fast_io(), part_size=PART) as w:
            write_tiles(w, image, "rows")
            x, y, tw, th = w.tile_window(0, 0)
            w.write_tile(0, 0, image[:, y:y + th, x:x + tw])
    assert "tile 0,0" in str(ei.value) and "s3://out/twice.tif" in str(ei.value)
    assert s3_get(moto, "twice.tif") is None
    assert s3_open_uploads(moto) == []


@pytest.mark.parametrize("url", ["https://example.invalid/a.tif"])
def test_stores_not_written_are_refused_by_name(clean_env, url):
    clean_env.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "t0ken")
    with pytest.raises(cogfeed.UnsupportedError) as ei:
        cogfeed.Writer(url, 64, 64, 1, "uint8")
    assert url.split("/")[0] in str(ei.value) and "t0ken" not in str(ei.value)


# ------------------------------------------ found by review (each failed before)

@pytest.mark.parametrize("url,env,status", [
    ("s3://bucket/x.tif", {}, cogfeed.Status.AUTH),          # no AWS credentials
    ("az://c/x.tif", {}, None),                               # no Azure account
    ("ftp://h/x.tif", {}, cogfeed.Status.ARG),                # unknown scheme
    ("s3://bucket", {"AWS_NO_SIGN_REQUEST": "YES"}, cogfeed.Status.ARG),  # no key
])
def test_urls_that_cannot_start_an_upload_are_errors_not_crashes(clean_env, url, env, status):
    """cf__upload_abort dereferenced the auth handle it never got."""
    for k, v in env.items():
        clean_env.setenv(k, v)
    with pytest.raises(cogfeed.Error) as ei:
        cogfeed.Writer(url, 64, 64, 1, "uint8")
    if status is not None:
        assert ei.value.code == status, ei.value


def test_part_size_errors_name_the_url_without_its_sas(clean_env):
    """The part-size check printed the raw URL, SAS signature included."""
    url = ("https://acct.blob.core.windows.net/c/x.tif"
           "?sv=2021-08-06&sp=rcw&sig=TOPSECRETSIG%3D")
    with pytest.raises(cogfeed.ArgumentError) as ei:
        cogfeed.Writer(url, 64, 64, 1, "uint8", part_size=3 << 30)
    msg = str(ei.value)
    assert "acct.blob.core.windows.net/c/x.tif" in msg and "part_size" in msg
    assert "TOPSECRET" not in msg and "sig=" not in msg


def test_azure_two_writers_to_one_blob_never_mix(azurite, azproxy, clean_env, image,
                                                tmp_path):
    """Block ids were the same for every upload: a second writer to the
    same blob overwrote the first one's uncommitted blocks, and the first
    then committed a mix, reporting success.  Now each upload's ids carry
    a nonce: the second commit drops the first writer's blocks (Azure
    drops uncommitted blocks a Put Block List leaves out), the first
    writer fails saying why, and the blob is the second's, whole."""
    az_env(clean_env, azproxy)
    other = (image[:, ::-1, :] + 1).astype(image.dtype)
    with pytest.raises(cogfeed.HTTPError) as ei:
        with cogfeed.Writer("az://out/shared.tif", W, H, 1, "float32", grid=grid(),
                            compression="none", io=fast_io(), part_size=PART) as a:
            tiles = [(tx, ty) for ty in range(a.tiles[1]) for tx in range(a.tiles[0])]
            half = len(tiles) // 2
            for tx, ty in tiles[:half]:
                x, y, tw, th = a.tile_window(tx, ty)
                a.write_tile(tx, ty, image[:, y:y + th, x:x + tw])
            # a whole other write to the same blob, committed in between
            cogfeed.write("az://out/shared.tif", other, grid=grid(), compression="none",
                          io=fast_io(), part_size=PART)
            for tx, ty in tiles[half:]:
                x, y, tw, th = a.tile_window(tx, ty)
                a.write_tile(tx, ty, image[:, y:y + th, x:x + tw])
    assert "InvalidBlockList" in str(ei.value) and "another writer" in str(ei.value)
    b_local = tmp_path / "other.tif"
    cogfeed.write(str(b_local), other, grid=grid(), compression="none")
    assert az_get(azurite, "shared.tif") == b_local.read_bytes()


def test_s3_complete_whose_answer_was_lost_is_a_success(moto, s3proxy, clean_env, image,
                                                       local, tmp_path):
    """The first Complete made the object and its answer was lost; the
    retry gets 404 (what real stores answer for a finished upload).  That
    was reported as a failure although the object existed."""
    s3_env(clean_env, moto, s3proxy)
    s3proxy.set_faults([("POST?uploadId", 1, "drop-after"), ("POST?uploadId", 2, "404")])
    cogfeed.write("s3://out/lost_answer.tif", image, grid=grid(), compression="none",
                  io=fast_io(), part_size=PART)
    check_cog(s3_get(moto, "lost_answer.tif"), local("none"), image, tmp_path)
    assert s3proxy.requests("HEAD"), "the object was not checked"
    assert not s3proxy.requests("DELETE")


def test_s3_stitcher_rows_without_patches_do_not_hold_back_the_rest(moto, s3proxy,
                                                                    clean_env):
    """A row of tiles no patch reaches was finished (sparse) only at close,
    so every row after it waited in memory: now the stitcher says so at
    open and the parts go up while patches come."""
    s3_env(clean_env, moto, s3proxy)
    Wd, Hd, P = 1536, 1536, 512
    windows = [w for w in cogfeed.grid_windows(Wd, Hd, P, 0) if w[1] >= P]  # no top row
    g = cogfeed.Grid(32633, width=Wd, height=Hd, geotransform=GT)
    rng = np.random.default_rng(9)
    with cogfeed.Stitcher("s3://out/holes.tif", windows, 4, grid=g, blend="mean",
                          compression="none", io=fast_io(), part_size=PART) as st:
        for w in windows:
            st.add(rng.random((4, P, P)).astype(np.float32), w)
        deadline = time.monotonic() + 15
        while not s3proxy.requests("PUT", "partNumber") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert s3proxy.requests("PUT", "partNumber"), "nothing went up before close()"
    with cogfeed.open("s3://out/holes.tif", io=cogfeed.IO()) as c:
        top = c.read(window=(0, 0, Wd, P))
    assert np.isnan(top).all()


# ------------------------------------------------- Cloud Storage (gs://)

TOKEN = "ya29.test-token"


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    """Cloud Storage's XML API as the tests can run it: its multipart
    upload is S3's protocol (the same requests and answers) with an OAuth
    bearer token, so a moto that checks no signature serves the protocol
    and the proxy in front of it checks the token (no emulator of that
    API installs from PyPI, npm or Debian).  Bucket "gout"."""
    from moto_server import Moto
    try:
        m = Moto().start()
    except RuntimeError as e:
        pytest.skip("moto server not available: %s" % e)
    try:
        m.set_free_actions(10 ** 9)      # no SigV4: the proxy checks the token
        import boto3
        m.s3 = boto3.client("s3", endpoint_url=m.endpoint, region_name=m.region,
                            aws_access_key_id="x", aws_secret_access_key="x")
        m.s3.create_bucket(Bucket="gout")
        with Proxy(m.endpoint, bearer=TOKEN) as p:
            m.proxy = p
            yield m
    finally:
        m.stop()


def gcs_env(env, gcs, token=TOKEN):
    env.setenv("STORAGE_EMULATOR_HOST", gcs.proxy.base)
    env.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", token)


def gcs_get(gcs, key):
    from botocore.exceptions import ClientError
    try:
        return gcs.s3.get_object(Bucket="gout", Key=key)["Body"].read()
    except ClientError:
        return None


def test_gs_write_matches_local_and_reads_back(gcs, clean_env, image, local, tmp_path):
    gcs_env(clean_env, gcs)
    gcs.proxy.set_faults([("PUT?partNumber", 2, "503")])   # a part sent again
    cogfeed.write("gs://gout/pred/cog.tif", image, grid=grid(), compression="deflate",
                  io=fast_io(), part_size=PART)
    data = gcs_get(gcs, "pred/cog.tif")
    assert data is not None, "no object gs://gout/pred/cog.tif"
    check_cog(data, local("deflate"), image, tmp_path)
    log = gcs.proxy.log
    assert all(r["headers"].get("authorization") is None for r in log)  # taken off
    assert [r["method"] for r in log][0] == "POST" and "uploads" in log[0]["query"]
    retried_ok(gcs.proxy.requests("PUT", "partNumber"), part_number)
    assert gcs.s3.list_multipart_uploads(Bucket="gout").get("Uploads", []) == []
    # and read back through gs:// (ranges with the same token)
    with cogfeed.open("gs://gout/pred/cog.tif", io=cogfeed.IO()) as c:
        np.testing.assert_array_equal(c.read(window=(100, 200, 700, 300)),
                                      image[:, 200:500, 100:800])


def test_gs_wrong_token_and_failed_upload(gcs, clean_env, image):
    gcs_env(clean_env, gcs, token="ya29.wrong")
    gcs.proxy.set_faults([])
    with pytest.raises(cogfeed.Error) as ei:
        cogfeed.write("gs://gout/denied.tif", image, grid=grid(), io=fast_io(),
                      part_size=PART)
    msg = str(ei.value)
    assert ei.value.http_status == 401 and "gs://gout/denied.tif" in msg, msg
    assert "AuthenticationRequired" in msg and "ya29" not in msg, msg
    # Every part refused: the upload is aborted, nothing is left.
    gcs_env(clean_env, gcs)
    gcs.proxy.set_faults([("PUT", 1, "503-always")])
    with pytest.raises(cogfeed.Error) as ei:
        with cogfeed.Writer("gs://gout/never.tif", W, H, 1, "float32", grid=grid(),
                            compression="none", io=fast_io(), part_size=PART) as w:
            w.write(image)
    assert "gs://gout/never.tif" in str(ei.value) and "ya29" not in str(ei.value)
    assert [r["status"] for r in gcs.proxy.requests("DELETE", "uploadId")] == [204]
    assert gcs_get(gcs, "never.tif") is None and gcs_get(gcs, "denied.tif") is None
    assert gcs.s3.list_multipart_uploads(Bucket="gout").get("Uploads", []) == []

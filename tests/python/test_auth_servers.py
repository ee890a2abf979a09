"""Credentials against real servers: S3 SigV4 on moto, Azure SAS and Shared
Key on Azurite, GCS bearer tokens on nginx standing in for the emulator.

moto is started so that it enforces SigV4 (tests/servers/moto_server.py):
a signed request gets its bytes, a wrong secret or an unsigned request 403.
Azurite checks Shared Key and SAS signatures of its development account.
Every read must give the same pixels as the local file; every failure must
be a cogfeed.Error with the HTTP status and the service's error code, and
must not contain the secret that was used.
"""

import os
import socket
import sys
import datetime as dt

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
sys.path.insert(0, HERE)

import conformance as C  # noqa: E402  (GDAL through rasterio)
import cogfeed  # noqa: E402


CF_E_AUTH, CF_E_NOTFOUND = cogfeed.Status.AUTH, cogfeed.Status.NOTFOUND
WINDOWS = [(0, 0, 256, 256), (200, 150, 300, 200), (650, 450, 100, 100), (0, 0, 700, 500)]

# Every credential variable cogfeed reads, cleared around each test so that
# the machine's own environment cannot leak in.
CRED_VARS = [
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
    "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_NO_SIGN_REQUEST",
    "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_CONNECTION_STRING", "GOOGLE_OAUTH_ACCESS_TOKEN", "STORAGE_EMULATOR_HOST",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for v in CRED_VARS:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


@pytest.fixture(scope="module")
def cog_file(tmp_path_factory):
    """A 3-band uint16 DEFLATE COG with overviews, written by GDAL."""
    d = tmp_path_factory.mktemp("authcog")
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:500, 0:700]
    a = np.stack([((xx * (b + 1) + yy * 3) % 4096 + rng.integers(0, 64, (500, 700)))
                  for b in range(3)]).astype(np.uint16)
    return C.write_array(d / "cog.tif", a, "COG", COMPRESS="DEFLATE", PREDICTOR=2,
                         BLOCKSIZE=256)


def local_reads(path):
    with cogfeed.open(path) as c:
        return [c.read(window=w) for w in WINDOWS]


def check_same(url, path):
    """Open url with a fresh IO (no header cache shared with other tests)
    and compare info and windows with the local file."""
    io = cogfeed.IO(max_retries=1)
    with cogfeed.open(url, io=io) as r, cogfeed.open(path) as l:
        assert (r.width, r.height, r.count, r.dtype) == (l.width, l.height, l.count, l.dtype)
        for w, exp in zip(WINDOWS, local_reads(path)):
            got = r.read(window=w)
            assert got.dtype == exp.dtype and got.shape == exp.shape
            assert np.array_equal(got, exp), "window %s differs" % (w,)
        # Reference: GDAL's own read of the local file.
        with C.open_ref(path) as ds:
            assert np.array_equal(r.read(window=(0, 0, 700, 500)), ds.read())
    assert io.stats()["requests"] >= 1


def open_fails(url):
    """Open and read url; return the cogfeed.Error raised."""
    with pytest.raises(cogfeed.Error) as ei:
        with cogfeed.open(url, io=cogfeed.IO(max_retries=1)) as c:
            c.read(window=(0, 0, 64, 64))
    return ei.value


def assert_clean(text, *secrets):
    for s in secrets:
        assert s not in text, "secret leaked into: %s" % text
    for marker in ("sig=", "X-Amz-Signature", "X-Amz-Credential", "Authorization:",
                   "AccountKey", "SharedKey ", "Bearer "):
        assert marker not in text, "%r in: %s" % (marker, text)


# ---------------------------------------------------------------- S3 (moto)

@pytest.fixture(scope="module")
def moto(cog_file):
    from moto_server import Moto
    try:
        m = Moto().start()
    except RuntimeError as e:
        pytest.skip("moto server not available: %s" % e)
    try:
        m.key_id, m.secret = m.setup("cogs", {"dir/cog.tif": cog_file})
        yield m
    finally:
        m.stop()


def test_s3_signed_read_matches_local(moto, cog_file, clean_env):
    for k, v in moto.env(moto.key_id, moto.secret).items():
        clean_env.setenv(k, v)
    check_same("s3://cogs/dir/cog.tif", cog_file)


def test_s3_session_token(moto, cog_file, clean_env):
    kid, secret, token = moto.session
    for k, v in moto.env(kid, secret, AWS_SESSION_TOKEN=token).items():
        clean_env.setenv(k, v)
    check_same("s3://cogs/dir/cog.tif", cog_file)
    # A wrong token is refused, and named nowhere.
    clean_env.setenv("AWS_SESSION_TOKEN", "X" + token[1:])
    e = open_fails("s3://cogs/dir/cog.tif")
    assert e.code == CF_E_AUTH or e.http_status in (400, 403), str(e)
    assert "InvalidToken" in str(e) or "InvalidClientTokenId" in str(e), str(e)
    assert_clean(str(e), token[1:], secret)


def test_s3_region_from_default_region(moto, cog_file, clean_env):
    # moto checks the region in the credential scope against its own
    # signature: AWS_DEFAULT_REGION must reach the signer.
    e = moto.env(moto.key_id, moto.secret)
    del e["AWS_REGION"]
    for k, v in e.items():
        clean_env.setenv(k, v)
    clean_env.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    check_same("s3://cogs/dir/cog.tif", cog_file)


def test_s3_wrong_secret_is_403_signature_mismatch(moto, clean_env):
    wrong = "WRONGwrongWRONG/" + moto.secret[16:]
    for k, v in moto.env(moto.key_id, wrong).items():
        clean_env.setenv(k, v)
    e = open_fails("s3://cogs/dir/cog.tif")
    msg = str(e)
    assert e.http_status == 403 and e.code == CF_E_AUTH, msg
    assert "SignatureDoesNotMatch" in msg and "403" in msg
    assert "s3://cogs/dir/cog.tif" in msg
    assert_clean(msg, wrong, moto.secret)


def test_s3_unknown_key_id_is_403(moto, clean_env):
    for k, v in moto.env("AKIAIOSFODNN7EXAMPLE", moto.secret).items():
        clean_env.setenv(k, v)
    e = open_fails("s3://cogs/dir/cog.tif")
    assert e.http_status == 403 and e.code == CF_E_AUTH, str(e)
    assert "InvalidAccessKeyId" in str(e)
    assert_clean(str(e), moto.secret)


def test_s3_unsigned_request_is_403(moto, clean_env):
    for k, v in moto.env(None, None, AWS_NO_SIGN_REQUEST="YES").items():
        clean_env.setenv(k, v)
    e = open_fails("s3://cogs/dir/cog.tif")
    assert e.http_status == 403 and e.code == CF_E_AUTH, str(e)


def test_s3_no_credentials_is_a_clear_error(moto, clean_env):
    for k, v in moto.env(None, None).items():
        clean_env.setenv(k, v)
    e = open_fails("s3://cogs/dir/cog.tif")
    assert e.code == CF_E_AUTH and "AWS_NO_SIGN_REQUEST" in str(e)


def test_s3_missing_object_is_404(moto, clean_env):
    for k, v in moto.env(moto.key_id, moto.secret).items():
        clean_env.setenv(k, v)
    e = open_fails("s3://cogs/dir/nope.tif")
    assert e.http_status == 404 and e.code == CF_E_NOTFOUND, str(e)
    assert "NoSuchKey" in str(e) and "s3://cogs/dir/nope.tif" in str(e)
    assert_clean(str(e), moto.secret)


# ---------------------------------------------------------- Azure (Azurite)

BLOB = "dir/a b+c~\u00fc.tif"  # space, '+', '~' and unicode in the blob name


@pytest.fixture(scope="module")
def azurite(cog_file):
    from azurite import Azurite
    try:
        az = Azurite().start()
    except RuntimeError as e:
        pytest.skip("azurite not available: %s" % e)
    try:
        az.create_container("cogs")
        az.put_file("cogs", BLOB, cog_file)
        yield az
    finally:
        az.stop()


def test_azure_shared_key_connection_string(azurite, cog_file, clean_env):
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string())
    check_same("az://cogs/" + BLOB, cog_file)


def test_azure_sas_in_connection_string(azurite, cog_file, clean_env):
    sas = azurite.sas("cogs", BLOB)
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING",
                     "BlobEndpoint=%s;SharedAccessSignature=?%s" % (azurite.endpoint, sas))
    check_same("az://cogs/" + BLOB, cog_file)


def test_azure_sas_in_url(azurite, cog_file, clean_env):
    # The container SAS carried by the URL itself (plain http:// form).
    sas = azurite.sas("cogs")
    url = "%s/cogs/%s?%s" % (azurite.endpoint, "dir/a%20b%2Bc~%C3%BC.tif", sas)
    check_same(url, cog_file)


def test_azure_wrong_key_is_403_with_code(azurite, clean_env):
    import base64
    wrong = base64.b64encode(b"\x01" * 64).decode()
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string(key=wrong))
    e = open_fails("az://cogs/" + BLOB)
    msg = str(e)
    assert e.http_status == 403 and e.code == CF_E_AUTH, msg
    # Azure says AuthenticationFailed, Azurite AuthorizationFailure.
    assert "AuthorizationFailure" in msg or "AuthenticationFailed" in msg, msg
    assert_clean(msg, wrong)


def test_azure_expired_sas_is_403_without_sig(azurite, clean_env):
    sas = azurite.sas("cogs", BLOB, expiry=dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc))
    sig = [p for p in sas.split("&") if p.startswith("sig=")][0][4:]
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING",
                     "BlobEndpoint=%s;SharedAccessSignature=%s" % (azurite.endpoint, sas))
    e = open_fails("az://cogs/" + BLOB)
    assert e.http_status == 403 and e.code == CF_E_AUTH, str(e)
    assert_clean(str(e), sig, sas)
    # Same SAS in the URL: the message names the URL without its query.
    e = open_fails("%s/cogs/x.tif?%s" % (azurite.endpoint, sas))
    assert e.http_status in (403, 404)
    assert_clean(str(e), sig, sas)


def test_azure_missing_blob_is_404(azurite, clean_env):
    clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string())
    e = open_fails("az://cogs/nope.tif")
    assert e.http_status == 404 and e.code == CF_E_NOTFOUND, str(e)
    assert "BlobNotFound" in str(e) and "az://cogs/nope.tif" in str(e)


def _port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def test_azure_use_development_storage(cog_file, clean_env):
    # UseDevelopmentStorage=true means Azurite's fixed port 10000.
    from azurite import Azurite
    if not _port_free(10000):
        pytest.skip("port 10000 is taken")
    az = Azurite(port=10000)
    try:
        az.start()
    except RuntimeError as e:
        pytest.skip("azurite not available: %s" % e)
    with az:  # stops it
        az.create_container("dev")
        az.put_file("dev", "cog.tif", cog_file)
        clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", "UseDevelopmentStorage=true")
        check_same("az://dev/cog.tif", cog_file)


# --------------------------------------------------- GCS (nginx as emulator)

@pytest.fixture(scope="module")
def gcs(cog_file, tmp_path_factory):
    from servers import Nginx
    root = tmp_path_factory.mktemp("gcsroot")
    os.makedirs(root / "bucket" / "dir")
    os.symlink(cog_file, root / "bucket" / "dir" / "cog.tif")
    try:
        srv = Nginx(str(root)).start()
    except (RuntimeError, OSError) as e:
        pytest.skip("nginx not available: %s" % e)
    try:
        yield srv
    finally:
        srv.stop()


def test_gcs_bearer_token(gcs, cog_file, clean_env):
    clean_env.setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:%d" % gcs.port)
    clean_env.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.test-token")
    check_same("gs://bucket/dir/cog.tif", cog_file)
    assert gcs.last_header("/bucket/dir/cog.tif", "auth") == "Bearer ya29.test-token"


def test_gcs_anonymous(gcs, cog_file, clean_env):
    clean_env.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:%d/" % gcs.port)
    check_same("gs://bucket/dir/cog.tif", cog_file)
    assert gcs.last_header("/bucket/dir/cog.tif", "auth") == ""


def test_gcs_missing_object_hides_token(gcs, clean_env):
    clean_env.setenv("STORAGE_EMULATOR_HOST", "127.0.0.1:%d" % gcs.port)
    clean_env.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.SECRET-token")
    e = open_fails("gs://bucket/dir/nope.tif")
    assert e.http_status == 404 and e.code == CF_E_NOTFOUND, str(e)
    assert "gs://bucket/dir/nope.tif" in str(e)
    assert_clean(str(e), "ya29.SECRET-token")

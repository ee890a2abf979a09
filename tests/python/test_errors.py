"""cogfeed's errors.  One status table (CF_STATUS_TABLE in cogfeed.h)
gives the C enum, cf_status_name(), cf_strerror() and Python's
cogfeed.Status and exception classes; tests/unit/test_common_status.c
checks the C half.  Here: the Python classes agree with the table, and
each class is raised by its real cause and caught by the builtin it
subclasses (``except FileNotFoundError`` catches a missing file, a 403 is
a PermissionError, ...).  Remote causes come from the local nginx of
tests/servers (faults.lua)."""
import builtins
import os
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
from servers import Nginx, free_port  # noqa: E402
from test_loader import expected, make_cog  # noqa: E402

import cogfeed  # noqa: E402
from cogfeed import _cogfeed  # noqa: E402

TABLE = _cogfeed.status_table()
ROW = {r[4]: r for r in TABLE if r[4]}  # by Python class name
# Quick retries and deadlines: the causes are the same, the suite stays fast.
FAST = dict(max_retries=0, retry_base_ms=10, retry_max_ms=50, connect_timeout_s=2,
            request_timeout_s=10)


# -- the table ---------------------------------------------------------------

def test_status_enum_names_and_classes_come_from_one_table():
    assert [r[1] for r in TABLE] == list(range(len(TABLE)))
    assert [m.name for m in cogfeed.Status] == [r[6] for r in TABLE]
    for name, code, text, doc, pyclass, pybase, member in TABLE:
        assert cogfeed.Status[member] == code and cogfeed.Status(code).name == member
        assert _cogfeed.status_name(code) == name
        assert name == ("CF_OK" if member == "OK" else "CF_E_" + member)
        if not pyclass:  # OK and END are not errors
            assert member in ("OK", "END")
            continue
        cls = getattr(cogfeed, pyclass)
        assert cls is getattr(_cogfeed, pyclass) and pyclass in cogfeed.__all__
        assert cls.__module__ == "cogfeed" and cls.__name__ == pyclass
        assert cls.code is cogfeed.Status(code)
        assert issubclass(cls, cogfeed.Error) and issubclass(cls, RuntimeError)
        if pybase:
            assert issubclass(cls, getattr(builtins, pybase)), (cls, pybase)
        assert name in cls.__doc__ and doc in cls.__doc__
        made = cls("made in Python")  # has the attributes of its status too
        assert (made.code, made.name, made.http_status) == (code, text, 0)
    # No class that the table does not name, none missing.
    subs = {n for n in cogfeed.__all__
            if isinstance(getattr(cogfeed, n), type)
            and issubclass(getattr(cogfeed, n), cogfeed.Error)} - {"Error"}
    assert subs == set(ROW)
    assert _cogfeed.status_name(len(TABLE)) is None
    assert _cogfeed.status_name(-1) is None


def test_builtin_bases():
    """What a user would catch: file-reading failures are OSErrors (as
    rasterio's RasterioIOError), a bad argument a ValueError."""
    assert issubclass(cogfeed.NotFoundError, FileNotFoundError)
    assert issubclass(cogfeed.AccessDeniedError, PermissionError)
    assert issubclass(cogfeed.TimedOutError, TimeoutError)
    assert issubclass(cogfeed.ArgumentError, ValueError)
    assert issubclass(cogfeed.OutOfMemoryError, MemoryError)
    for c in (cogfeed.InputOutputError, cogfeed.FormatError, cogfeed.UnsupportedError,
              cogfeed.CodecError, cogfeed.HTTPError, cogfeed.ObjectChangedError,
              cogfeed.RangeRequestError):
        assert issubclass(c, OSError), c
    for c in (cogfeed.LimitError, cogfeed.StateError):
        assert not issubclass(c, (OSError, ValueError)), c


def check(e, cls, *, http=0, names=None):
    """e is exactly cls, with the attributes cf__py_raise sets."""
    assert type(e) is cls, (type(e), e)
    assert isinstance(e, cogfeed.Error) and e.code is cls.code
    assert e.code == ROW[cls.__name__][1] and e.name == ROW[cls.__name__][2]
    assert e.http_status == http, (e.http_status, e)
    if names:
        assert names in str(e), e
    # It survives pickling (errors cross process boundaries in loaders).
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls and str(back) == str(e) and back.code == e.code


# -- local causes --------------------------------------------------------------

@pytest.fixture(scope="module")
def cog(tmp_path_factory):
    """A 512 x 512 DEFLATE COG of 256 px tiles, no mask."""
    d = tmp_path_factory.mktemp("errors")
    return make_cog(str(d / "a.tif"), expected(512, 512, 0, 0, 1), block=256)


def strip_tiff(path, compression, data=b"\0" * 256):
    """A 16 x 16 uint8 TIFF of one strip with the given Compression tag."""
    tags = [(256, 3, 16), (257, 3, 16), (258, 3, 8), (259, 3, compression),
            (262, 3, 1), (273, 4, None), (277, 3, 1), (278, 3, 16), (279, 4, len(data))]
    start = 8 + 2 + len(tags) * 12 + 4
    b = b"II" + struct.pack("<HIH", 42, 8, len(tags))
    for tag, typ, value in tags:
        value = start if value is None else value
        b += struct.pack("<HHIHH" if typ == 3 else "<HHII", tag, typ, 1, value,
                         *((0,) if typ == 3 else ()))
    b += struct.pack("<I", 0) + data
    with open(path, "wb") as f:
        f.write(b)
    return path


def test_missing_file_is_file_not_found(tmp_path):
    path = str(tmp_path / "nope.tif")
    try:
        cogfeed.open(path)
    except FileNotFoundError as e:
        check(e, cogfeed.NotFoundError, names="nope.tif")
    else:
        pytest.fail("no error")
    # The loader's opens too.
    with pytest.raises(FileNotFoundError, match="nope.tif") as ei:
        cogfeed.Loader([path])
    check(ei.value, cogfeed.NotFoundError)


def test_bad_argument_is_value_error():
    with pytest.raises(ValueError, match="not a CRS") as ei:
        cogfeed.CRS("not a crs")
    check(ei.value, cogfeed.ArgumentError, names="not a crs")


def test_malformed_file_is_format_error(tmp_path):
    path = tmp_path / "bad.tif"
    path.write_bytes(b"II*\0" + struct.pack("<I", 1 << 30) + bytes(100))
    with pytest.raises(OSError, match="past end of file") as ei:
        cogfeed.open(str(path))
    check(ei.value, cogfeed.FormatError, names="bad.tif")


def test_unknown_compression_is_unsupported(tmp_path):
    assert cogfeed.open(strip_tiff(str(tmp_path / "ok.tif"), 1)).read().shape == (1, 16, 16)
    with pytest.raises(OSError, match="compression 12345") as ei:
        cogfeed.open(strip_tiff(str(tmp_path / "odd.tif"), 12345))
    check(ei.value, cogfeed.UnsupportedError, names="odd.tif")


def test_corrupt_tile_is_codec_error(cog):
    with cogfeed.open(cog) as c:
        with pytest.raises(OSError, match="corrupt") as ei:
            c.decode_tile(b"not a zlib stream" * 40, 0)
    check(ei.value, cogfeed.CodecError, names="tile 0")


def test_safety_cap_is_limit_error(cog):
    with cogfeed.open(cog) as c:
        with pytest.raises(cogfeed.LimitError, match="inflight_bytes") as ei:
            cogfeed.read_many([(c, None)], inflight_bytes=1000)
    check(ei.value, cogfeed.LimitError, names="a.tif")


def test_no_mask_is_state_error(cog):
    with cogfeed.open(cog) as c:
        assert not c.has_mask
        with pytest.raises(RuntimeError, match="no internal mask") as ei:
            c.read_mask()
    check(ei.value, cogfeed.StateError, names="a.tif")


NOMEM_CHILD = r"""
import pickle, resource, sys
import cogfeed
path = sys.argv[1]
cogfeed.open(path).close()  # everything loaded before the cap
vm = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.RLIM_INFINITY))
try:
    # One ring slot of 4096 patches of 512 x 512 bytes: 1 GiB, over the cap.
    cogfeed.Loader([path], patch_size=512, batch_size=4096, prefetch=1)
except MemoryError as e:
    sys.stdout.buffer.write(pickle.dumps(e))
"""


def test_allocation_failure_is_memory_error(cog):
    """A loader whose ring does not fit the address space (RLIMIT_AS, in a
    child): cogfeed.OutOfMemoryError, caught as MemoryError."""
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("AddressSanitizer reserves far more address space than any cap")
    p = subprocess.run([sys.executable, "-c", NOMEM_CHILD, cog], capture_output=True,
                       timeout=120)
    assert p.returncode == 0 and p.stdout, p.stderr.decode()[-2000:]
    check(pickle.loads(p.stdout), cogfeed.OutOfMemoryError, names="ring slot")


# -- remote causes -------------------------------------------------------------

@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """nginx serving a 512 x 512 COG of noise (so that its tiles lie past
    the header's first read)."""
    d = tmp_path_factory.mktemp("errors_srv")
    noise = np.random.default_rng(5).integers(0, 256, (1, 512, 512), dtype=np.uint8)
    make_cog(str(d / "n.tif"), noise, block=256)
    with Nginx(str(d)) as s:
        yield s


def test_403_is_permission_error(srv):
    try:
        cogfeed.open(srv.url("n.tif", "status-403-0"), io=cogfeed.IO(**FAST))
    except PermissionError as e:
        check(e, cogfeed.AccessDeniedError, http=403, names="n.tif")
    else:
        pytest.fail("no error")


def test_404_is_file_not_found(srv):
    with pytest.raises(FileNotFoundError) as ei:
        cogfeed.open(srv.url("gone.tif"), io=cogfeed.IO(**FAST))
    check(ei.value, cogfeed.NotFoundError, http=404, names="gone.tif")


def test_server_error_is_http_error(srv):
    with pytest.raises(OSError, match="502") as ei:
        cogfeed.open(srv.url("n.tif", "status-502-0"), io=cogfeed.IO(**FAST))
    check(ei.value, cogfeed.HTTPError, http=502, names="n.tif")


def test_connection_refused_is_io_error():
    url = "http://127.0.0.1:%d/x.tif" % free_port()  # nothing listens there
    with pytest.raises(OSError, match="connect") as ei:
        cogfeed.open(url, io=cogfeed.IO(**FAST))
    check(ei.value, cogfeed.InputOutputError, names="x.tif")


def test_stalled_server_is_timeout_error(srv):
    """Headers and 1 KiB, then nothing: the request deadline ends it."""
    io = cogfeed.IO(**dict(FAST, max_retries=50, request_timeout_s=2, low_speed_time_s=1))
    with pytest.raises(TimeoutError) as ei:
        cogfeed.open(srv.url("n.tif", "slow-0"), io=io)
    check(ei.value, cogfeed.TimedOutError, http=206, names="stalled")


def test_ignored_range_is_range_error(srv):
    with pytest.raises(OSError) as ei:
        cogfeed.open(srv.url("n.tif", "full200"), io=cogfeed.IO(**FAST))
    check(ei.value, cogfeed.RangeRequestError, http=200, names="n.tif")


def test_object_replaced_is_changed_error(srv):
    """ETag "v1" when the header was read, "v2" for the tiles (412)."""
    c = cogfeed.open(srv.url("n.tif", "etag-change"), io=cogfeed.IO(**FAST))
    with pytest.raises(OSError, match="412") as ei:
        c.read((300, 300, 16, 16))
    check(ei.value, cogfeed.ObjectChangedError, http=412, names="n.tif")

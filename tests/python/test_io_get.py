"""cogfeed.IO.get / cf_io_get: a whole small object (a STAC catalog's JSON)
through the io, from a local file, file:// and the test nginx (range-capable,
and a server that ignores Range), with the size cap checked before the
rest of the object is fetched."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
from servers import Nginx  # noqa: E402

import cogfeed  # noqa: E402

BIG = 300_000


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("get")
    rnd = __import__("random").Random(11)
    (d / "big.bin").write_bytes(bytes(rnd.getrandbits(8) for _ in range(BIG)))
    (d / "small.json").write_bytes(b'{"type": "Feature"}')
    return d


@pytest.fixture(scope="module")
def srv(data):
    with Nginx(str(data)) as s:
        yield s


def fast_io():
    return cogfeed.IO(retry_base_ms=20, retry_max_ms=200, request_timeout_s=20,
                      connect_timeout_s=2)


def test_local_path_and_file_url(data):
    io = fast_io()
    want = (data / "big.bin").read_bytes()
    assert io.get(str(data / "big.bin")) == want
    assert io.get("file://" + str(data / "big.bin")) == want
    assert io.get(data / "small.json") == b'{"type": "Feature"}'


def test_local_oversize_and_missing_refused(data):
    io = fast_io()
    with pytest.raises(cogfeed.LimitError, match="big.bin: 300000 bytes, more than the 1000"):
        io.get(str(data / "big.bin"), max_bytes=1000)
    with pytest.raises(cogfeed.NotFoundError, match="nope.json"):
        io.get(str(data / "nope.json"))
    with pytest.raises(ValueError):
        io.get(str(data / "small.json"), max_bytes=0)


def test_http_whole_object_in_range_reads(srv, data):
    io = fast_io()
    want = (data / "big.bin").read_bytes()
    before = srv.requests("/big.bin")
    assert io.get(srv.url("big.bin")) == want
    # The head read learns the size, then one read for the rest.
    assert srv.requests("/big.bin") - before == 2
    assert io.get(srv.url("small.json")) == b'{"type": "Feature"}'


def test_http_oversize_refused_before_the_rest_is_fetched(srv):
    io = fast_io()
    s0 = io.stats()["bytes_fetched"]
    before = srv.requests("/big.bin")
    with pytest.raises(cogfeed.LimitError) as ei:
        io.get(srv.url("big.bin") + "?sig=SECRET", max_bytes=100_000)
    msg = str(ei.value)
    assert "300000 bytes, more than the 100000 allowed" in msg
    assert srv.url("big.bin") in msg and "SECRET" not in msg
    assert srv.requests("/big.bin") - before == 1
    assert io.stats()["bytes_fetched"] - s0 <= 65536


def test_server_ignoring_range(srv, data):
    """A server answering 200 with the whole object (most STAC APIs): taken
    whole within max_bytes, refused beyond it."""
    io = fast_io()
    want = (data / "big.bin").read_bytes()
    assert io.get(srv.url("big.bin", "full200")) == want
    with pytest.raises(cogfeed.LimitError, match="more than the 1000 bytes allowed") as ei:
        io.get(srv.url("big.bin", "full200"), max_bytes=1000)
    assert ei.value.http_status == 200  # the server's answer, kept


def test_http_404_names_the_url(srv):
    with pytest.raises(cogfeed.NotFoundError, match="missing.json"):
        fast_io().get(srv.url("missing.json") + "?token=SECRET")

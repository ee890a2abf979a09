"""The test nginx itself behaves as the fault tests assume: ranges and
ETags, the configured latency, request counters, and each scripted fault
(checked with a plain HTTP client, not with cogfeed)."""
import http.client
import os
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SERVERS = os.path.join(HERE, "..", "servers")
sys.path.insert(0, SERVERS)
from servers import Nginx, free_port, wait_port  # noqa: E402

SIZE = 200_000


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    d = tmp_path_factory.mktemp("srv")
    (d / "a.bin").write_bytes(os.urandom(SIZE))
    return d


@pytest.fixture(scope="module")
def srv(root):
    with Nginx(str(root)) as s:
        yield s


def get(srv, path, rng=None, headers=None, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    h = dict(headers or {})
    if rng:
        h["Range"] = "bytes=%d-%d" % rng
    c.request("GET", path, headers=h)
    r = c.getresponse()
    try:
        body = r.read()
    except http.client.IncompleteRead as e:
        body = e.partial
    c.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), body


def test_ranges_and_etag(srv, root):
    data = (root / "a.bin").read_bytes()
    st, h, b = get(srv, "/a.bin", (100, 199))
    assert st == 206 and b == data[100:200]
    assert h["content-range"] == "bytes 100-199/%d" % SIZE
    assert h["etag"]
    st, h2, _ = get(srv, "/a.bin", (0, 0), {"If-Match": '"other"'})
    assert st == 412
    st, _, _ = get(srv, "/a.bin", (SIZE + 10, SIZE + 20))
    assert st == 416


def test_slow_tail_and_wait_fault(root):
    """tail=(share, s): that share of the requests waits s more (here all
    or none); wait-S-N: the first N requests for a URI wait S seconds."""
    data = (root / "a.bin").read_bytes()
    with Nginx(str(root), tail=(1.0, 0.3)) as s:
        t = time.monotonic()
        st, _, b = get(s, "/a.bin", (0, 99))
        assert st == 206 and b == data[:100]
        assert time.monotonic() - t >= 0.3
    with Nginx(str(root), tail=(0.0, 30)) as s:
        st, _, b = get(s, "/a.bin", (0, 99), timeout=5)
        assert st == 206
        t = time.monotonic()
        st, _, b = get(s, "/fault/wait-0.3-1/a.bin", (0, 99))
        assert st == 206 and b == data[:100]
        assert time.monotonic() - t >= 0.3
        with pytest.raises(socket.timeout):  # the first waits 30 s
            get(s, "/fault/wait-30-1/a.bin", (0, 99), timeout=1)
        st, _, b = get(s, "/fault/wait-30-1/a.bin", (0, 99), timeout=5)
        assert st == 206 and b == data[:100]  # the second does not
        assert s.requests("/fault/wait-30-1/a.bin") == 2


def test_request_counter_and_reset(srv):
    srv.reset()
    for _ in range(3):
        get(srv, "/a.bin", (0, 9))
    assert srv.requests("/a.bin") == 3
    assert srv.requests() == 3
    srv.reset()
    assert srv.requests("/a.bin") == 0


def test_latency(root):
    with Nginx(str(root), latency_ms=300) as s:
        t0 = time.monotonic()
        st, _, _ = get(s, "/a.bin", (0, 9))
        assert st == 206 and time.monotonic() - t0 >= 0.29


def test_status_fault_then_ok(srv):
    p = "/fault/status-503-2/a.bin"
    assert get(srv, p, (0, 9))[0] == 503
    assert get(srv, p, (0, 9))[0] == 503
    assert get(srv, p, (0, 9))[0] == 206
    st, h, b = get(srv, "/fault/status-403-0/a.bin")
    assert st == 403 and b"<Code>AccessDenied</Code>" in b
    st, h, b = get(srv, "/fault/az403/a.bin")
    assert st == 403 and h["x-ms-error-code"] == "AuthenticationFailed"


def test_retry_after(srv):
    st, h, _ = get(srv, "/fault/retryafter-2-1/a.bin", (0, 9))
    assert st == 429 and h["retry-after"] == "2"
    assert get(srv, "/fault/retryafter-2-1/a.bin", (0, 9))[0] == 206


def test_reset_closes_without_response(srv):
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        get(srv, "/fault/reset-1/a.bin", (0, 9))
    assert get(srv, "/fault/reset-1/a.bin", (0, 9))[0] == 206


def test_truncate_sends_half(srv, root):
    data = (root / "a.bin").read_bytes()
    st, h, b = get(srv, "/fault/truncate-1/a.bin", (0, 9999))
    assert st == 206 and h["content-length"] == "10000"
    assert b == data[:5000]
    st, h, b = get(srv, "/fault/truncate-1/a.bin", (0, 9999))
    assert b == data[:10000]


def test_full200_ignores_range(srv):
    st, h, b = get(srv, "/fault/full200/a.bin", (0, 9))
    assert st == 200 and len(b) == SIZE


def test_badrange_shifts_content_range(srv):
    st, h, _ = get(srv, "/fault/badrange-1/a.bin", (10, 19))
    assert st == 206 and h["content-range"] == "bytes 11-20/%d" % SIZE
    st, h, _ = get(srv, "/fault/badrange-1/a.bin", (10, 19))
    assert h["content-range"] == "bytes 10-19/%d" % SIZE


def test_etag_change(srv):
    st, h, _ = get(srv, "/fault/etag-change/a.bin", (0, 9))
    assert h["etag"] == '"v1"'
    st, h, _ = get(srv, "/fault/etag-change/a.bin", (0, 9), {"If-Match": '"v1"'})
    assert st == 412
    assert srv.last_header("/fault/etag-change/a.bin", "im") == '"v1"'
    st, h, _ = get(srv, "/fault/etag-ignore/a.bin", (0, 9))
    st, h, _ = get(srv, "/fault/etag-ignore/a.bin", (0, 9), {"If-Match": '"v1"'})
    assert st == 206 and h["etag"] == '"v2"'


def test_slow_stalls_after_first_kib(srv):
    with pytest.raises(socket.timeout):
        get(srv, "/fault/slow-1/a.bin", (0, 99999), timeout=1)
    st, _, b = get(srv, "/fault/slow-1/a.bin", (0, 99999))
    assert st == 206 and len(b) == 100000


def test_redirects(srv):
    st, h, _ = get(srv, "/fault/redirect-same/a.bin")
    assert st == 302 and h["location"].endswith("/a.bin")
    st, h, _ = get(srv, "/fault/redirect-other/a.bin")
    assert st == 302 and h["location"].startswith("http://localhost:")


def test_authorization_recorded(srv):
    get(srv, "/a.bin", (0, 1), {"Authorization": "Bearer x"})
    assert srv.last_header("/a.bin", "auth") == "Bearer x"
    get(srv, "/a.bin", (0, 1))
    assert srv.last_header("/a.bin", "auth") == ""


def test_several_workers_share_counters(root):
    with Nginx(str(root), workers=2) as s:
        for _ in range(6):
            assert get(s, "/fault/status-503-2/a.bin", (0, 9))[0] in (503, 206)
        assert s.requests("/fault/status-503-2/a.bin") == 6
        assert get(s, "/fault/status-503-2/a.bin", (0, 9))[0] == 206


def test_tls_http2(root):
    # The curl tool checks the fixture, not our code: it runs without the
    # sanitizer build's LD_PRELOAD: with ASan preloaded, Debian's curl 7.88
    # hung in setlocale at start on one of our machines.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    with Nginx(str(root), tls=True) as s:
        p = subprocess.run(
            ["curl", "-s", "--http2", "--cacert", s.ca_file, "-r", "0-9",
             "-o", "/dev/null", "-w", "%{http_version} %{http_code}",
             s.url("a.bin")], capture_output=True, text=True, timeout=20,
            env=env)
        assert p.stdout == "2 206"


def test_serve_cli_runs_until_killed(root):
    port = free_port()
    p = subprocess.Popen(
        [sys.executable, os.path.join(SERVERS, "serve.py"), "nginx", "--root",
         str(root), "--latency-ms", "0", "--port", str(port)],
        stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().strip()
        assert line == "http://127.0.0.1:%d" % port
        assert wait_port(port)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/a.bin", headers={"Range": "bytes=0-0"})
        assert c.getresponse().status == 206
        c.close()
    finally:
        p.terminate()
        p.wait(10)
    assert p.returncode == 0
    time.sleep(0.2)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5)


# -- the pure-Python range server (cogfeed.tools.servers.RangeServer) --------

@pytest.fixture(scope="module")
def rsrv(root):
    import servers
    with servers.RangeServer(str(root), latency_ms=100,
                             access_log=True) as s:
        yield s


def test_range_server_ranges_etag_and_latency(rsrv, root):
    data = (root / "a.bin").read_bytes()
    t = time.monotonic()
    st, h, b = get(rsrv, "/a.bin", (100, 199))
    assert time.monotonic() - t >= 0.1  # the first-byte latency
    assert st == 206 and b == data[100:200]
    assert h["content-range"] == "bytes 100-199/%d" % SIZE
    assert h["accept-ranges"] == "bytes" and h["etag"]
    st, _, b = get(rsrv, "/a.bin", headers={"Range": "bytes=-10"})
    assert st == 206 and b == data[-10:]
    st, _, b = get(rsrv, "/a.bin", headers={"Range": "bytes=%d-" % (SIZE - 5)})
    assert st == 206 and b == data[-5:]
    st, _, b = get(rsrv, "/a.bin", (SIZE - 5, SIZE + 100))
    assert st == 206 and b == data[-5:]
    st, _, b = get(rsrv, "/a.bin")
    assert st == 200 and b == data
    st, _, _ = get(rsrv, "/a.bin", (0, 0), {"If-Match": '"other"'})
    assert st == 412
    st, _, b = get(rsrv, "/a.bin", (0, 3), {"If-Match": h["etag"]})
    assert st == 206 and b == data[:4]
    st, h, _ = get(rsrv, "/a.bin", (SIZE + 10, SIZE + 20))
    assert st == 416 and h["content-range"] == "bytes */%d" % SIZE


def test_range_server_multipart(rsrv, root):
    data = (root / "a.bin").read_bytes()
    st, h, b = get(rsrv, "/a.bin", headers={"Range": "bytes=0-9,1000-1099"})
    assert st == 206 and int(h["content-length"]) == len(b)
    sep = h["content-type"].split("boundary=")[1]
    assert h["content-type"].startswith("multipart/byteranges")
    parts = [p for p in b.split(b"--" + sep.encode()) if p.strip(b"\r\n-")]
    got = []
    for p in parts:
        head, _, body = p.partition(b"\r\n\r\n")
        rng = [ln for ln in head.split(b"\r\n") if ln.startswith(b"Content-Range")]
        a, z = rng[0].split(b" ")[-1].split(b"/")[0].split(b"-")
        got.append((int(a), int(z), body[:int(z) - int(a) + 1]))
    assert got == [(0, 9, data[0:10]), (1000, 1099, data[1000:1100])]


def test_range_server_stays_in_its_root(rsrv, root, tmp_path):
    (tmp_path / "secret").write_text("x")
    for path in ("/../secret", "/%2e%2e/secret", "/..%2fsecret", "/a.bin%00",
                 "/" + str(tmp_path / "secret"), "/nope.bin", "/"):
        st, _, _ = get(rsrv, path)
        assert st == 404, path


def test_range_server_keepalive_and_access_log(rsrv):
    c = http.client.HTTPConnection("127.0.0.1", rsrv.port, timeout=10)
    for _ in range(3):  # one connection, three requests
        c.request("GET", "/a.bin", headers={"Range": "bytes=0-99"})
        r = c.getresponse()
        assert r.status == 206 and len(r.read()) == 100
    c.close()
    with open(os.path.join(rsrv.tmp, "access.log")) as f:
        lines = f.read().splitlines()
    # nginx's combined format, which bench's LogCounter reads
    assert sum('"GET /a.bin HTTP/1.1" 206 100 ' in ln for ln in lines) >= 3


def test_missing_nginx_is_named_and_auto_falls_back(root, monkeypatch):
    import servers
    m = sys.modules["_cf_tools_servers"]
    monkeypatch.setattr(m, "NGINX_BIN", "/nonexistent/nginx")
    with pytest.raises(RuntimeError,
                       match="apt-get install nginx libnginx-mod-http-lua"):
        servers.Nginx(str(root)).start()
    with pytest.raises(RuntimeError, match="nginx .with the lua module. is "
                       "not installed"):
        servers.server(str(root), kind="nginx")
    s = servers.server(str(root), 0, kind="auto")
    assert s.kind == "python" and "libnginx-mod-http-lua" in s.fallback
    with s:
        st, _, b = get(s, "/a.bin", (0, 9))
        assert st == 206 and len(b) == 10
    monkeypatch.undo()
    assert servers.server(str(root), kind="auto").kind == "nginx"

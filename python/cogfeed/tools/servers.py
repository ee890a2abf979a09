"""HTTP servers on 127.0.0.1 that add a first-byte latency: what `cogfeed
demo`, `cogfeed bench --serve-latency-ms` and `cogfeed tune` read remote
files through, and what the tests start (tests/servers/servers.py
re-exports this module).

``Nginx(root, latency_ms=0, port=0)`` runs /usr/sbin/nginx with the lua
module (Debian: apt-get install nginx libnginx-mod-http-lua) on a free
port, serving ``root`` with ranges and ETags, an optional first-byte
latency and the scripted faults of nginx/faults.lua (package data, next to
this file) under ``/fault/<spec>/<path>``.  Everything it writes (config,
pid, logs, temp dirs) lives in its own temp directory, removed on exit.

    with Nginx(tmpdir, latency_ms=50) as srv:
        url = srv.url("a.tif")                      # plain
        bad = srv.url("a.tif", fault="status-503-2") # 503 twice, then OK
        srv.requests("/fault/status-503-2/a.tif")    # GETs seen for it

``RangeServer(root, latency_ms=0)`` is the same service without nginx: a
threaded pure-Python HTTP/1.1 server in a process of its own (so that its
CPU time is not the measuring process's), with single and multiple byte
ranges, ETags, If-Match, the first-byte latency and nginx's access-log
format; no faults.  ``server(root, ..., kind="auto")`` picks nginx when it
is installed, else this one.

This file imports nothing but the standard library, so that the tests and
`python3 servers.py range ...` can run it without the extension.
"""
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
NGINX_BIN = "/usr/sbin/nginx"
# nginx.conf.in loads these (Debian's libnginx-mod-http-lua and its
# dependency libnginx-mod-http-ndk).
NGINX_MODULES = ("/usr/lib/nginx/modules/ndk_http_module.so",
                 "/usr/lib/nginx/modules/ngx_http_lua_module.so")
NGINX_INSTALL = ("nginx (with the lua module) is not installed: "
                 "apt-get install nginx libnginx-mod-http-lua")


def nginx_missing():
    """None when nginx and the modules its configuration loads are there,
    else what is missing and how to install it."""
    if not os.access(NGINX_BIN, os.X_OK):
        return "%s (no %s)" % (NGINX_INSTALL, NGINX_BIN)
    for m in NGINX_MODULES:
        if not os.path.exists(m):
            return "%s (no %s)" % (NGINX_INSTALL, m)
    return None


def die_with_parent():
    """For Popen(preexec_fn=...): the child gets SIGTERM when the process
    that started it dies, even if that one was killed before its context
    manager could stop it (a ctest timeout, ^C)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def stop_process(proc, timeout=10):
    """Terminate a server process and wait for it (kill it if it lingers)."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc=None, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


class Nginx:
    def __init__(self, root, latency_ms=0, port=0, access_log=False,
                 tls=False, workers=1, tail=None):
        self.root = os.path.abspath(root)
        self.latency_ms = float(latency_ms)
        # (share, seconds): that share of the requests, drawn at random,
        # waits that much longer (an object store's slow tail).
        self.tail = (float(tail[0]), float(tail[1])) if tail else (0.0, 0.0)
        self.port = int(port) or free_port()
        self.access_log = access_log
        self.tls = tls
        # One process by default (tests); benchmarks may want more.  The
        # hit counters live in shared memory, so they count across workers.
        self.workers = max(1, int(workers))
        self.ca_file = None
        self.tmp = None
        self.proc = None

    # -- lifecycle ---------------------------------------------------------
    kind = "nginx"

    def describe(self):
        return "nginx with the lua latency module, %d worker%s" % (
            self.workers, "" if self.workers == 1 else "s")

    def start(self):
        missing = nginx_missing()
        if missing:
            raise RuntimeError(missing)
        conf_dir = os.path.join(HERE, "nginx")
        if not os.path.exists(os.path.join(conf_dir, "nginx.conf.in")):
            raise RuntimeError("%s/nginx.conf.in is missing: cogfeed is "
                               "installed without its package data; "
                               "reinstall it" % conf_dir)
        self.tmp = tempfile.mkdtemp(prefix="cf-nginx-")
        with open(os.path.join(conf_dir, "nginx.conf.in")) as f:
            conf = f.read()
        subs = {
            "@TMP@": self.tmp,
            "@ROOT@": self.root,
            "@PORT@": str(self.port),
            "@LATENCY_S@": "%.6f" % (self.latency_ms / 1000.0),
            "@TAIL_P@": "%.6f" % self.tail[0],
            "@TAIL_S@": "%.6f" % self.tail[1],
            "@CONF_DIR@": conf_dir,
            "@ACCESS_LOG@": (os.path.join(self.tmp, "access.log")
                             if self.access_log else "off"),
            "@LISTEN_TLS@": "ssl http2" if self.tls else "",
            "@MASTER@": "on" if self.workers > 1 else "off",
            "@WORKERS@": str(self.workers),
            # Workers under root's master would drop to "nobody", which
            # cannot read a private temp dir: keep our own user.
            "@USER@": ("user %s;" % pwd.getpwuid(os.getuid()).pw_name
                       if self.workers > 1 and os.getuid() == 0 else ""),
            "@TLS_CONF@": "",
        }
        if self.tls:
            # A throwaway self-signed certificate for 127.0.0.1 and
            # localhost; tests pass it as the CA file.
            key = os.path.join(self.tmp, "key.pem")
            self.ca_file = os.path.join(self.tmp, "cert.pem")
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                 "-keyout", key, "-out", self.ca_file, "-days", "2",
                 "-subj", "/CN=127.0.0.1",
                 "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                check=True, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            subs["@TLS_CONF@"] = ("ssl_certificate %s; ssl_certificate_key %s;"
                                  % (self.ca_file, key))
        for k, v in subs.items():
            conf = conf.replace(k, v)
        path = os.path.join(self.tmp, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen(
            [NGINX_BIN, "-p", self.tmp, "-c", path, "-e",
             os.path.join(self.tmp, "error.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if not wait_port(self.port, self.proc):
            err = self.error_log()
            self.stop()
            raise RuntimeError("nginx did not start: " + err[-2000:])
        return self

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc, 5)
            if self.proc.stderr:
                self.proc.stderr.close()
            self.proc = None
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- helpers -----------------------------------------------------------
    @property
    def base(self):
        return "%s://127.0.0.1:%d" % ("https" if self.tls else "http",
                                      self.port)

    def url(self, path, fault=None):
        path = path.lstrip("/")
        if fault:
            return "%s/fault/%s/%s" % (self.base, fault, path)
        return "%s/%s" % (self.base, path)

    def _get(self, path):
        ctx = None
        if self.tls:
            import ssl
            ctx = ssl.create_default_context(cafile=self.ca_file)
        with urllib.request.urlopen(self.base + path, timeout=10,
                                    context=ctx) as r:
            return r.read().decode()

    def requests(self, path=None):
        """GETs the server saw for ``path`` (a URL path such as
        "/fault/reset-1/a.tif" or a full URL), or for everything."""
        if path is None:
            return int(self._get("/_hits"))
        if path.startswith("http"):
            path = "/" + path.split("/", 3)[3]
        path = path.split("?")[0]
        if not path.startswith("/"):
            path = "/" + path
        return int(self._get("/_hits?uri=" + urllib.request.quote(path)))

    def waves(self):
        """Round trips the server saw one after the other: requests that
        arrived while no other was in flight.  Counted only with a
        latency (latency_ms > 0), which keeps the requests a client sends
        together in flight together."""
        return int(self._get("/_hits?uri=__waves"))

    def last_header(self, path, which):
        """The Authorization ("auth"), If-Match ("im") or
        If-Unmodified-Since ("ius") header of the last request for
        ``path`` ("" when it had none)."""
        return self._get("/_hits?%s=1&uri=%s"
                         % (which, urllib.request.quote(path))).strip()

    def reset(self):
        self._get("/_reset")

    def error_log(self):
        try:
            with open(os.path.join(self.tmp, "error.log")) as f:
                return f.read()
        except (OSError, TypeError):
            return ""


# -- a pure-Python range server ---------------------------------------------

def _parse_ranges(spec, size):
    """[(first, last), ...] of a Range header's byte ranges within a file
    of `size` bytes (satisfiable ones only); None when the header is not a
    bytes range set (then the whole file is sent, as RFC 9110 allows)."""
    if not spec.startswith("bytes="):
        return None
    out = []
    for part in spec[6:].split(","):
        part = part.strip()
        a, sep, b = part.partition("-")
        if not sep:
            return None
        try:
            if a == "":
                n = int(b)
                if n <= 0:
                    continue
                first, last = max(0, size - n), size - 1
            else:
                first = int(a)
                last = int(b) if b else size - 1
                if first < 0 or (b and last < first):
                    return None
                if first >= size:
                    continue  # unsatisfiable
                last = min(last, size - 1)
        except ValueError:
            return None
        out.append((first, last))
    if len(out) > 100:  # a request of many tiny ranges: not worth it
        return None
    return out


def _range_handler(root, latency_s, log):
    import email.utils
    import http.server
    import threading
    import urllib.parse
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "cogfeed-range"

        def log_message(self, *args):
            pass

        def _log(self, status, nbytes):
            if log is None:
                return
            line = '127.0.0.1 - - [%s] "%s" %d %d "-" "-"\n' % (
                self.log_date_time_string(), self.requestline, status, nbytes)
            with lock:
                log.write(line)
                log.flush()

        def _path(self):
            p = urllib.parse.unquote(self.path.split("?", 1)[0])
            if "\0" in p:
                return None
            full = os.path.realpath(os.path.join(root, p.lstrip("/")))
            if full != root and not full.startswith(root + os.sep):
                return None
            return full if os.path.isfile(full) else None

        def _send(self, status, headers, body=b""):
            if latency_s > 0:
                time.sleep(latency_s)  # before the first byte
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            return body

        def _error(self, status, head=False):
            body = b"" if head else ("%d\n" % status).encode()
            self._send(status, [("Content-Length", str(len(body))),
                                ("Content-Type", "text/plain")])
            if body:
                self.wfile.write(body)
            self._log(status, len(body))

        def do_HEAD(self):
            self.do_GET(head=True)

        def do_GET(self, head=False):
            full = self._path()
            if full is None:
                return self._error(404, head)
            try:
                f = open(full, "rb")
            except OSError:
                return self._error(403, head)
            with f:
                st = os.fstat(f.fileno())
                size = st.st_size
                etag = '"%x-%x"' % (st.st_mtime_ns, size)
                im = self.headers.get("If-Match")
                if im and im.strip() != "*" and \
                        etag not in [t.strip() for t in im.split(",")]:
                    return self._error(412, head)
                common = [("ETag", etag), ("Accept-Ranges", "bytes"),
                          ("Last-Modified",
                           email.utils.formatdate(st.st_mtime, usegmt=True))]
                rng = self.headers.get("Range")
                ranges = _parse_ranges(rng, size) if rng else None
                if ranges is not None and not ranges:
                    self._send(416, common + [
                        ("Content-Range", "bytes */%d" % size),
                        ("Content-Length", "0")])
                    return self._log(416, 0)
                if ranges is None:
                    self._send(200, common + [
                        ("Content-Type", "application/octet-stream"),
                        ("Content-Length", str(size))])
                    n = 0 if head else self._copy(f, 0, size)
                    return self._log(200, n)
                if len(ranges) == 1:
                    a, b = ranges[0]
                    self._send(206, common + [
                        ("Content-Type", "application/octet-stream"),
                        ("Content-Range", "bytes %d-%d/%d" % (a, b, size)),
                        ("Content-Length", str(b - a + 1))])
                    n = 0 if head else self._copy(f, a, b - a + 1)
                    return self._log(206, n)
                sep = "cf%016x" % (hash(full) & 0xFFFFFFFFFFFFFFFF)
                heads = [("--%s\r\nContent-Type: application/octet-stream"
                          "\r\nContent-Range: bytes %d-%d/%d\r\n\r\n"
                          % (sep, a, b, size)).encode() for a, b in ranges]
                tail = ("\r\n--%s--\r\n" % sep).encode()
                total = sum(len(h) for h in heads) + len(tail) + \
                    sum(b - a + 1 for a, b in ranges) + 2 * (len(ranges) - 1)
                self._send(206, common + [
                    ("Content-Type", "multipart/byteranges; boundary=" + sep),
                    ("Content-Length", str(total))])
                n = 0
                if not head:
                    for i, ((a, b), h) in enumerate(zip(ranges, heads)):
                        self.wfile.write((b"\r\n" if i else b"") + h)
                        n += self._copy(f, a, b - a + 1)
                    self.wfile.write(tail)
                self._log(206, n)

        def _copy(self, f, off, n):
            sent = 0
            out = self.connection.fileno()
            while sent < n:
                k = os.sendfile(out, f.fileno(), off + sent, n - sent)
                if k <= 0:
                    raise ConnectionError("short file")
                sent += k
            return sent

    return Handler


def _serve_range(root, port, latency_ms, log_path):
    """Serve until SIGTERM (RangeServer's child process)."""
    import http.server

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 4096

    log = open(log_path, "a") if log_path else None
    srv = Server(("127.0.0.1", port),
                 _range_handler(os.path.realpath(root), latency_ms / 1000.0,
                                log))
    def _term(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()


class RangeServer:
    """The files under ``root`` over HTTP/1.1 on 127.0.0.1, from a
    threaded pure-Python server in a child process: byte ranges (one, or
    several as multipart/byteranges), ETag / If-Match, keep-alive, and
    ``latency_ms`` before the first byte of every response.  With
    access_log, TMP/access.log gets nginx's combined-format lines."""

    kind = "python"

    def __init__(self, root, latency_ms=0, port=0, access_log=False,
                 workers=1, **_):
        self.root = os.path.abspath(root)
        self.latency_ms = float(latency_ms)
        self.port = int(port) or free_port()
        self.access_log = access_log
        self.tmp = None
        self.proc = None

    def describe(self):
        return "cogfeed's pure-Python range server (threads)"

    def start(self):
        import sys
        self.tmp = tempfile.mkdtemp(prefix="cf-range-")
        cmd = [sys.executable, os.path.abspath(__file__), "range",
               "--root", self.root, "--port", str(self.port),
               "--latency-ms", repr(self.latency_ms)]
        if self.access_log:
            cmd += ["--access-log", os.path.join(self.tmp, "access.log")]
        with open(self.error_path(), "w") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                         stderr=err,
                                         preexec_fn=die_with_parent)
        if not wait_port(self.port, self.proc):
            err = self.error_log()
            self.stop()
            raise RuntimeError("the Python range server did not start: " +
                               err[-2000:])
        return self

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc, 5)
            self.proc = None
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def base(self):
        return "http://127.0.0.1:%d" % self.port

    def url(self, path):
        return "%s/%s" % (self.base, path.lstrip("/"))

    def error_path(self):
        return os.path.join(self.tmp, "error.log")

    def error_log(self):
        try:
            with open(self.error_path()) as f:
                return f.read()
        except (OSError, TypeError):
            return ""


SERVER_KINDS = ("auto", "nginx", "python")


def server(root, latency_ms=0, kind="auto", **kw):
    """An unstarted server of `kind`: "nginx" (an error naming the
    packages when it is not installed), "python" (RangeServer) or "auto"
    (nginx when installed, else RangeServer; the server's `fallback` then
    says why)."""
    if kind not in SERVER_KINDS:
        raise ValueError("unknown server %r (%s)" % (kind,
                                                     ", ".join(SERVER_KINDS)))
    missing = nginx_missing() if kind != "python" else None
    if kind == "nginx" and missing:
        raise RuntimeError(missing)
    if kind == "python" or missing:
        s = RangeServer(root, latency_ms=latency_ms, **kw)
        s.fallback = missing
        return s
    s = Nginx(root, latency_ms=latency_ms, **kw)
    s.fallback = None
    return s


def _main(argv):
    import argparse
    ap = argparse.ArgumentParser(
        prog="servers.py",
        description="Run the pure-Python range server until SIGTERM.")
    ap.add_argument("kind", choices=["range"])
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--access-log")
    a = ap.parse_args(argv)
    _serve_range(a.root, a.port, a.latency_ms, a.access_log)
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(_main(sys.argv[1:]))

"""A fault-injecting HTTP/1.1 reverse proxy on 127.0.0.1 for the upload
tests: put it between cogfeed and moto or Azurite and script which upload
requests fail.

Every request is forwarded verbatim (method, path and query, every header
including Host and Authorization, the body) to the upstream's host:port,
and the answer relayed: SigV4 signs the Host header, so the client signs
for the proxy's address and the upstream checks that same Host.  Only
hop-by-hop headers are dropped; ``Expect: 100-continue`` (curl's, boto3's
for big PUTs) is answered by the proxy itself, which then reads the body;
a chunked body goes on with a Content-Length.  Standard library only.

    with Proxy(moto.endpoint, faults=[("PUT", 2, "503")]) as p:
        p.url                      # http://127.0.0.1:PORT (+ upstream's path)
        ...                        # AWS_ENDPOINT_URL=p.url
        p.requests("PUT", "partNumber")    # [{"method", "path", "query",
                                           #   "status", "fault", "bytes",
                                           #   "headers", "start", "time"}]

A fault is (selector, n, kind).  selector: a method ("PUT", "*" for any),
optionally with query parameters after "?" that the request must have, by
name or name=value ("PUT?partNumber", "PUT?partNumber=1",
"PUT?comp=block", "DELETE?uploadId").  Each rule counts the requests it
selects (1, 2, ...); retries are requests too.  kind, for the n-th:

  "503", "500", "429", ... that status, not forwarded, with an S3- or
                  Azure-style XML error body (flavor=), after the body
                  was read (the connection stays open)
  "503-early"     that status before the body is read (before 100
                  Continue), then the connection is closed (as S3 refuses)
  "503-always"    that status for the n-th and every later one
  "storm:N"       503 for the n-th and the N-1 after it
  "drop"          read the whole request, close without answering
  "drop-mid"      read half the body, then close
  "drop-after"    forward it (the upstream acts on it), close without
                  relaying the answer
  "delay:S"       forward it after S seconds

The log (``log``, ``requests()``) holds every request with the status the
client got (None: dropped), the fault applied (None: forwarded), the body
bytes read, the request's headers (lower-case names), and when the request
came and was answered or dropped ("start", "time": time.monotonic(); an
entry is logged before the client gets the answer).

``bearer="TOKEN"`` makes it Cloud Storage's XML API in front of a moto
that checks no signature: a request without ``Authorization: Bearer
TOKEN`` gets 401 (AuthenticationRequired), the others go on without the
header (that API's multipart upload is S3's protocol).

Run alone (``python3 tests/servers/upload_faults.py UPSTREAM [FAULT ...]``,
a fault as METHOD:N:KIND) it prints the log as requests come, until ^C.
"""

from __future__ import annotations

import http.client
import http.server
import socket
import sys
import threading
import time
import urllib.parse

HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
       "transfer-encoding", "upgrade", "expect"}
_S3_CODES = {500: "InternalError", 503: "SlowDown", 429: "SlowDown"}
_AZ_CODES = {500: "InternalError", 503: "ServerBusy", 429: "ServerBusy"}


def qmatch(spec: str, query: str) -> bool:
    """Whether every "key" (present) or "key=value" of spec ("&"
    separated) is in the query."""
    q = urllib.parse.parse_qs(query, keep_blank_values=True)
    for part in filter(None, spec.split("&")):
        k, eq, v = part.partition("=")
        if k not in q or (eq and v not in q[k]):
            return False
    return True


class _Rule:
    def __init__(self, selector: str, n: int, kind: str):
        method, _, self.qsub = selector.partition("?")
        self.method, self.n, self.kind, self.seen = method.upper(), int(n), kind, 0
        self.last: float = self.n
        if kind.startswith("storm:"):
            self.last, self.kind = self.n + int(kind[6:]) - 1, "503"
        elif kind.endswith("-always"):
            self.last, self.kind = float("inf"), kind[:-7]

    def hit(self, method: str, query: str) -> bool:
        if self.method not in ("*", method) or not qmatch(self.qsub, query):
            return False
        self.seen += 1
        return self.n <= self.seen <= self.last


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 120
    proxy: "Proxy"
    _fault: str | None = None

    def log_message(self, *args) -> None:  # quiet
        pass

    def parse_request(self) -> bool:
        self._fault, self._picked, self._nbytes = None, False, 0
        self._start = time.monotonic()
        return super().parse_request()

    def _pick(self) -> str | None:
        if not self._picked:
            self._picked = True
            self._fault = self.proxy._pick(self.command, self.path)
        return self._fault

    def handle_expect_100(self) -> bool:
        f = self._pick()
        if f and f.endswith("-early"):
            self.close_connection = True
            self._error(int(f[:-6]), f)
            return False
        return super().handle_expect_100()

    def _body(self, limit: int | None = None) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                out += self.rfile.read(size)
                self.rfile.readline()
                if limit is not None and len(out) >= limit:
                    break
        else:
            n = int(self.headers.get("Content-Length") or 0)
            out = self.rfile.read(n if limit is None else min(n, limit))
        self._nbytes = len(out)
        return out

    def _error(self, status: int, fault: str) -> None:
        az = self.proxy.flavor == "azure"
        code = (_AZ_CODES if az else _S3_CODES).get(status, "InternalError")
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
                "<Message>injected by upload_faults (%s)</Message></Error>"
                % (code, fault)).encode()
        self.proxy._record(self, status, fault)  # logged before the client sees it
        self.send_response_only(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        if az:
            self.send_header("x-ms-error-code", code)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _unauthorized(self) -> None:
        body = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>'
                b"AuthenticationRequired</Code><Message>a bearer token is needed"
                b"</Message></Error>")
        self.proxy._record(self, 401, "bearer")
        self.send_response_only(401)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _drop(self, fault: str) -> None:
        self.proxy._record(self, None, fault)
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _any(self) -> None:
        if self.proxy.bearer is not None:
            # Cloud Storage's XML API: the OAuth token checked here, the
            # rest (S3's protocol) forwarded to a moto that signs nothing.
            if self.headers.get("Authorization") != "Bearer " + self.proxy.bearer:
                self._body()
                return self._unauthorized()
            del self.headers["Authorization"]
        f = self._pick()
        if f == "drop-mid":
            n = int(self.headers.get("Content-Length") or 0)
            self._body(limit=n // 2)
            return self._drop(f)
        if f and f.endswith("-early"):  # no Expect: nothing was read yet
            self.close_connection = True
            return self._error(int(f[:-6]), f)
        body = self._body()
        if f == "drop":
            return self._drop(f)
        if f and f[:3].isdigit():
            return self._error(int(f), f)
        if f and f.startswith("delay:"):
            time.sleep(float(f[6:]))
        try:
            status, reason, headers, data = self.proxy._forward(
                self.command, self.path, self.headers.items(), body)
        except OSError as e:
            self.close_connection = True
            return self._error(502, "upstream: %s" % e)
        if f == "drop-after":
            return self._drop(f)
        self.proxy._record(self, status, f)
        self.send_response_only(status, reason)
        for k, v in headers:
            if k.lower() not in HOP and (k.lower() != "content-length"
                                         or self.command == "HEAD"):
                self.send_header(k, v)
        if self.command != "HEAD" and status not in (204, 304):
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = do_OPTIONS = _any


class Proxy:
    """The proxy as a context manager; see the module docstring."""

    def __init__(self, upstream: str, faults=(), flavor: str | None = None,
                 port: int = 0, bearer: str | None = None):
        u = urllib.parse.urlsplit(upstream)
        self.bearer = bearer
        self.upstream = (u.hostname or "127.0.0.1", u.port or 80)
        self.prefix = u.path.rstrip("/")
        self.flavor = flavor or ("azure" if "devstoreaccount" in u.path else "s3")
        self._port = port
        self._lock = threading.Lock()
        self.server: http.server.ThreadingHTTPServer | None = None
        self.set_faults(faults)

    def set_faults(self, faults) -> None:
        """Replace the rules (their counts start again) and clear the log."""
        with self._lock:
            self._rules = [_Rule(*f) for f in faults]
            self.log: list[dict] = []

    @property
    def port(self) -> int:
        return self.server.server_address[1] if self.server else self._port

    @property
    def base(self) -> str:
        return "http://127.0.0.1:%d" % self.port

    @property
    def url(self) -> str:
        """The upstream's URL with the proxy's host and port."""
        return self.base + self.prefix

    def start(self) -> "Proxy":
        if self.server is None:
            handler = type("Handler", (_Handler,), {"proxy": self})
            self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self._port), handler)
            self.server.daemon_threads = True
            threading.Thread(target=self.server.serve_forever, daemon=True,
                             name="upload-faults").start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def __enter__(self) -> "Proxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def requests(self, method: str | None = None, query: str = "") -> list[dict]:
        """The log's requests of that method (None: all) whose query has
        the parameters of `query` ("partNumber", "comp=block"), in order."""
        with self._lock:
            return [r for r in self.log if (method is None or r["method"] == method)
                    and qmatch(query, r["query"])]

    # ---- internals -----------------------------------------------------

    def _pick(self, method: str, target: str) -> str | None:
        query = urllib.parse.urlsplit(target).query
        with self._lock:
            hits = [r.kind for r in self._rules if r.hit(method, query)]
        return hits[0] if hits else None

    def _record(self, h: _Handler, status: int | None, fault: str | None) -> None:
        path, _, query = h.path.partition("?")
        with self._lock:
            self.log.append({"method": h.command, "path": path, "query": query,
                             "status": status, "fault": fault, "bytes": h._nbytes,
                             "headers": {k.lower(): v for k, v in h.headers.items()},
                             "start": h._start, "time": time.monotonic()})

    def _forward(self, method: str, target: str, headers, body: bytes):
        conn = http.client.HTTPConnection(*self.upstream, timeout=120)
        try:
            conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for k, v in headers:
                if k.lower() not in HOP and k.lower() != "content-length":
                    conn.putheader(k, v)
            if body or method in ("PUT", "POST", "PATCH"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            r = conn.getresponse()
            return r.status, r.reason, r.getheaders(), r.read()
        finally:
            conn.close()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: upload_faults.py UPSTREAM [METHOD:N:KIND ...]")
    rules = [tuple(a.split(":", 2)) for a in sys.argv[2:]]
    with Proxy(sys.argv[1], faults=rules) as p:
        print("proxy at", p.url, flush=True)
        shown = 0
        try:
            while True:
                time.sleep(0.2)
                for r in p.log[shown:]:
                    print(r["method"], r["path"], r["query"], r["status"], r["fault"],
                          flush=True)
                shown = len(p.log)
        except KeyboardInterrupt:
            pass

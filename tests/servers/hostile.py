"""A hostile server for the credential tests: it records every request
line and header it receives, on 127.0.0.1, and answers as it is told.

It plays every part an attacker can get: the server of a URL from a
hostile list (reached directly, or by a host name that only resolves
through a proxy), the proxy itself, and the target of a redirect.

    with Hostile() as h:
        h.url("/c/x.tif")        # http://127.0.0.1:PORT/c/x.tif
        h.proxy                  # http://127.0.0.1:PORT, for http_proxy and
                                 # https_proxy
        h.seen()                 # [{"via": ..., "line": ..., "headers": [...]}]
        h.text()                 # all of it, one string, to search for secrets

- A plain request (``GET /x``) or a proxied one (``GET http://host/x``) is
  recorded with via "direct" / "proxy" and answered by ``answer`` (by
  default 404, then the connection is closed).
- ``CONNECT host:443`` (an https URL through it as a proxy) is recorded
  with via "connect".  With ``mitm=True`` it answers 200 and then speaks
  TLS with its own certificate inside the tunnel (pass ``ca_file`` to the
  client: that is an attacker who owns the look-alike domain and a valid
  certificate for it) and records the request inside with via "tunnel";
  otherwise it refuses the tunnel with ``connect_status`` (403; 407 plays
  a proxy that wants credentials).
- ``tls=True`` serves TLS directly (an https URL, or a redirect target).
- ``Redirector(location)`` answers every request with a 307 to
  ``location + path`` (no query), recording what it got as well: the
  "honest" endpoint that the credentials are for, sending the client on.

``make_cert(dir)`` writes the throwaway certificate both use (SANs for the
look-alike and the real Azure suffix, localhost and 127.0.0.1).

Run alone (``python3 tests/servers/hostile.py [--tls] [--mitm]``) it prints
what it records until killed.
"""
import os
import socket
import socketserver
import ssl
import subprocess
import sys
import threading

CERT_NAMES = ["*.blob.core.attacker.example", "*.blob.core.windows.net",
              "*.s3.us-east-1.amazonaws.com", "storage.googleapis.com",
              "attacker.example", "localhost"]
MAX_HEAD = 1 << 20


def make_cert(directory, names=CERT_NAMES):
    """A self-signed certificate (it is its own CA) for `names` and
    127.0.0.1; returns (cert_path, key_path)."""
    cert = os.path.join(directory, "hostile-cert.pem")
    key = os.path.join(directory, "hostile-key.pem")
    san = ",".join(["DNS:" + n for n in names] + ["IP:127.0.0.1"])
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
         "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=hostile",
         "-addext", "subjectAltName=" + san],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


def read_head(sock):
    """The request line and headers (up to the blank line), or None."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = sock.recv(65536)
        except (OSError, ssl.SSLError):
            return None
        if not chunk:
            return None
        data += chunk
        if len(data) > MAX_HEAD:
            break
    lines = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    return lines[0], lines[1:]


def send(sock, data):
    try:
        sock.sendall(data)
        return True
    except (OSError, ssl.SSLError):
        return False


def answer_404(sock, line, headers):
    send(sock, b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n"
               b"Content-Length: 9\r\nConnection: close\r\n\r\nnot found")


def answer_endless_error_body(sock, line, headers):
    """404 with an S3 error code, then a body without end, 1 KiB every
    10 ms for up to a minute; returns the bytes sent before the client
    hung up."""
    import time
    sent = 0
    head = (b"HTTP/1.1 404 Not Found\r\nContent-Type: application/xml\r\n"
            b"Connection: close\r\n\r\n<Error><Code>NoSuchKey</Code>")
    if not send(sock, head):
        return sent
    sent += len(head)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if not send(sock, b"x" * 1024):
            break
        sent += 1024
        time.sleep(0.01)
    return sent


def answer_endless_header_line(sock, line, headers):
    """206, then one header line that never ends (up to 64 MiB)."""
    if not send(sock, b"HTTP/1.1 206 Partial Content\r\nX-Endless: "):
        return
    chunk = b"a" * 65536
    for _ in range(1024):
        if not send(sock, chunk):
            return


def answer_endless_headers(sock, line, headers):
    """206, then short header lines without end (up to 64 MiB)."""
    if not send(sock, b"HTTP/1.1 206 Partial Content\r\n"):
        return
    chunk = b"X-Many: abcdefghij\r\n" * 3000
    for _ in range((64 << 20) // len(chunk)):
        if not send(sock, chunk):
            return


def _tls_request(srv, sock):
    """TLS over sock (server side), then its request: (sock, head) or
    (None, None)."""
    try:
        sock = srv.ctx.wrap_socket(sock, server_side=True)
    except (OSError, ssl.SSLError):
        return None, None
    return sock, read_head(sock)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        srv = self.server.owner
        sock = self.request
        if srv.tls:
            sock, head = _tls_request(srv, sock)
        else:
            head = read_head(sock)
        if head is None:
            return
        line, headers = head
        if line.upper().startswith("CONNECT "):
            srv.record("connect", line, headers)
            if not srv.mitm:
                send(sock, b"HTTP/1.1 %d Refused\r\nContent-Length: 0\r\n"
                           b"Connection: close\r\n\r\n" % srv.connect_status)
                return
            if not send(sock, b"HTTP/1.1 200 Connection established\r\n\r\n"):
                return
            sock, head = _tls_request(srv, sock)
            if head is None:
                return
            line, headers = head
            srv.record("tunnel", line, headers)
        else:
            target = line.split(" ")[1] if " " in line else ""
            srv.record("proxy" if "://" in target else "direct", line, headers)
        sent = srv.answer(sock, line, headers)
        if sent is not None:
            srv.sent.append(sent)
        try:
            sock.close()
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class Hostile:
    def __init__(self, tls=False, mitm=False, cert=None, answer=answer_404,
                 connect_status=403):
        self.tls, self.mitm, self.answer = tls, mitm, answer
        self.connect_status = connect_status
        self.cert = cert          # (cert, key) from make_cert
        self.ctx = None
        self._seen = []
        self.sent = []            # what answers that count it sent
        self._lock = threading.Lock()
        self._srv = None
        self._thread = None
        self.port = None

    @property
    def ca_file(self):
        return self.cert[0] if self.cert else None

    def start(self):
        if self.tls or self.mitm:
            if not self.cert:
                raise ValueError("tls / mitm need cert=make_cert(dir)")
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(*self.cert)
        self._srv = _Server(("127.0.0.1", 0), _Handler)
        self._srv.owner = self
        self.port = self._srv.server_address[1]
        self._thread = threading.Thread(target=self._srv.serve_forever,
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._srv:
            self._srv.shutdown()
            self._srv.server_close()
            self._srv = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def record(self, via, line, headers):
        with self._lock:
            self._seen.append({"via": via, "line": line,
                               "headers": list(headers)})
        if getattr(self, "echo", False):
            print(via, line, *headers, sep="\n  ", flush=True)

    @property
    def base(self):
        return "%s://127.0.0.1:%d" % ("https" if self.tls else "http",
                                      self.port)

    @property
    def proxy(self):
        return "http://127.0.0.1:%d" % self.port

    def url(self, path):
        return self.base + "/" + path.lstrip("/")

    def seen(self):
        with self._lock:
            return [dict(r) for r in self._seen]

    def text(self):
        return "\n".join(r["via"] + " " + r["line"] + "\n" + "\n".join(r["headers"])
                         for r in self.seen())

    def reset(self):
        with self._lock:
            self._seen.clear()


class Redirector(Hostile):
    """Answers every request with 307 to location + the request's path
    (its query dropped)."""

    def __init__(self, location, tls=False, cert=None, status=307):
        def answer(sock, line, headers):
            target = line.split(" ")[1] if line.count(" ") >= 2 else "/"
            if "://" in target:  # absolute form (through a proxy)
                rest = target.split("://", 1)[1]
                target = "/" + rest.split("/", 1)[1] if "/" in rest else "/"
            path = target.split("?")[0]
            send(sock, ("HTTP/1.1 %d Redirect\r\nLocation: %s%s\r\n"
                        "Content-Length: 0\r\nConnection: close\r\n\r\n"
                        % (status, location.rstrip("/"), path)).encode())
        super().__init__(tls=tls, cert=cert, answer=answer)


def main(argv):
    import tempfile
    tls, mitm = "--tls" in argv, "--mitm" in argv
    cert = make_cert(tempfile.mkdtemp(prefix="cf-hostile-")) if tls or mitm else None
    h = Hostile(tls=tls, mitm=mitm, cert=cert)
    h.echo = True
    h.start()
    print("listening on %s (proxy %s)%s" % (h.base, h.proxy,
                                            ", CA " + cert[0] if cert else ""),
          flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        h.stop()


if __name__ == "__main__":
    main(sys.argv[1:])

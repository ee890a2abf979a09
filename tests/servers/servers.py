"""Local test servers started by the tests on 127.0.0.1.

``Nginx(root, latency_ms=0, port=0)`` runs /usr/sbin/nginx with the lua
module on a free port, serving ``root`` with ranges and ETags, an optional
first-byte latency and the scripted faults of nginx/faults.lua under
``/fault/<spec>/<path>``.  Everything it writes (config, pid, logs, temp
dirs) lives in its own temp directory, removed on exit.

    with Nginx(tmpdir, latency_ms=50) as srv:
        url = srv.url("a.tif")                      # plain
        bad = srv.url("a.tif", fault="status-503-2") # 503 twice, then OK
        srv.requests("/fault/status-503-2/a.tif")    # GETs seen for it
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
    def start(self):
        self.tmp = tempfile.mkdtemp(prefix="cf-nginx-")
        conf_dir = os.path.join(HERE, "nginx")
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


def find_tool(name):
    """Path of a test program from tests/tools/ (built into
    BUILD/testtools): $CF_TOOLS_DIR, else next to $COGFEED_BIN's build
    directory, else next to a PYTHONPATH entry BUILD/python."""
    cands = []
    if os.environ.get("CF_TOOLS_DIR"):
        cands.append(os.environ["CF_TOOLS_DIR"])
    if os.environ.get("COGFEED_BIN"):
        cands.append(os.path.join(
            os.path.dirname(os.path.abspath(os.environ["COGFEED_BIN"])),
            "testtools"))
    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if p:
            cands.append(os.path.join(os.path.dirname(os.path.abspath(p)),
                                      "testtools"))
    for d in cands:
        exe = os.path.join(d, name)
        if os.access(exe, os.X_OK):
            return exe
    raise FileNotFoundError(
        "%s not found (looked in %s): build the tests/tools targets"
        % (name, ", ".join(cands) or "nothing: set CF_TOOLS_DIR"))

"""The local servers the tests start on 127.0.0.1: nginx with the lua fault
module, and the pure-Python range server.  They live in the package
(python/cogfeed/tools/servers.py, with nginx/ beside it as package data),
because `cogfeed demo` and `cogfeed bench --serve-latency-ms` serve files
with them from a pip-installed cogfeed; this module loads that file from
the source tree by path (standard library only, no cogfeed extension
needed) and re-exports it, plus find_tool for the tests.

    with Nginx(tmpdir, latency_ms=50) as srv:
        url = srv.url("a.tif")                      # plain
        bad = srv.url("a.tif", fault="status-503-2") # 503 twice, then OK
        srv.requests("/fault/status-503-2/a.tif")    # GETs seen for it
"""
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_SRC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python",
                    "cogfeed", "tools", "servers.py")
_spec = importlib.util.spec_from_file_location("_cf_tools_servers", _SRC)
_m = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _m
_spec.loader.exec_module(_m)

Nginx = _m.Nginx
RangeServer = _m.RangeServer
NGINX_BIN = _m.NGINX_BIN
die_with_parent = _m.die_with_parent
stop_process = _m.stop_process
free_port = _m.free_port
wait_port = _m.wait_port
nginx_missing = _m.nginx_missing
server = _m.server


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

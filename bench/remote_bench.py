"""Remote vs local vs GDAL /vsicurl/: many random windows over a set of COGs.

Side by side in one run, on the same files and the same windows:
  * cogfeed reading from local disk (page cache warm), with Python threads
    each calling Cog.read, and with one cogfeed.read_many call,
  * cogfeed reading the same files through nginx with a first-byte latency
    (164 ms by default, what the paper measured to Azure Blob),
  * GDAL's /vsicurl/ through the same nginx (GDAL 3.10, the one rasterio's
    wheel carries, through rasterio), with the best settings found
    (merged consecutive ranges, VSI cache, multiplexing where offered, one
    dataset per thread, several thread counts tried).

Fairness:
  * The windows of one pass never share a tile, so no reader can serve a
    tile from a cache (GDAL's block cache, its /vsicurl/ region cache or
    VSI_CACHE): every reader fetches and decodes every tile once.  Each
    round draws new windows; GDAL datasets are reopened each pass.
  * Every reader first reads a few warm-up windows (connections open,
    headers parsed, threads started) that are not timed.
  * Each reader runs at several thread counts; the best is reported.  A
    round runs local, remote and GDAL back to back, so they see the same
    machine load; rounds are repeated and the median round is reported.
  * CPU seconds are counted for the benchmark process and for nginx, per
    GB of decoded pixels: on a small shared machine the server, the HTTP
    receive path and the decoders compete for the same cores.

Prints MB/s of decoded pixels delivered, windows/s, requests per window and
the ratios; --json for machines.  Not a test: it measures.

    PYTHONPATH=build/python .venv/bin/python bench/remote_bench.py   (after ./run.sh build)
"""
import argparse
import concurrent.futures as cf
import json
import os
import random
import sys
import threading
import time

import numpy as np
import rasterio
from rasterio.windows import Window

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "servers"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

import cogfeed  # noqa: E402
from conformance import write_array  # noqa: E402
from cogfeed.tools import common  # noqa: E402
from servers import Nginx  # noqa: E402


def make_files(folder, n, size, tile, compress, bands=4):
    """Smooth, noisy uint16 scenes written as COGs by GDAL (cached)."""
    os.makedirs(folder, exist_ok=True)
    paths = ["%s/scene_%02d_%s_%d_%d.tif" % (folder, i, compress.lower(), size, tile)
             for i in range(n)]
    todo = [p for p in paths if not os.path.exists(p)]
    if not todo:
        return paths
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    noise = rng.normal(0, 60, (size, size)).astype(np.float32)
    for i, p in enumerate(paths):
        if p not in todo:
            continue
        arr = np.empty((bands, size, size), np.uint16)
        for b in range(bands):
            f = rng.uniform(2, 12, 3)
            base = (np.sin(xx * f[0] + b) + np.cos(yy * f[1]) + np.sin((xx + yy) * f[2])) * 800 + 2000
            # The same noise field, shifted per file and band: cheap to make,
            # and compresses like fresh noise.
            nz = np.roll(noise, (i * 977 + b * 131, i * 373 + b * 59), (0, 1))
            arr[b] = np.clip(base + nz, 0, 65535).astype(np.uint16)
        opts = {"COMPRESS": compress, "BLOCKSIZE": tile, "OVERVIEWS": "NONE"}
        if compress in ("ZSTD", "DEFLATE", "LZW"):
            opts["PREDICTOR"] = 2
        write_array(p + ".tmp", arr, "COG", **opts)
        os.rename(p + ".tmp", p)
    return paths


def disjoint_windows(nfiles, size, tile, win, count, seed):
    """Up to `count` random windows (file, x, y) no two of which touch the
    same tile, and the number of tiles they touch."""
    rng = random.Random(seed)
    used = set()
    out = []
    tiles = 0
    tries = 0
    while len(out) < count and tries < count * 200:
        tries += 1
        i = rng.randrange(nfiles)
        x = rng.randrange(0, size - win + 1)
        y = rng.randrange(0, size - win + 1)
        ts = {(i, tx, ty) for tx in range(x // tile, (x + win - 1) // tile + 1)
              for ty in range(y // tile, (y + win - 1) // tile + 1)}
        if ts & used:
            continue
        used |= ts
        tiles += len(ts)
        out.append((i, x, y))
    return out, tiles


class Cpu:
    """CPU seconds (user + system) of this process and of nginx."""

    def __init__(self, srv=None):
        self.srv = srv

    def _nginx(self):
        if self.srv is None or self.srv.proc is None:
            return 0.0
        # the master and its workers
        return common.cpu_seconds(common.descendants(self.srv.proc.pid))

    def snap(self):
        t = os.times()
        return (t.user + t.system, self._nginx())

    def measure(self, fn, **extra):
        """Run fn() (which returns the bytes it read) and time it: wall
        seconds, bytes, and the CPU of this process and of nginx."""
        c0 = self.snap()
        t0 = time.perf_counter()
        nbytes = fn()
        dt = time.perf_counter() - t0
        c1 = self.snap()
        return dict({"seconds": dt, "bytes": nbytes, "cpu_client_s": c1[0] - c0[0],
                     "cpu_server_s": c1[1] - c0[1]}, **extra)


def measure_cogs(cogs, io, cpu, fn, **extra):
    """cpu.measure(fn, **extra) plus the requests the cogs sent and the
    bytes io fetched meanwhile; closes the cogs."""
    req0 = sum(c.requests for c in cogs)
    fetched0 = io.stats()["bytes_fetched"] if io is not None else 0
    r = cpu.measure(fn, **extra)
    r["requests"] = sum(c.requests for c in cogs) - req0
    if io is not None:
        r["bytes_fetched"] = io.stats()["bytes_fetched"] - fetched0
    for c in cogs:
        c.close()
    return r


def run_cogfeed_many(urls, warm, windows, win, io, cpu):
    """All windows in one cogfeed.read_many call: every tile requested at
    once, decoded by one thread per CPU as the bytes arrive."""
    cogs = [cogfeed.open(u, io=io) for u in urls]
    cogfeed.read_many([(cogs[i], (x, y, win, win)) for i, x, y in warm])
    items = [(cogs[i], (x, y, win, win)) for i, x, y in windows]
    return measure_cogs(cogs, io, cpu,
                        lambda: sum(a.nbytes for a in cogfeed.read_many(items)),
                        threads=0)


def run_cogfeed(urls, warm, windows, win, threads, io, cpu, reuse_out=False):
    if threads == 0:
        return run_cogfeed_many(urls, warm, windows, win, io, cpu)
    cogs = [cogfeed.open(u, io=io) for u in urls]
    local = threading.local()

    def one(w):
        i, x, y = w
        c = cogs[i]
        if not reuse_out:
            return c.read(window=(x, y, win, win)).nbytes
        # One output array per thread, reused: what a loader filling its
        # batch buffers does (no fresh pages per window).
        out = getattr(local, "out", None)
        if out is None:
            out = local.out = np.empty((c.count, win, win), c.dtype)
        return c.read(window=(x, y, win, win), out=out).nbytes

    with cf.ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, warm))
        return measure_cogs(cogs, io, cpu, lambda: sum(ex.map(one, windows)),
                            threads=threads)


GDAL_OPTIONS = {
    # Plain HTTP/1.1 from nginx here: multiplexing applies only where the
    # server speaks HTTP/2; asking costs nothing.
    "GDAL_HTTP_MULTIPLEX": "YES",
    "GDAL_HTTP_VERSION": "2",
    "GDAL_HTTP_MERGE_CONSECUTIVE_RANGES": "YES",
    # Set per run (--gdal-num-threads): ALL_CPUS decodes a window's tiles
    # in GDAL's global pool, which here serialises the reader threads
    # (measured 5.9 MB/s against 43 MB/s with 1).
    "GDAL_NUM_THREADS": "1",
    "VSI_CACHE": "TRUE",
    "VSI_CACHE_SIZE": str(64 << 20),
    "CPL_VSIL_CURL_CACHE_SIZE": str(256 << 20),
    "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
    "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif",
    "GDAL_HTTP_MAX_RETRY": "3",
    "GDAL_INGESTED_BYTES_AT_OPEN": "65536",
}


_gdal_runs = iter(range(1 << 62))


def run_gdal(urls, warm, windows, win, threads, cpu, num_threads="1", count=None):
    opts = dict(GDAL_OPTIONS, GDAL_NUM_THREADS=num_threads)
    # Each run asks for its own URLs (a query nginx ignores): /vsicurl/'s
    # caches are keyed by URL, so nothing an earlier run fetched is served
    # from memory (what VSICurlClearCache did, which rasterio lacks).
    run = next(_gdal_runs)
    urls = ["%s?run=%d" % (u, run) for u in urls]
    local = threading.local()

    def gdal_open(u):
        with rasterio.Env(**opts):  # in every thread: GDAL's options
            return rasterio.open("/vsicurl/" + u)

    def one(w):
        i, x, y = w
        ds = getattr(local, "ds", None)
        if ds is None:
            ds = local.ds = {}
        if i not in ds:
            ds[i] = gdal_open(urls[i])
        with rasterio.Env(**opts):
            return ds[i].read(window=Window(x, y, win, win)).nbytes

    # Warm-up: every worker thread opens every dataset (headers come from
    # GDAL's cache after the first), then the warm-up windows are read.
    with cf.ThreadPoolExecutor(threads) as ex:
        barrier = threading.Barrier(threads)

        def opener(_):
            for i in range(len(urls)):
                ds = getattr(local, "ds", None)
                if ds is None:
                    ds = local.ds = {}
                if i not in ds:
                    ds[i] = gdal_open(urls[i])
            barrier.wait()
            return 0

        list(ex.map(opener, range(threads)))
        list(ex.map(one, warm))
        n0 = count() if count else 0
        r = cpu.measure(lambda: sum(ex.map(one, windows)), threads=threads,
                        num_threads=num_threads)
        n1 = count() if count else 0
    if count:
        r["requests"] = n1 - n0  # nginx does not count /_hits itself
    return r


def run_local(paths, warm, windows, win, threads, cpu, reuse_out=False):
    return run_cogfeed(paths, warm, windows, win, threads, None, cpu, reuse_out)


def ints(s):
    return [int(x) for x in s.split(",") if x]


def derive(r, nwin):
    r["MBps"] = r["bytes"] / r["seconds"] / 1e6
    r["windows_per_s"] = nwin / r["seconds"]
    gb = r["bytes"] / 1e9
    r["cpu_client_s_per_GB"] = r["cpu_client_s"] / gb
    r["cpu_server_s_per_GB"] = r["cpu_server_s"] / gb
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(HERE, "..", "build", "bench-data", "remote"))
    ap.add_argument("--files", type=int, default=32)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--tile", type=int, default=512)
    ap.add_argument("--compress", default="ZSTD")
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--windows", type=int, default=300,
                    help="windows per round (fewer if the tiles run out)")
    ap.add_argument("--warmup", type=int, default=12, help="untimed windows per reader")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-ms", type=float, default=164.0)
    ap.add_argument("--nginx-workers", type=int, default=1)
    ap.add_argument("--max-inflight", type=int, default=256)
    ap.add_argument("--threads", default="16,32,64,0",
                    help="cogfeed remote thread counts (0: one read_many call)")
    ap.add_argument("--local-threads", default="2,4,0",
                    help="cogfeed local thread counts (0: one read_many call)")
    ap.add_argument("--gdal-threads", default="16,64", help="GDAL thread counts")
    ap.add_argument("--gdal-num-threads", default="1",
                    help="GDAL_NUM_THREADS values to try (e.g. 1,ALL_CPUS)")
    ap.add_argument("--no-gdal", action="store_true")
    ap.add_argument("--reuse-out", action="store_true",
                    help="cogfeed reads into one reused output array per thread (both sides)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", metavar="PATH", help="also write every number as JSON to PATH")
    a = ap.parse_args()

    paths = make_files(a.data, a.files, a.size, a.tile, a.compress)
    res = {"config": vars(a).copy(), "rounds": []}
    with Nginx(a.data, latency_ms=a.latency_ms, workers=a.nginx_workers) as srv:
        urls = [srv.url(os.path.basename(p)) for p in paths]
        io = cogfeed.IO(max_inflight=a.max_inflight)
        t0 = time.perf_counter()
        opened = [cogfeed.open(u, io=io) for u in urls]
        res["open_seconds_per_file"] = (time.perf_counter() - t0) / len(urls)
        res["open_requests_per_file"] = sum(c.header_requests for c in opened) / len(opened)
        for c in opened:
            c.close()
        cpu_local, cpu_remote = Cpu(), Cpu(srv)
        for rnd in range(a.rounds):
            allw, tiles = disjoint_windows(len(paths), a.size, a.tile, a.window,
                                           a.windows + a.warmup, a.seed + rnd)
            warm, wins = allw[: a.warmup], allw[a.warmup:]
            if not wins:
                sys.exit("remote_bench: only %d windows that share no tile fit "
                         "%d files of %d px (tile %d, window %d), and --warmup "
                         "takes %d: use more --files or a larger --size"
                         % (len(allw), len(paths), a.size, a.tile, a.window,
                            a.warmup))
            rr = {"windows": len(wins), "tiles": tiles, "local": [], "remote": [], "gdal": []}
            def do_local():
                for t in ints(a.local_threads):
                    rr["local"].append(derive(run_local(paths, warm, wins, a.window, t,
                                                        cpu_local, a.reuse_out), len(wins)))

            def do_remote():
                for t in ints(a.threads):
                    rr["remote"].append(derive(run_cogfeed(urls, warm, wins, a.window, t, io,
                                                           cpu_remote, a.reuse_out), len(wins)))

            # Alternate the order so that neither side always runs first
            # into whatever the machine's other users are doing.
            for step in ((do_local, do_remote) if rnd % 2 == 0 else (do_remote, do_local)):
                step()
            if not a.no_gdal:
                for nt in a.gdal_num_threads.split(","):
                    for t in ints(a.gdal_threads):
                        rr["gdal"].append(derive(run_gdal(urls, warm, wins, a.window, t,
                                                          cpu_remote, nt, srv.requests),
                                                 len(wins)))
            for k in ("local", "remote", "gdal"):
                rr[k + "_best"] = max(rr[k], key=lambda r: r["MBps"]) if rr[k] else None
            rr["remote_vs_local"] = rr["remote_best"]["MBps"] / rr["local_best"]["MBps"]
            if rr["gdal_best"]:
                rr["remote_vs_gdal"] = rr["remote_best"]["MBps"] / rr["gdal_best"]["MBps"]
            res["rounds"].append(rr)
            print_round(rnd, rr, a, file=sys.stderr)
        # Bit-exact spot check between local and remote reads.
        i, x, y = wins[0]
        la = cogfeed.open(paths[i]).read(window=(x, y, a.window, a.window))
        ra = cogfeed.open(urls[i], io=io).read(window=(x, y, a.window, a.window))
        res["remote_equals_local"] = bool(np.array_equal(la, ra))

    rounds = sorted(res["rounds"], key=lambda r: r["remote_vs_local"])
    res["median_round"] = rounds[len(rounds) // 2]
    res["remote_vs_local_all"] = [r["remote_vs_local"] for r in res["rounds"]]
    if not a.no_gdal:
        res["remote_vs_gdal_all"] = [r["remote_vs_gdal"] for r in res["rounds"]]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    print("%d rounds of ~%d windows of %d px (disjoint tiles) over %d %s COGs (%d px, %d px "
          "tiles), nginx latency %.0f ms, %d worker(s)"
          % (a.rounds, len(wins), a.window, a.files, a.compress, a.size, a.tile,
             a.latency_ms, a.nginx_workers))
    print("median round:")
    print_round(None, res["median_round"], a)
    print("remote / local per round: %s" % ", ".join("%.2f" % v for v in res["remote_vs_local_all"]))
    if not a.no_gdal:
        print("remote / GDAL per round:  %s" % ", ".join("%.2f" % v for v in res["remote_vs_gdal_all"]))
    print("open: %.1f request per file, %.0f ms" % (res["open_requests_per_file"],
                                                     res["open_seconds_per_file"] * 1000))
    print("remote bytes identical to local: %s" % res["remote_equals_local"])


def print_round(rnd, rr, a, file=sys.stdout):
    if rnd is not None:
        print("round %d: %d windows, %d tiles" % (rnd, rr["windows"], rr["tiles"]), file=file)
    print("  %-26s %8s %9s %9s %10s %10s" % ("reader", "MB/s", "windows/s", "req/win",
                                           "cpu s/GB", "nginx s/GB"), file=file)
    for k, label in (("local", "cogfeed local"), ("remote", "cogfeed remote"),
                     ("gdal", "GDAL /vsicurl/")):
        for r in rr[k]:
            rq = "%.2f" % (r["requests"] / rr["windows"]) if "requests" in r and k != "local" else "-"
            srv = "%.1f" % r["cpu_server_s_per_GB"] if k != "local" else "-"
            nt = "" if r.get("num_threads", "1") == "1" else ", NUM_THREADS=%s" % r["num_threads"]
            how = "read_many" if r["threads"] == 0 else "%d thr%s" % (r["threads"], nt)
            print("  %-26s %8.1f %9.1f %9s %10.1f %10s%s"
                  % ("%s (%s)" % (label, how), r["MBps"], r["windows_per_s"], rq,
                     r["cpu_client_s_per_GB"], srv, " *" if r is rr[k + "_best"] else ""),
                  file=file)
    line = "  remote/local %.2fx" % rr["remote_vs_local"]
    if rr.get("gdal_best"):
        line += ", remote/GDAL best %.2fx" % rr["remote_vs_gdal"]
    print(line, file=file)


if __name__ == "__main__":
    main()

"""cogfeed bench: stream patches as training would and measure the loader.

Either loader (cogfeed's, or the paper-style baseline of baseline.py) is
driven the same way: take batches as fast as they come, skip --warmup
batches, start the clock when the next one arrives, then measure the
batches after it until --batches or --seconds is reached.  Reported:

  mb_per_s          decoded bytes delivered per second (image samples at
                    the file's own width plus mask bytes, whatever dtype
                    the loader hands out, so float32 output is not counted
                    twice)
  patches_per_s     patches (batch rows) per second
  requests_per_s    I/O requests per second: HTTP requests from the
                    server's access log when bench started the server,
                    the loader's own counters otherwise (cogfeed), or
                    read() calls from /proc/<pid>/io (baseline, local)
  bytes_fetched     bytes read from storage or the network in the window;
                    fetch_ratio = bytes_fetched / bytes_delivered
  decoded_per_read  (cogfeed) bytes the codecs wrote per byte of the
                    windows read, in the window: every tile a patch
                    touches is decoded whole unless a cache holds it
                    (Loader.stats() chunk_bytes_decoded / bytes_decoded)
  cpu_s_per_gb      CPU seconds of every process of the loader (workers
                    included) per GB delivered
  cpu_s_per_gb_by_thread  the same split by thread name (cogfeed's
                    cf-reader, cf-io, cf-decode; python3 the consumer)
  peak_rss_mb       sum of peak resident sets of those processes

Both loaders stream one long epoch (STREAM_EPOCH patches), so a small
dataset's epoch boundaries are not what is measured.

Cold and warm: the run is also split at the end of its first pass over
the data (as many patches as the files' non-overlapping patches): pass 1
is cold (from the loader's creation: files opened, nothing in any cache),
passes 2+ warm, each with its MB/s, requests and (cogfeed) chunk-cache
hits out of lookups.  With the default cache_bytes (5% of memory) a
dataset smaller than the cache is cache-resident in the warm passes:
nothing is fetched or decoded again, and the figure measures the cache;
--cache-bytes 0 measures streaming in every pass.  window_state says
which the measured window was.

--serve-latency-ms N serves the files on 127.0.0.1 adding N ms before the
first byte of every response (cogfeed.tools.servers: nginx with the lua
module when installed, else --server python, cogfeed's pure-Python range
server), and reads them over http:// (/vsicurl/ for the baseline).
"""

import argparse
import json
import sys
import time

from . import common

# Patches per epoch bench streams (both loaders): one epoch for the run.
STREAM_EPOCH = 10 ** 9

FIELDS = ("loader", "transport", "latency_ms", "files", "settings",
          "batches", "patches", "seconds", "first_batch_s", "mb_per_s",
          "patches_per_s", "requests", "requests_per_s", "bytes_delivered",
          "bytes_fetched", "fetch_ratio", "decoded_per_read", "traffic_source",
          "cpu_seconds",
          "cpu_s_per_gb", "cpu_s_per_gb_by_thread", "peak_rss_mb",
          "loader_stats", "pass_patches", "passes", "window_state", "server")


def _cogfeed_traffic(st):
    """(requests, bytes) from a cogfeed Loader.stats() dict."""
    return st.get("requests"), st.get("bytes_fetched")


def pass_patches(paths, patch_size):
    """Patches in one pass over the data: the non-overlapping patches of
    every file (what cogfeed.Loader takes as an epoch by default)."""
    n = 0
    for p in paths:
        w, h = common.cog_shape(p)[:2]
        n += max(1, w // patch_size) * max(1, h // patch_size)
    return n


class _Snap:
    """Counters at one point of a run, cumulative from its start."""

    def __init__(self, ld, logc, t, patches, delivered, base=None,
                 start=False):
        self.t, self.patches, self.delivered = t, patches, delivered
        self.cpu = common.cpu_seconds(ld.pids())
        # A cogfeed loader counts from its creation (its files opened):
        # the run's start is zero.  The server's log and /proc count more.
        st = {} if (start and ld.kind == "cogfeed") else ld.stats()
        self.hits = self.misses = None
        if logc is not None:
            r, b = logc.take()
            r0, b0 = (base.req, base.byt) if base is not None else (0, 0)
            self.req, self.byt = r0 + r, b0 + b
        elif ld.kind == "cogfeed":
            self.req, self.byt = (st.get("requests", 0),
                                  st.get("bytes_fetched", 0))
        elif getattr(ld, "transport", None) == "file":
            self.req = st.get("local_read_calls")
            self.byt = st.get("local_read_bytes")
        else:
            self.req = self.byt = None
        if ld.kind == "cogfeed":
            self.hits = st.get("cache_hits", 0)
            self.misses = st.get("cache_misses", 0)


def _between(a, b, state, complete=True):
    def d(x, y):
        return None if x is None or y is None else y - x
    el = max(b.t - a.t, 1e-9)
    delivered = b.delivered - a.delivered
    req = d(a.req, b.req)
    return {
        "state": state, "complete": complete,
        "patches": b.patches - a.patches, "seconds": el,
        "mb_per_s": delivered / 1e6 / el,
        "patches_per_s": (b.patches - a.patches) / el,
        "requests": req,
        "requests_per_s": None if req is None else req / el,
        "bytes_delivered": delivered, "bytes_fetched": d(a.byt, b.byt),
        "cache_hits": d(a.hits, b.hits), "cache_misses": d(a.misses, b.misses),
        "cpu_seconds": b.cpu - a.cpu,
    }


def measure(ld, batches=None, seconds=None, warmup=2, log=None,
            itemsize=2, on_batch=None, pass_size=None, passes=None,
            started=None, pass_log=None):
    """Drive loader wrapper `ld` and return the measurement dict (without
    the descriptive fields).

    With pass_size (patches in one pass over the data), the run is also
    split at the end of the first pass: "passes" holds the first pass
    (cold: from the start, opening the files included, nothing cached
    yet) and the later ones (warm), each with its requests and, for
    cogfeed, its chunk-cache hits and misses; "window_state" says which
    of them the measured window covers.  passes=N also ends the run once
    N passes are delivered.  started (time.perf_counter() before the
    loader was made) and pass_log (a common.LogCounter made then) let the
    first pass include the loader's creation."""
    if batches is None and seconds is None and passes is None:
        seconds = 10.0
    t_start = time.perf_counter()
    t_pass = started if started is not None else t_start
    passlog = pass_log if pass_log is not None else \
        (common.LogCounter(log) if (log and pass_size) else None)
    s_start = _Snap(ld, passlog, 0.0, 0, 0, start=True) \
        if pass_size else None
    s_pass = None
    pass_batch = None  # index of the batch that ended the first pass
    it = iter(ld)
    first = None
    n = 0
    delivered = 0
    patches = 0
    all_patches = 0
    all_delivered = 0
    t0 = None
    cpu0 = 0.0
    thr0 = {}
    st0 = {}
    logc = None
    measured = 0
    for b in it:
        now = time.perf_counter()
        if first is None:
            first = now - t_start
        img, msk = common.batch_arrays(b)
        size = common.nelem(img) * itemsize
        if msk is not None:
            size += common.nelem(msk)
        all_patches += int(img.shape[0])
        all_delivered += size
        if pass_size and s_pass is None and all_patches >= pass_size:
            s_pass = _Snap(ld, passlog, now - t_pass, all_patches,
                           all_delivered, s_start)
            pass_batch = n
        if t0 is None:
            if n == warmup:
                # This batch's arrival starts the clock; what arrives after
                # it is measured (so N batches span N intervals).
                t0 = now
                cpu0 = common.cpu_seconds(ld.pids())
                thr0 = common.cpu_by_thread(ld.pids())
                st0 = ld.stats()
                logc = common.LogCounter(log) if log else None
            n += 1
            continue
        delivered += size
        patches += int(img.shape[0])
        if on_batch:
            on_batch(b)
        n += 1
        measured += 1
        if (batches is not None and measured >= batches) or \
                (seconds is not None and now - t0 >= seconds) or \
                (passes is not None and pass_size and
                 all_patches >= passes * pass_size):
            break
    t1 = time.perf_counter()
    if t0 is None or not measured:
        raise RuntimeError("bench: the loader ended after %d batches, "
                           "before measuring (%d warm-up batches)"
                           % (n, warmup))
    pids = ld.pids()
    cpu = common.cpu_seconds(pids) - cpu0
    thr = {k: v - thr0.get(k, 0.0)
           for k, v in common.cpu_by_thread(pids).items()}
    rss = common.peak_rss_mb(pids)
    st1 = ld.stats()
    el = max(t1 - t0, 1e-9)
    req = byt = None
    src = None
    if logc is not None:
        req, byt = logc.take()
        src = "server-access-log"
    elif ld.kind == "cogfeed":
        r1, b1 = _cogfeed_traffic(st1)
        r0, b0 = _cogfeed_traffic(st0)
        if r1 is not None:
            req = r1 - (r0 or 0)
        if b1 is not None:
            byt = b1 - (b0 or 0)
        src = "loader-stats"  # local reads count there like remote ones
    else:
        if ld.transport == "file":
            req = st1["local_read_calls"] - st0.get("local_read_calls", 0)
            byt = st1["local_read_bytes"] - st0.get("local_read_bytes", 0)
            src = "proc-io"
    gb = delivered / 1e9
    dpr = None
    if ld.kind == "cogfeed":
        read = st1.get("bytes_decoded", 0) - st0.get("bytes_decoded", 0)
        chunks = st1.get("chunk_bytes_decoded", 0) - st0.get("chunk_bytes_decoded", 0)
        dpr = chunks / read if read > 0 else None
    out = {
        "batches": measured, "patches": patches, "seconds": el,
        "first_batch_s": first,
        "mb_per_s": delivered / 1e6 / el,
        "patches_per_s": patches / el,
        "requests": req,
        "requests_per_s": None if req is None else req / el,
        "bytes_delivered": delivered,
        "bytes_fetched": byt,
        "fetch_ratio": None if (byt is None or not delivered)
        else byt / delivered,
        "decoded_per_read": dpr,
        "traffic_source": src,
        "cpu_seconds": cpu,
        "cpu_s_per_gb": cpu / gb if gb > 0 else None,
        "cpu_s_per_gb_by_thread": {k: round(v / gb, 3) for k, v in thr.items()
                                   if gb > 0 and v > 0},
        "peak_rss_mb": rss,
        "loader_stats": st1,
        "pass_patches": pass_size,
        "passes": None,
        "window_state": None,
    }
    if pass_size:
        s_end = _Snap(ld, passlog, t1 - t_pass, all_patches, all_delivered,
                      s_pass or s_start)
        if s_pass is None:
            out["passes"] = {"cold": _between(s_start, s_end, "cold", False),
                             "warm": None}
            out["window_state"] = "cold"
        else:
            warm = None
            if s_end.patches > s_pass.patches:
                warm = _between(s_pass, s_end, "warm")
            out["passes"] = {"cold": _between(s_start, s_pass, "cold"),
                             "warm": warm}
            # The window starts after batch `warmup`: warm when the first
            # pass ended by then.
            out["window_state"] = "warm" if pass_batch <= warmup \
                else "cold+warm"
    return out


def run_on(img_urls, msk_urls, loader, settings, batches=None, seconds=None,
           warmup=2, transport="file", log=None, latency_ms=None,
           baseline_workers=4, baseline_prefetch=2, itemsize=2,
           pass_size=None, passes=None, server=None):
    """Benchmark a loader over already-resolved URLs (local paths or
    http://); log is the serving server's access log when there is one;
    pass_size: patches in one pass over the data (pass_patches), for the
    cold / warm split; server: which server served them (a line)."""
    s = dict(common.LOADER_KEYS)
    s.update({k: v for k, v in (settings or {}).items()
              if k in common.LOADER_KEYS})
    # cogfeed gets one long epoch, as the baseline's dataset (length
    # 10**9), so that both loaders stream the same way (cogfeed's readers
    # would run into the next epoch anyway; the baseline's workers would
    # not).  Each kind ignores the other's arguments.
    started = time.perf_counter()
    pass_log = common.LogCounter(log) if (log and pass_size) else None
    ld = common.make_loader(loader, img_urls, msk_urls, s, baseline_workers,
                            baseline_prefetch, epoch_length=STREAM_EPOCH)
    ld.transport = transport
    try:
        r = measure(ld, batches, seconds, warmup, log, itemsize,
                    pass_size=pass_size, passes=passes, started=started,
                    pass_log=pass_log)
    finally:
        ld.close()
    if loader == "baseline":
        s = dict(s, workers=baseline_workers,
                 prefetch_factor=baseline_prefetch)
    r.update({"loader": loader, "files": len(img_urls), "settings": s,
              "latency_ms": latency_ms, "transport": transport,
              "server": server})
    return r


def run(images, masks=None, loader="cogfeed", settings=None, batches=None,
        seconds=None, warmup=2, serve_latency_ms=None, baseline_workers=4,
        baseline_prefetch=2, server="auto", passes=None):
    """One benchmark run over local files (served over http when
    serve_latency_ms is set, by `server`: see common.served); returns a
    dict with every key of FIELDS."""
    if isinstance(images, str):
        imgs, msks = common.resolve(images, masks)
    else:
        imgs, msks = list(images), (list(masks) if masks else None)
    kw = dict(batches=batches, seconds=seconds, warmup=warmup,
              latency_ms=serve_latency_ms, baseline_workers=baseline_workers,
              baseline_prefetch=baseline_prefetch,
              itemsize=common.cog_shape(imgs[0])[3], passes=passes)
    # Counted on the local files: opening the remote ones here would warm
    # what the first pass is to measure cold.
    ps = (settings or {}).get("patch_size") or \
        common.LOADER_KEYS["patch_size"]
    kw["pass_size"] = pass_patches(imgs, ps)
    if serve_latency_ms is None:
        return run_on(imgs, msks, loader, settings, transport="file", **kw)
    with common.served(imgs + (msks or []), serve_latency_ms,
                       server) as (srv, url):
        return run_on([url(p) for p in imgs],
                      [url(p) for p in msks] if msks else None, loader,
                      settings, transport="http",
                      log=common.access_log(srv),
                      server=common.server_note(srv), **kw)


def _fmt(v, unit=""):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return "%.3g%s" % (v, unit) if abs(v) < 100 else "%.0f%s" % (v, unit)
    return "%s%s" % (v, unit)


def report(r, out=sys.stdout):
    s = r["settings"]
    out.write("%s loader, %s%s, %d files, patch %s, batch %s, sampler %s\n"
              % (r["loader"], r["transport"],
                 "" if r["latency_ms"] is None else
                 " (%d ms latency)" % r["latency_ms"],
                 r["files"], s["patch_size"], s["batch_size"], s["sampler"]))
    rows = [("throughput", _fmt(r["mb_per_s"], " MB/s")),
            ("patches", _fmt(r["patches_per_s"], " /s")),
            ("requests", _fmt(r["requests_per_s"], " /s")),
            ("bytes fetched / delivered", "%s / %s (x%s)" % (
                _fmt(r["bytes_fetched"]), _fmt(r["bytes_delivered"]),
                _fmt(r["fetch_ratio"]))),
            ("decoded per byte read", _fmt(r.get("decoded_per_read"))),
            ("CPU per GB", _fmt(r["cpu_s_per_gb"], " s")),
            ("  by thread", ", ".join(
                "%s %.2f" % kv for kv in sorted(
                    (r.get("cpu_s_per_gb_by_thread") or {}).items(),
                    key=lambda kv: -kv[1])) or "n/a"),
            ("peak RSS", _fmt(r["peak_rss_mb"], " MB")),
            ("first batch after", _fmt(r["first_batch_s"], " s")),
            ("measured", "%d batches in %.1f s" % (r["batches"],
                                                   r["seconds"]))]
    for k, v in rows:
        out.write("  %-26s %s\n" % (k, v))
    if r.get("window_state"):
        out.write("  %-26s %s\n" % ("measured window is", {
            "cold": "cold (inside the first pass)",
            "warm": "warm (after the first pass)",
            "cold+warm": "cold then warm (the first pass ended inside it)",
        }[r["window_state"]]))
    if r.get("server"):
        out.write("  %-26s %s\n" % ("served by", r["server"]))
    if r.get("passes"):
        out.write("  passes (one pass: %d patches; cold = from the loader's "
                  "creation):\n" % r["pass_patches"])
        for line in pass_lines(r):
            out.write("    " + line + "\n")
        w = r["passes"].get("warm")
        if w and w["cache_hits"] and not w["cache_misses"]:
            out.write("  the warm passes were cache-resident (every chunk "
                      "from the cache, nothing decoded again): "
                      "--cache-bytes 0 measures streaming\n")


def pass_lines(r):
    """Table lines of a run's first pass (cold) and later passes (warm)."""
    lines = ["%-22s %9s %10s %9s %12s" % ("", "MB/s", "patches/s",
                                          "requests", "cache hits")]
    for key, name in (("cold", "pass 1 (cold)"), ("warm", "passes 2+ (warm)")):
        p = r["passes"].get(key)
        if p is None:
            lines.append("%-22s %s" % (name, "not reached"))
            continue
        if not p["complete"]:
            name += " %d%%" % (100 * p["patches"] // max(1, r["pass_patches"]))
        lines.append("%-22s %9.1f %10.1f %9s %12s" % (
            name, p["mb_per_s"], p["patches_per_s"], _fmt(p["requests"]),
            "n/a" if p["cache_hits"] is None else
            "%d/%d" % (p["cache_hits"], p["cache_hits"] + p["cache_misses"])))
    return lines


class _OldConcurrency(argparse.Action):
    """--max-inflight: still read, with a note that it is --concurrency."""

    def __call__(self, parser, ns, value, option=None):
        sys.stderr.write("cogfeed bench: --max-inflight is now --concurrency "
                         "(patches read at once)\n")
        setattr(ns, self.dest, value)


def table_help(name):
    """The C table's default and range of Loader option `name`, for an
    argparse help ('%' doubled; the same text on every machine, for the
    man page): the flags restate no C default."""
    from ..loader import _OPTIONS, option_summary
    return option_summary(_OPTIONS[name], here=False).rstrip(".").replace(
        "%", "%%")


def table_default(name):
    """The C table's default of Loader option `name`."""
    from ..loader import _default
    return _default(name)


def add_loader_flags(p):
    p.add_argument("--patch-size", type=int,
                   help="patch width and height in pixels (%s)"
                   % table_help("patch_size"))
    p.add_argument("--batch-size", type=int,
                   help="patches per batch (%s)" % table_help("batch_size"))
    p.add_argument("--sampler",
                   choices=("random", "blocked", "tile-shuffle", "grid"),
                   help="where patches come from (default random)")
    p.add_argument("--seed", type=int,
                   help="sampler seed (%s)" % table_help("seed"))
    p.add_argument("--prefetch", type=int,
                   help="batch slots in flight (%s)" % table_help("prefetch"))
    p.add_argument("--concurrency", default=None,
                   help="patches read at once, or 'adaptive' (default)")
    # The old name of --concurrency (IO's max_inflight counts requests).
    p.add_argument("--max-inflight", dest="concurrency",
                   action=_OldConcurrency, help=argparse.SUPPRESS)
    p.add_argument("--decode-threads", type=int,
                   help="decode threads (%s)" % table_help("threads"))
    p.add_argument("--cache-bytes", type=int,
                   help="decoded tiles kept, in bytes (%s)"
                   % table_help("cache_bytes"))
    p.add_argument("--dtype", choices=("raw", "float32"),
                   help="batch type: the file's own (raw, default) or "
                        "float32")


def settings_from(a, cfg=None):
    """Loader settings: hard defaults < config file < explicit flags."""
    s = dict(common.LOADER_KEYS)
    for k, v in (cfg or {}).items():
        k = "concurrency" if k == "max_inflight" else k  # its old name
        if k in s:
            s[k] = v
    for k in common.LOADER_KEYS:
        v = getattr(a, k, None)
        if v is not None:
            s[k] = v
    if isinstance(s["concurrency"], str):
        s["concurrency"] = None if s["concurrency"] == "adaptive" \
            else int(s["concurrency"])
    return s


def main(argv):
    p = argparse.ArgumentParser(
        prog="cogfeed bench",
        description="Stream training patches and measure throughput "
                    "(cogfeed's loader or the paper-style baseline).")
    p.add_argument("--images", help="folder, glob or file (a dataset "
                   "folder with images/ and masks/ gives both)")
    p.add_argument("--masks", help="folder, glob or file")
    add_loader_flags(p)
    p.add_argument("--config", help="JSON of Loader settings (tune's "
                   "best.json); flags override it")
    p.add_argument("--loader", choices=("cogfeed", "baseline"),
                   default="cogfeed",
                   help="cogfeed's Loader (default) or the paper-style "
                        "DataLoader over rasterio")
    p.add_argument("--baseline-workers", type=int, default=4,
                   help="DataLoader worker processes (baseline)")
    p.add_argument("--baseline-prefetch", type=int, default=2,
                   help="DataLoader prefetch_factor (baseline)")
    p.add_argument("--batches", type=int, help="measured batches")
    p.add_argument("--seconds", type=float, help="measured seconds "
                   "(default 10 when --batches is not given)")
    p.add_argument("--warmup", type=int, default=2,
                   help="batches skipped before the clock starts")
    p.add_argument("--serve-latency-ms", type=int, default=None,
                   help="serve the files on 127.0.0.1 at this first-byte "
                        "latency and read them over http")
    p.add_argument("--server", choices=("auto", "nginx", "python"),
                   default="auto",
                   help="what serves them: nginx with the lua module, "
                        "cogfeed's pure-Python range server, or auto "
                        "(nginx when installed; default)")
    p.add_argument("--passes", type=int,
                   help="end after this many passes over the data (one "
                        "pass: the files' non-overlapping patches)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object on stdout instead of text")
    a = p.parse_args(argv)
    cfg = common.load_config(a.config) if a.config else {}
    images = a.images or cfg.get("images")
    masks = a.masks or (None if a.images else cfg.get("masks"))
    if not images:
        p.error("--images (or a --config with 'images') is required")
    try:
        r = run(images, masks, a.loader, settings_from(a, cfg), a.batches,
                a.seconds, a.warmup, a.serve_latency_ms,
                a.baseline_workers, a.baseline_prefetch, a.server,
                a.passes)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        sys.stderr.write("cogfeed bench: %s\n" % e)
        return 1
    if a.json:
        json.dump(r, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        report(r)
    return 0

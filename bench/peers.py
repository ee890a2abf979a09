#!/usr/bin/python3
"""cogfeed side by side with the tools EO teams choose between instead.

One command, one run:

    PYTHONPATH=build/python /usr/bin/python3 bench/peers.py [--json FILE]

makes (once) its own virtual environment bench/.venv-peers with the peers
of bench/peers-requirements.txt (pinned; Python 3.12), builds cogfeed's
extension for that interpreter into build-peers/, makes the data (once,
bench/peers_lib/peers_data.py: 32 LERC_ZSTD and 32 DEFLATE COGs of 4096
px, 4 bands uint16 + a uint8 mask), starts nginx on 127.0.0.1 with a
first-byte latency (164 ms: the paper's Azure figure) and runs every
configuration in its own process (bench/peers_lib/peers_runs.py), so
that each peak RSS is that configuration's own:

1. windows: random 512 px windows over the 32 files of each codec, none
   two sharing a tile (no reader can serve one from a cache), locally and
   over nginx: cogfeed.read_many and cogfeed.Loader; async-tiff (its own
   object-store layer) at several concurrencies; rasterio (PyPI's, with
   its wheel's GDAL) over /vsicurl/ with a sweep of GDAL's settings and
   thread counts; tifffile + imagecodecs for the local case.
2. training patches: image + mask patches of 256 px, batch 16, random
   and grid sampling: TorchGeo (RasterDataset & RasterDataset,
   RandomGeoSampler / GridGeoSampler, DataLoader with stack_samples and
   persistent workers, a sweep of worker counts), the paper-style loader
   (python/cogfeed/tools/baseline.py, run by the project's own Python)
   and cogfeed.Loader with its defaults, locally and over nginx.
3. decode: cogfeed's codecs (Cog.decode_tile) against imagecodecs
   (tifffile's page.decode) on the same tile bytes, 1 thread and all
   cores, every codec both have; Cog.read's end-to-end figure and
   imagecodecs' bare codec call in their own columns.

then the targets (cogfeed >= 5x TorchGeo's best patch rate remotely, >=
3x locally, at most half its peak RSS; >= 2x async-tiff's best window
rate remotely; every codec at least as fast as imagecodecs), and a check
that `cogfeed experiment --model unet-resnet18` trains for real in the
peers' environment (tests/python/test_experiment_models.py).

--quick: small data (8 scenes of 2048 px), short runs, one setting per
peer: checks that every configuration runs (a few minutes), numbers
meaningless.  --markdown FILE prints the tables of a saved --json.
Generated data goes to --data (default build/bench-data/peers); delete
it when done, the same command makes it again.
"""

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# The helpers live in peers_lib/, out of `./run.sh bench`'s bench/*.py.
sys.path.insert(0, os.path.join(HERE, "peers_lib"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "servers"))

import peers_data  # noqa: E402

VENV = os.path.join(HERE, ".venv-peers")
REQS = os.path.join(HERE, "peers-requirements.txt")
BUILD = os.path.join(REPO, "build-peers")
RUNNER = os.path.join(HERE, "peers_lib", "peers_runs.py")

# GDAL settings every rasterio and TorchGeo run gets: no directory listing
# on open (an HTTP server without autoindex answers 404 to each), only .tif
# names go to the network.
GDAL_BASE = {"GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
             "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif"}
# The starting point of the /vsicurl/ sweep: what GDAL's documentation
# recommends for cloud reads.
GDAL_REMOTE = dict(GDAL_BASE, GDAL_HTTP_MULTIPLEX="YES",
                   GDAL_HTTP_VERSION="2",
                   GDAL_HTTP_MERGE_CONSECUTIVE_RANGES="YES",
                   GDAL_NUM_THREADS="1", GDAL_CACHEMAX="256",
                   VSI_CACHE="TRUE", VSI_CACHE_SIZE=str(64 << 20),
                   CPL_VSIL_CURL_CACHE_SIZE=str(256 << 20))


def log(msg):
    sys.stderr.write("peers: %s\n" % msg)
    sys.stderr.flush()


# -- the environment --------------------------------------------------------

HERE_ONLY = []   # [True] with --here: the peers are this interpreter's


def venv_python():
    return sys.executable if HERE_ONLY else os.path.join(VENV, "bin",
                                                         "python")


def ensure_venv(base_python):
    """bench/.venv-peers with peers-requirements.txt installed; remade
    when the requirements change (their hash is kept in the venv)."""
    with open(REQS, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    stamp = os.path.join(VENV, "requirements.sha256")
    if os.path.exists(stamp) and open(stamp).read().strip() == want:
        return
    py = shutil.which(base_python) or base_python
    if not os.path.exists(py):
        sys.exit("peers: no %s to make the peers' environment with (torchgeo "
                 ">= 0.9 and rasterio >= 1.5 need Python 3.12: --python)"
                 % base_python)
    log("making %s with %s (several GB: torch's CUDA build)" % (VENV, py))
    shutil.rmtree(VENV, ignore_errors=True)
    subprocess.run([py, "-m", "venv", VENV], check=True)
    subprocess.run([venv_python(), "-m", "pip", "install", "-q", "-r", REQS],
                   check=True)
    with open(stamp, "w") as f:
        f.write(want + "\n")


def ensure_build():
    """cogfeed's extension for the venv's interpreter, in build-peers/."""
    subprocess.run(["cmake", "-S", REPO, "-B", BUILD,
                    "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                    "-DPython3_EXECUTABLE=" + venv_python()],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", BUILD, "-j%d" % (os.cpu_count() or 1),
                    "--target", "_cogfeed"], check=True,
                   stdout=subprocess.DEVNULL)


def env_for(where, extra=None):
    """Environment of a child: the peers' venv with build-peers' cogfeed,
    or ("project") this interpreter with build/'s."""
    e = dict(os.environ)
    for k in list(e):
        if k.startswith(("GDAL_", "CPL_", "VSI_")):
            del e[k]
    e["PYTHONWARNINGS"] = "ignore"
    if not HERE_ONLY:
        e["PYTHONPATH"] = os.path.join(BUILD if where == "venv" else
                                       os.path.join(REPO, "build"), "python")
    e.update(extra or {})
    return e


def child(cfg, where="venv", gdal=None, timeout=900):
    """Run one configuration in its own process; its result dict."""
    py = venv_python() if where == "venv" else sys.executable
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cfg, f)
    try:
        p = subprocess.run([py, RUNNER, f.name], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True,
                           env=env_for(where, gdal), timeout=timeout)
    finally:
        os.unlink(f.name)
    if p.returncode != 0 or not p.stdout.strip():
        raise RuntimeError("%s failed (exit %d):\n%s" % (
            cfg["run"], p.returncode, p.stderr.strip()[-3000:]))
    if p.stderr.strip():
        sys.stderr.write(p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def serve(root, latency_ms):
    """nginx on 127.0.0.1 serving root with latency_ms before each first
    byte and an access log at srv.log (what Meter counts requests from)."""
    from servers import Nginx
    srv = Nginx(root, latency_ms=latency_ms, access_log=True,
                workers=max(1, (os.cpu_count() or 1) // 4))
    with srv:
        srv.log = os.path.join(srv.tmp, "access.log")
        if not os.path.exists(srv.log):
            open(srv.log, "a").close()
        yield srv


# -- the runs ---------------------------------------------------------------

class Runs:
    """Runs configurations, prints each row as it comes, keeps them all."""

    def __init__(self):
        self.rows = []

    def run(self, workload, storage, codec, reader, setting, cfg,
            where="venv", gdal=None):
        try:
            r = child(cfg, where, gdal)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            log("%s %s %s %s: %s" % (workload, storage, reader, setting, e))
            r = {"error": str(e)[-500:]}
        r.update({"workload": workload, "storage": storage, "codec": codec,
                  "reader": reader, "setting": setting,
                  "gdal": gdal or {}})
        self.rows.append(r)
        print_row(r)
        return r

    def best(self, **match):
        rs = [r for r in self.rows if "error" not in r and
              all(r.get(k) == v for k, v in match.items())]
        return max(rs, key=lambda r: r["items_per_s"]) if rs else None


HEAD = ("%-8s %-9s %-9s %-18s %-34s %7s %7s %8s %8s %7s %7s %6s %s" % (
    "workload", "storage", "codec", "reader", "setting", "hdr s", "1st s",
    "MB/s", "items/s", "CPU/GB", "RSS MB", "req/it", "load"))


def _f(v, fmt):
    return "-" if v is None else fmt % v


def print_row(r, out=sys.stdout):
    if "error" in r:
        out.write("%-8s %-9s %-9s %-18s %-34s FAILED\n" % (
            r["workload"], r["storage"], r["codec"], r["reader"],
            r["setting"][:34]))
        return
    out.write("%-8s %-9s %-9s %-18s %-34s %7.2f %7.2f %8.1f %8.1f %7s "
              "%7.0f %6s %.1f\n" % (
                  r["workload"], r["storage"], r["codec"], r["reader"],
                  r["setting"][:34], r["header_s"], r["first_s"],
                  r["mb_per_s"], r["items_per_s"],
                  _f(r["cpu_s_per_gb"], "%.2f"), r["peak_rss_mb"],
                  _f(r["requests_per_item"], "%.2f"), r["load_avg"]))
    out.flush()


def gdal_setting(g):
    """Short form of a GDAL configuration against GDAL_REMOTE."""
    keys = {"GDAL_NUM_THREADS": "NT", "GDAL_HTTP_MERGE_CONSECUTIVE_RANGES":
            "merge", "GDAL_HTTP_MULTIPLEX": "mux", "GDAL_CACHEMAX": "cache"}
    return " ".join("%s=%s" % (v, g[k]) for k, v in keys.items() if k in g)


def warm_page_cache(paths):
    """Read every file once so that the first row measured does not read
    from the disk while the later ones read from memory ("cold" in these
    tables means headers not yet read, not files on disk)."""
    total = 0
    for p in paths:
        with open(p, "rb") as f:
            while True:
                b = f.read(8 << 20)
                if not b:
                    break
                total += len(b)
    log("%d files (%.1f GB) read into the page cache" % (len(paths),
                                                          total / 1e9))


def windows(a, runs, data, srv):
    """Workload 1 for each codec, locally and remotely."""
    from remote_bench import disjoint_windows
    n = a.scenes
    wins, _ = disjoint_windows(n, a.size, 512, 512, a.windows + a.batch,
                               a.seed)
    if len(wins) <= a.batch:
        sys.exit("peers: only %d windows of 512 px that share no tile fit in "
                 "%d files of %d px" % (len(wins), n, a.size))
    log("windows: %d of 512 px per run (%d in the first batch)"
        % (len(wins), a.batch))
    for codec in a.codecs.split(","):
        folder = os.path.join(data[codec], "images")
        paths = [os.path.join(folder, "scene_%03d.tif" % i) for i in range(n)]
        rel = [os.path.relpath(p, a.data) for p in paths]
        warm_page_cache(paths)
        for storage in ("local", "remote"):
            remote = storage == "remote"
            urls = [srv.url(r) for r in rel] if remote else paths
            lg = srv.log if remote else None
            base = {"windows": wins, "batch": a.batch, "win": 512,
                    "log": lg, "bands": 4, "seconds": a.seconds,
                    "warmup": a.warmup}
            W = "windows"
            runs.run(W, storage, codec, "cogfeed", "read_many", dict(
                base, run="windows_cogfeed", urls=urls))
            runs.run(W, storage, codec, "cogfeed", "Loader random 512", dict(
                base, run="windows_loader", urls=urls))
            for c in a.async_conc:
                runs.run(W, storage, codec, "async-tiff",
                         "%d windows at once" % c, dict(
                             base, run="windows_async_tiff",
                             base=(srv.url("") if remote else a.data),
                             paths=rel, concurrency=c))
            gpaths = ["/vsicurl/" + u for u in urls] if remote else paths
            rasterio_sweep(a, runs, storage, codec, base, gpaths)
            if not remote:
                for t in a.tifffile_threads:
                    runs.run(W, storage, codec, "tifffile+imagecodecs",
                             "%d threads" % t, dict(
                                 base, run="windows_tifffile", paths=paths,
                                 threads=t))


def rasterio_sweep(a, runs, storage, codec, base, paths):
    """Thread counts at the recommended settings, then one setting at a
    time changed from the best so far (kept when it wins).  The first
    codec sweeps; later ones run its winner."""
    remote = storage == "remote"
    key = ("best_gdal", storage)
    W = "windows"

    def one(threads, g):
        return runs.run(W, storage, codec, "rasterio", "%d thr %s" % (
            threads, gdal_setting(g)), dict(
                base, run="windows_rasterio", paths=paths, threads=threads),
            gdal=g)

    if key in a.memo:
        t, g = a.memo[key]
        one(t, g)
        return
    g0 = dict(GDAL_REMOTE) if remote else dict(GDAL_BASE,
                                                GDAL_NUM_THREADS="1",
                                                GDAL_CACHEMAX="256")
    best = None
    for t in (a.rasterio_threads_remote if remote
              else a.rasterio_threads_local):
        r = one(t, g0)
        if "error" not in r and (best is None or
                                 r["items_per_s"] > best[0]["items_per_s"]):
            best = (r, t, g0)
    if best is None:
        return
    changes = [("GDAL_NUM_THREADS", "ALL_CPUS"), ("GDAL_CACHEMAX", "1024")]
    if remote:
        changes += [("GDAL_HTTP_MERGE_CONSECUTIVE_RANGES", "NO"),
                    ("GDAL_HTTP_MULTIPLEX", "NO")]
    for k, v in changes[:a.sweep_depth]:
        g = dict(best[2], **{k: v})
        r = one(best[1], g)
        if "error" not in r and r["items_per_s"] > best[0]["items_per_s"]:
            best = (r, best[1], g)
    a.memo[key] = (best[1], best[2])


def patches(a, runs, data, srv):
    """Workload 2: the LERC_ZSTD scenes with their masks (or those of
    --images-dir)."""
    d = a.images_dir or data["LERC_ZSTD"]
    imgs = sorted(os.path.join(d, "images", f) for f in
                  os.listdir(os.path.join(d, "images")))
    msks = sorted(os.path.join(d, "masks", f) for f in
                  os.listdir(os.path.join(d, "masks")))
    warm_page_cache(imgs + msks)
    P = "patches"
    for storage in a.storages.split(","):
        remote = storage == "remote"

        def url(p):
            return srv.url(os.path.relpath(p, a.data)) if remote else p

        iu, mu = [url(p) for p in imgs], [url(p) for p in msks]
        # TorchGeo's GDAL: what won the rasterio sweep of this storage,
        # but one decode thread per worker process (its parallelism is
        # the workers; ALL_CPUS in each would oversubscribe the cores).
        won = a.memo.get(("best_gdal", storage))
        gdal_tg = dict(won[1] if won else
                       GDAL_REMOTE if remote else GDAL_BASE,
                       GDAL_NUM_THREADS="1")
        workers = a.workers_remote if remote else a.workers_local
        for sampler in a.samplers.split(","):
            base = {"patch": a.patch, "batch": a.batch, "bands": 4,
                    "sampler": sampler, "seconds": a.seconds,
                    "warmup": a.warmup, "log": srv.log if remote else None}
            # Grid runs take the worker count that won the random ones.
            ws = workers if sampler == "random" else [
                a.memo.get(("workers", storage, "torchgeo"), workers[-1])]
            for w in ws:
                runs.run(P, storage, sampler, "torchgeo", "%d workers" % w,
                         dict(base, run="patches_torchgeo", workers=w,
                              images=["/vsicurl/" + u for u in iu]
                              if remote else imgs,
                              masks=["/vsicurl/" + u for u in mu]
                              if remote else msks), gdal=gdal_tg)
            b = runs.best(workload=P, storage=storage, codec=sampler,
                          reader="torchgeo")
            if b and sampler == "random":
                a.memo[("workers", storage, "torchgeo")] = int(
                    b["setting"].split()[0])
            for w in (workers if sampler == "random" else
                      [a.memo.get(("workers", storage, "baseline"),
                                  workers[-1])]):
                runs.run(P, storage, sampler, "paper-style",
                         "%d workers" % w, dict(
                             base, run="patches_baseline", workers=w,
                             images=iu, masks=mu))
            b = runs.best(workload=P, storage=storage, codec=sampler,
                          reader="paper-style")
            if b and sampler == "random":
                a.memo[("workers", storage, "baseline")] = int(
                    b["setting"].split()[0])
            runs.run(P, storage, sampler, "cogfeed", "Loader defaults", dict(
                base, run="patches_cogfeed", images=iu, masks=mu))


def decode(a, data):
    """Workload 3: one file per codec (made once by the venv's GDAL from a
    crop of a synthetic scene), decoded by both."""
    folder = os.path.join(a.data, "codecs-%d" % a.codec_size)
    src = os.path.join(data["DEFLATE"], "images", "scene_000.tif")
    files = child({"run": "decode_files", "source": src,
                   "size": a.codec_size, "folder": folder})
    return child({"run": "decode", "files": files["files"],
                  "threads": os.cpu_count() or 1, "repeat": a.decode_rounds})


def check_model(a):
    """tests/python/test_experiment_models.py in the peers' environment:
    the ResNet-18 UNet trains for real there."""
    tiny = a.images_dir
    if not tiny:
        # synth writes with GDAL's Python bindings: the project's Python.
        tiny = os.path.join(a.data, "model-test")
        if not os.path.isdir(os.path.join(tiny, "masks")):
            peers_data.cli(sys.executable, env_for("project"), "synth", tiny,
                           "--scenes", 2, "--size", 128, "--tile", 128,
                           "--quiet")
    e = env_for("venv", {"CF_MODEL_TEST_DATA": tiny})
    p = subprocess.run([venv_python(), "-m", "pytest", "-q", "-x",
                        "-p", "no:cacheprovider", os.path.join(
                            REPO, "tests", "python",
                            "test_experiment_models.py")],
                       env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    tail = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    log("model check (unet-resnet18 in the peers' venv): %s" % tail)
    if p.returncode:
        sys.stderr.write(p.stdout[-4000:])
    return {"passed": p.returncode == 0, "summary": tail}


# -- the targets ------------------------------------------------------------

def targets(res):
    rows = [r for r in res["rows"] if "error" not in r]

    def best(**m):
        rs = [r for r in rows if all(r.get(k) == v for k, v in m.items())]
        return max(rs, key=lambda r: r["items_per_s"]) if rs else None

    out = []
    for storage, need in (("remote", 5.0), ("local", 3.0)):
        for smp in ("random", "grid"):
            c = best(workload="patches", storage=storage, codec=smp,
                     reader="cogfeed")
            t = best(workload="patches", storage=storage, codec=smp,
                     reader="torchgeo")
            if c and t:
                out.append(("patches/s %s %s: cogfeed / TorchGeo's best"
                            % (storage, smp), c["items_per_s"] /
                            t["items_per_s"], need, ">="))
                out.append(("peak RSS %s %s: cogfeed / that TorchGeo"
                            % (storage, smp), c["peak_rss_mb"] /
                            t["peak_rss_mb"], 0.5, "<="))
    for codec in sorted({r["codec"] for r in rows
                         if r["workload"] == "windows"}):
        # read_many reads the very window list async-tiff reads (the
        # Loader samples its own windows, which may share tiles): the fair
        # pair, so the target is judged on it
        c = best(workload="windows", storage="remote", codec=codec,
                 reader="cogfeed", setting="read_many")
        t = best(workload="windows", storage="remote", codec=codec,
                 reader="async-tiff")
        if c and t:
            out.append(("windows/s remote %s: read_many / async-tiff, "
                        "same list" % codec,
                        c["items_per_s"] / t["items_per_s"], 2.0, ">="))
    for r in (res.get("decode") or {}).get("codecs", []):
        if r["codec"] == "NONE":
            continue    # imagecodecs hands back a view of the bytes
        for k in ("1t", "mt"):
            out.append(("decode %s %s: cogfeed / imagecodecs" % (
                r["codec"], "1 thread" if k == "1t" else "%d threads"
                % r["threads"]), r["ratio_" + k], 1.0, ">="))
    return out


def cpu_model():
    """The CPU's name and the vector extensions the codecs' libraries pick
    at run time: ratios near 1.0 move with them (on a CPU with AVX-512
    VNNI, imagecodecs' libdeflate 1.26 computed Adler-32 twice as fast as
    Debian's 1.14; on the CPU before, the two were closer)."""
    info, flags = {}, set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k in ("model name", "cpu family", "model") \
                        and k not in info:
                    info[k] = v.strip()
                elif k == "flags" and not flags:
                    flags = set(v.split())
    except OSError:
        pass
    # a virtual machine may name it only "Intel(R) Xeon(R) Processor":
    # family and model say which generation
    name = "%s (family %s, model %s)" % (info.get("model name", "?"),
                                         info.get("cpu family", "?"),
                                         info.get("model", "?"))
    keep = [x for x in ("sse4_2", "avx2", "bmi2", "avx512f", "avx512bw",
                        "avx512_vnni", "avx_vnni", "vpclmulqdq") if x in flags]
    return {"model": name, "flags": keep}


def report(res, out=sys.stdout):
    cpu = res.get("cpu")
    if cpu:
        out.write("\nmachine: %s cores, %s (%s)\n" % (
            res.get("cpus"), cpu["model"] or "unknown CPU",
            " ".join(cpu["flags"])))
    out.write("\n" + HEAD + "\n")
    for r in res["rows"]:
        print_row(r, out)
    d = res.get("decode")
    if d:
        out.write("\ndecode, MB/s of decoded pixels (imagecodecs %s, "
                  "tifffile %s):\n" % (d["imagecodecs"], d["tifffile"]))
        out.write("decode_tile = Cog.decode_tile(bytes), like for like with "
                  "imagecodecs (tifffile's page.decode of the same bytes, "
                  "same layout);\nCog.read = the tile's window end to end; "
                  "ic codec = imagecodecs' bare codec function, 1 thread\n")
        out.write("(cpu = the ratio of CPU seconds per GB, imagecodecs / "
                  "cogfeed: less moved by other load than wall time)\n")
        out.write("%-13s %-10s %9s %9s %6s %9s %9s %6s %6s %6s %9s %9s %9s "
                  "%s\n" % (
                      "codec", "dtype", "cf 1t", "ic 1t", "ratio", "cf mt",
                      "ic mt", "ratio", "cpu 1t", "cpu mt", "read 1t",
                      "read mt", "ic codec", "exact"))
        for r in d["codecs"]:
            out.write("%-13s %-10s %9.0f %9.0f %6.2f %9.0f %9.0f %6.2f "
                      "%6.2f %6.2f %9.0f %9.0f %9s %s\n"
                      % (r["codec"], "%sx%d" % (r["dtype"], r["bands"]),
                         r["cogfeed_1t"], r["imagecodecs_1t"],
                         r["ratio_1t"], r["cogfeed_mt"],
                         r["imagecodecs_mt"], r["ratio_mt"],
                         r.get("ratio_cpu_1t", 0), r.get("ratio_cpu_mt", 0),
                         r.get("cogfeed_read_1t", 0),
                         r.get("cogfeed_read_mt", 0),
                         "%.0f" % r["imagecodecs_codec_1t"]
                         if "imagecodecs_codec_1t" in r else "-",
                         "yes" if r["bit_exact"] else "NO"))
    dig = {}
    for r in res["rows"]:
        if r.get("digest"):
            dig.setdefault((r["storage"], r["codec"]), set()).add(r["digest"])
    if dig:
        out.write("\nsame pixels from every reader of a set: %s\n" % (
            "yes" if all(len(v) == 1 for v in dig.values()) else
            "NO: %s" % dig))
    out.write("\ntargets:\n")
    for what, got, need, op in targets(res):
        ok = got >= need if op == ">=" else got <= need
        out.write("  %-58s %6.2f (need %s %.2f)  %s\n" % (
            what, got, op, need, "met" if ok else "NOT MET"))
    m = res.get("model_check")
    if m:
        out.write("\nunet-resnet18 in the peers' environment: %s (%s)\n" % (
            "trains" if m["passed"] else "FAILED", m["summary"]))


# -- main -------------------------------------------------------------------

def ints(s):
    return [int(x) for x in s.split(",") if x]


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=os.path.join(REPO, "build", "bench-data",
                                                  "peers"))
    p.add_argument("--workloads", default="windows,patches,decode,model")
    p.add_argument("--codecs", default="LERC_ZSTD,DEFLATE",
                   help="window workload codecs")
    p.add_argument("--latency-ms", type=float, default=164.0)
    p.add_argument("--quick", action="store_true",
                   help="small data and short runs: does everything run?")
    p.add_argument("--python", default="python3.12",
                   help="interpreter the peers' venv is made with")
    p.add_argument("--here", action="store_true",
                   help="the peers are installed in this interpreter, "
                        "cogfeed on PYTHONPATH: no venv, no build-peers "
                        "(bench/gpu/run.sh, on a machine without pip's "
                        "index)")
    p.add_argument("--images-dir",
                   help="patches workload: this dataset folder (images/, "
                        "masks/) instead of the generated scenes; only the "
                        "patches and model workloads")
    p.add_argument("--storages", default="local,remote",
                   help="patches workload: local, remote or both")
    p.add_argument("--samplers", default="random,grid",
                   help="patches workload: random, grid or both (grid "
                        "alone runs TorchGeo and the baseline with the "
                        "most workers)")
    p.add_argument("--setup", action="store_true",
                   help="make the venv, the build and the data, run nothing")
    p.add_argument("--json", help="write every result here")
    p.add_argument("--markdown", metavar="JSON",
                   help="print the tables of a saved --json, run nothing")
    a = p.parse_args(argv)
    if a.markdown:
        with open(a.markdown) as f:
            report(json.load(f))
        return 0
    # Sizes: the full run, or --quick.
    q = a.quick
    a.scenes, a.size, a.unique = (8, 2048, 2) if q else (32, 4096, 4)
    a.windows = 12 if q else 256       # warm windows per run
    a.batch = 4 if q else 16
    a.seed = 1
    a.async_conc = [64] if q else [16, 64, 256]
    a.rasterio_threads_remote = [16] if q else [16, 32, 64]
    a.rasterio_threads_local = [2] if q else [2, 4]
    a.sweep_depth = 1 if q else 4
    a.tifffile_threads = [2] if q else [2, 4]
    # DataLoader workers: 1 and 2 per core locally, 4 and 8 per core
    # remotely (each waits 164 ms per request) and never fewer than 16
    # and 32 there (the counts TorchGeo users run against object stores),
    # at most 64 (each holds its own torch and GDAL: 16 on 2 cores took
    # 6 GB).
    c = os.cpu_count() or 1
    a.workers_local = [2] if q else sorted({c, 2 * c})
    a.workers_remote = [4] if q else sorted({min(64, max(16, 4 * c)),
                                             min(64, max(32, 8 * c))})
    a.patch = 256
    a.seconds = 3.0 if q else 15.0
    a.warmup = 2 if q else 8
    a.codec_size = 1024 if q else 4096
    a.repeat = 1 if q else 3
    # decode rounds are short (a few seconds): on a shared machine the best
    # of 3 moved ratios near 1.0 by up to 0.2 between runs minutes apart
    a.decode_rounds = 1 if q else 7
    a.memo = {}
    if q:
        a.data = os.path.join(a.data, "quick")
    work = a.workloads.split(",")
    if a.here:
        HERE_ONLY.append(True)
    else:
        ensure_venv(a.python)
        ensure_build()
    if a.images_dir:
        a.images_dir = os.path.abspath(a.images_dir)
        if set(work) - {"patches", "model"}:
            p.error("--images-dir: only the patches and model workloads")
        a.data = a.images_dir
        data = {}
    else:
        os.makedirs(a.data, exist_ok=True)
        data = peers_data.make(a.data, sys.executable, env_for("project"),
                               a.scenes, a.unique, a.size)
    if a.setup:
        return 0
    res = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "load_before": os.getloadavg()[0], "cpus": os.cpu_count(),
           "cpu": cpu_model(),
           "latency_ms": a.latency_ms, "quick": q, "rows": [],
           "versions": versions()}
    runs = Runs()
    print(HEAD)
    with serve(a.data, a.latency_ms) as srv:
        if "windows" in work:
            windows(a, runs, data, srv)
        if "patches" in work:
            patches(a, runs, data, srv)
    res["rows"] = runs.rows
    if "decode" in work:
        res["decode"] = decode(a, data)
    if "model" in work:
        res["model_check"] = check_model(a)
    res["load_after"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    report(res)
    return 0


def versions():
    """The peers' versions (None: not installed), GDAL's and Python's, as
    the peers' interpreter sees them."""
    code = r"""
import json, sys, importlib.metadata as m
v = {}
for p in ("torchgeo", "async-tiff", "rasterio", "tifffile", "imagecodecs",
          "torch", "numpy", "segmentation-models-pytorch"):
    try:
        v[p] = m.version(p)
    except m.PackageNotFoundError:
        v[p] = None
try:
    import rasterio
    v["gdal (rasterio's)"] = rasterio.__gdal_version__
except ImportError:
    pass
v["python"] = sys.version.split()[0]
print(json.dumps(v))
"""
    return json.loads(subprocess.run([venv_python(), "-c", code],
                                     stdout=subprocess.PIPE, check=True,
                                     universal_newlines=True).stdout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Whole-scene inference: cogfeed.predict against the by-hand way, side by
side in one run, locally and to S3 (moto), with time, peak RSS, peak local
disk and whether the outputs are identical (issue 29, "Whole-scene
inference").

    PYTHONPATH=build/python nice -n 5 .venv/bin/python bench/inference_bench.py \
        [--sizes 8192,16384x4096,16384] [--skip-byhand] [--out-dir DIR] \
        [--cache-variant BYTES] [--f64-check SIZE] [--model ramp] [--json OUT]

Sizes: N (N x N) or WxH.  The default's three sizes grow the region 4x
twice: 8192 -> 16384 both ways (the width doubles) and 16384x4096 ->
16384 at the same width (only the height grows).  Input (made for each
size in the run's folder, then removed): a 3-band uint8 COG, 512 px
tiles, DEFLATE, overviews, smooth fields plus noise, written tile row by
tile row with cogfeed.Writer.

Model: identity-ish and cheap, so that the run measures reading, blending
and writing, not the model.  --model ramp (default): the input's 3 bands
as 3 class scores, band 0 as is, band 1 times a ramp 0.85..1.15 across
the patch's columns, band 2 times the same ramp down its rows: overlapping
patches then disagree near class boundaries and the blend weights decide
the class, so "output identical" checks the blend, not only the argmax.
--model identity: the input itself (every patch agrees; the blend cannot
change a class).

The ways, each in a process of its own (peak RSS = that process's VmHWM;
peak disk = the allocated size of the files under the run's own folder,
which is also its cwd, TMPDIR and CPL_TMPDIR, sampled every 0.1 s by a
thread, with VmRSS every 0.5 s as a series in the JSON; write_bytes =
/proc/self/io's, the bytes the process sent toward the disk):

  cogfeed, local  cogfeed.predict(model, src, "out.tif", patch_size=512,
                  overlap=64, blend="hann", batch_size=8,
                  output="classes", progress=False)
  cogfeed, S3     the same with out="s3://bench/<key>" on moto's server
                  (tests/servers/moto_server.py: 127.0.0.1, SigV4)
  cogfeed, local, cache_bytes=  the local run again with the Loader's
                  decoded-tile cache set (--cache-variant, default 128
                  MiB; predict's default is the input tile rows two
                  patch rows share, at least 64 MiB)
  by hand         rasterio reads each window of cogfeed.grid_windows (the
                  same windows), the model runs in batches of 8, the
                  Hann-weighted scores go into a float32 numpy accumulator
                  (K, H, W) and a weight array (H, W), then
                  (acc / weight).argmax(0) -> uint8 and a rasterio COG
                  write (DEFLATE, the same predictor as cogfeed's output,
                  512 px blocks, OVERVIEW_RESAMPLING=MODE,
                  NUM_THREADS=ALL_CPUS); for S3 that file is then uploaded
                  with boto3's upload_file (its default multipart transfer)
                  in the same process: the S3 figure is the local run plus
                  its upload.

Afterwards: the S3 objects are downloaded (outside the timings) and
compared byte for byte with the local files of the same way, and the two
ways' full-resolution bands pixel for pixel (and the overviews, for
information).  At --f64-check's size the by-hand way runs once more,
untimed, with a float64 accumulator (cogfeed's stitcher sums in double),
to tell float32 rounding on near-ties from a different blend.  The
stitcher's memory bound (docs/inference.md, "Memory"; docs/writer.md,
"Writing to object storage") is worked out for each size from the
windows' order and the Loader's memory budget, and set against the
measured peak RSS.

States: the input was just written by this run, so its pages are in the
page cache (warm); each way runs once, in a fresh process (the readers'
caches cold).  Moto keeps objects in its own process's memory: not
counted in any way's RSS.
"""

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
P, O, B, K, T = 512, 64, 8, 3, 512     # patch, overlap, batch, classes, tile
BUCKET = "bench"


# ------------------------------------------------------------------ data

def parse_size(s):
    s = s.strip().lower()
    if "x" in s:
        w, h = s.split("x")
        return int(w), int(h)
    return int(s), int(s)


def make_input(path, width, height, seed=0):
    """3 bands uint8: smooth fields (a different period per band) plus
    noise, written one row of 512 px tiles at a time."""
    import cogfeed
    rng = np.random.default_rng(seed)
    grid = cogfeed.Grid("EPSG:32633", transform=(10.0, 0.0, 300000.0,
                                                  0.0, -10.0, 5000000.0),
                        width=width, height=height)
    xs = np.arange(width, dtype=np.float32)
    with cogfeed.Writer(path, width, height, 3, "uint8", grid=grid,
                        compression="deflate") as w:
        for y0 in range(0, height, T):
            h = min(T, height - y0)
            ys = np.arange(y0, y0 + h, dtype=np.float32)
            rows = np.empty((3, h, width), np.uint8)
            for b in range(3):
                f = (np.sin(ys / (700.0 + 130 * b))[:, None] * np.cos(xs / (900.0 - 110 * b))[None]
                     + 0.5 * np.sin((xs[None] + 1.7 * ys[:, None]) / (260.0 + 50 * b)))
                a = 128 + 70 * f + rng.normal(0, 12, (h, width)).astype(np.float32)
                rows[b] = np.clip(a, 0, 255)
            w.write(rows, 0, y0)


# ----------------------------------------------------------------- model

def make_model(kind):
    import torch
    r = torch.linspace(0.85, 1.15, P)
    gain = torch.ones(K, P, P)
    if kind == "ramp":
        gain[1] = r[None, :]          # across the columns
        gain[2] = r[:, None]          # down the rows

    def model(x):                     # (B, 3, P, P) float32 -> (B, 3, P, P)
        if kind == "identity":
            return x
        return x * gain
    return model


# --------------------------------------------------- one way, in a child

def _du(root):
    """Allocated bytes of the files under root (sparse files count what
    they hold)."""
    n = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            try:
                n += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
            except OSError:
                pass
    return n


class DiskSampler(threading.Thread):
    """Every 0.1 s: the run folder's allocated bytes, and the process's
    resident memory split into anonymous and file-backed pages (their
    sampled peaks; VmHWM is the exact peak of the sum)."""

    def __init__(self, root, every=0.1):
        super().__init__(daemon=True)
        self.root, self.every, self.peak = root, every, 0
        self.rss = {"RssAnon": 0, "RssFile": 0, "RssShmem": 0}
        self.series = []          # (seconds, VmRSS MB, disk MB) every 0.5 s
        self.stop_ev = threading.Event()

    def run(self):
        t0, n = time.perf_counter(), 0
        while not self.stop_ev.is_set():
            du = _du(self.root)
            self.peak = max(self.peak, du)
            for k in self.rss:
                self.rss[k] = max(self.rss[k], _status(k))
            if n % 5 == 0:
                self.series.append((round(time.perf_counter() - t0, 1),
                                    _status("VmRSS") >> 20, du >> 20))
            n += 1
            self.stop_ev.wait(self.every)

    def stop(self):
        self.stop_ev.set()
        self.join()
        self.peak = max(self.peak, _du(self.root))
        return self.peak


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _io_write_bytes():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    return 0


def byhand(model, src, out):
    """What users write today: a whole-scene numpy accumulator, then a
    rasterio COG write.  Returns the phases' seconds."""
    import rasterio
    import torch
    from rasterio.windows import Window
    import cogfeed

    t = {"read": 0.0, "model": 0.0, "blend": 0.0}
    with rasterio.open(src) as ds:
        W, H, crs, tr = ds.width, ds.height, ds.crs, ds.transform
        acc = np.zeros((K, H, W), ACC)
        wsum = np.zeros((H, W), ACC)
        w1 = np.sin(np.pi * (np.arange(P) + 0.5) / P) ** 2
        w2 = np.outer(w1, w1).astype(ACC)                 # Hann, as cogfeed's
        wins = cogfeed.grid_windows(W, H, P, O)
        with torch.no_grad():
            for i in range(0, len(wins), B):
                chunk = wins[i:i + B]
                t0 = time.perf_counter()
                x = np.stack([ds.read(window=Window(*w)) for w in chunk]).astype(np.float32)
                t1 = time.perf_counter()
                y = model(torch.from_numpy(x)).numpy()
                t2 = time.perf_counter()
                for (px, py, pw, ph), p in zip(chunk, y):
                    acc[:, py:py + ph, px:px + pw] += p * w2
                    wsum[py:py + ph, px:px + pw] += w2
                t3 = time.perf_counter()
                t["read"] += t1 - t0
                t["model"] += t2 - t1
                t["blend"] += t3 - t2
    t0 = time.perf_counter()
    classes = (acc / wsum).argmax(0).astype(np.uint8)
    del acc, wsum
    t1 = time.perf_counter()
    t["argmax"] = t1 - t0
    with rasterio.open(out, "w", driver="COG", width=W, height=H, count=1,
                       dtype="uint8", crs=crs, transform=tr, nodata=255,
                       compress="DEFLATE", predictor=PREDICTOR, blocksize=T,
                       overview_resampling="MODE", num_threads="ALL_CPUS") as dst:
        dst.write(classes, 1)
    t["write"] = time.perf_counter() - t1
    return t


PREDICTOR = 2   # set from cogfeed's output by the parent (--predictor)
ACC = np.float32  # the accumulator's type (--acc-dtype, a check only)


def child(args):
    global PREDICTOR, ACC
    PREDICTOR = args.predictor
    ACC = np.dtype(args.acc_dtype).type
    import torch
    import cogfeed
    torch.set_num_threads(os.cpu_count() or 1)
    run_dir = os.path.abspath(args.run_dir)
    args.src = args.src if "://" in args.src else os.path.abspath(args.src)
    args.out = args.out if "://" in args.out else os.path.abspath(args.out)
    os.chdir(run_dir)
    model = make_model(args.model)
    base_rss = _status("VmRSS")
    wb0 = _io_write_bytes()
    ds = DiskSampler(run_dir)
    ds.start()
    res = {"way": args.child, "base_rss": base_rss}
    t0 = time.perf_counter()
    if args.child in ("cogfeed-local", "cogfeed-s3"):
        kw = {} if args.cache_bytes is None else {"cache_bytes": args.cache_bytes}
        cogfeed.predict(model, args.src, args.out, patch_size=P, overlap=O,
                        blend="hann", batch_size=B, output="classes",
                        progress=False, **kw)
        res["seconds"] = time.perf_counter() - t0
    else:
        res["phases"] = byhand(model, args.src, args.out)
        res["seconds"] = time.perf_counter() - t0
        res["local_bytes"] = os.path.getsize(args.out)
        if args.upload:
            import boto3
            s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                              region_name=os.environ.get("AWS_REGION", "us-east-1"))
            t1 = time.perf_counter()
            s3.upload_file(args.out, BUCKET, args.upload)
            res["upload_seconds"] = time.perf_counter() - t1
    res["peak_disk"] = ds.stop()
    res["sampled_peaks"] = ds.rss
    res["series_s_rss_mib_disk_mib"] = ds.series
    res["peak_rss"] = _status("VmHWM")
    res["write_bytes"] = _io_write_bytes() - wb0
    res["maxrss_rusage"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if args.child.startswith("cogfeed"):
        # The loader's own memory budget, from a Loader built as predict's
        # (after the peak was read).
        if "cache_bytes" not in kw:  # predict's default (predict.py)
            with cogfeed.open(args.src) as c:
                th = c.tile_height if c.tiled else 256
                per = (-(-P // th) + 1) * th * c.width * c.count * np.dtype(c.dtype).itemsize
            kw = dict(kw, cache_bytes=max(per, 64 << 20))
        ld = cogfeed.Loader([args.src], patch_size=P, sampler="grid", stride=P - O,
                            batch_size=B, dtype="float32", **kw)
        st = ld.stats()
        lay = ld.layout
        res["loader_memory_budget"] = int(st["memory_budget"])
        res["loader_layout"] = {k: v for k, v in dict(lay).items()
                                if isinstance(v, (int, float, str))}
        ld.close()
    print("RESULT " + json.dumps(res), flush=True)


# ---------------------------------------------------------------- parent

def stitcher_rows_open(width, height):
    """The most rows of output tiles the stitcher holds at once when the
    patches come in grid order (each row opens at its first patch and is
    freed at its last)."""
    import cogfeed
    wins = cogfeed.grid_windows(width, height, P, O)
    ntr = -(-height // T)
    left = [0] * ntr
    for (_, y, _, h) in wins:
        for r in range(y // T, (y + h - 1) // T + 1):
            left[r] += 1
    opened, peak = set(), 0
    for (_, y, _, h) in wins:
        for r in range(y // T, (y + h - 1) // T + 1):
            opened.add(r)
        peak = max(peak, len(opened))
        for r in range(y // T, (y + h - 1) // T + 1):
            left[r] -= 1
            if left[r] == 0:
                opened.discard(r)
    return peak, len(wins)


def levels(width, height):
    n, w, h = 1, width, height
    while w > T or h > T:
        w, h, n = (w + 1) // 2, (h + 1) // 2, n + 1
    return n


def bound(width, height, loader_budget, s3):
    """Peak RSS above the process's baseline that predict may reach, from
    docs/inference.md ("Memory") and docs/writer.md ("Writing to object
    storage")."""
    rows, _ = stitcher_rows_open(width, height)
    terms = {
        "stitcher_rows": rows,
        "stitcher": rows * (K + 1) * T * width * 8,
        "loader": loader_budget,
        # 2 batches waiting for the blend + the one being blended + the
        # model's output being made
        "predictions": 4 * B * K * P * P * 4,
        # glibc keeps freed blocks below its dynamic mmap threshold (up to
        # 32 MiB): the batch-sized arrays made and dropped per batch (the
        # batch, its tensor, the predictions) may stay resident; 8 of them
        # (docs/performance.md: with MALLOC_MMAP_THRESHOLD_ set the peaks
        # fall by 264-414 MB)
        "allocator": 8 * B * K * P * P * 4,
        "writer": 0,
    }
    if s3:
        part = 8 << 20
        # per level a part waiting and a part filling, 8 parts queued or
        # being sent, one row of full-resolution tiles decoded
        terms["writer"] = levels(width, height) * 2 * part + 8 * part + T * width
    else:
        terms["writer"] = T * width           # one tile row of classes
    terms["total"] = sum(v for k, v in terms.items() if k != "stitcher_rows")
    return terms


def run_child(way, src, out, run_dir, env, args, predictor, upload=None,
              cache_bytes=None, acc_dtype=None):
    os.makedirs(run_dir, exist_ok=True)
    cmd = [sys.executable, os.path.abspath(__file__),
           "--child", way, "--src", src, "--out", out, "--run-dir", run_dir,
           "--model", args.model, "--predictor", str(predictor)]
    if upload:
        cmd += ["--upload", upload]
    if cache_bytes is not None:
        cmd += ["--cache-bytes", str(cache_bytes)]
    if acc_dtype is not None:
        cmd += ["--acc-dtype", acc_dtype]
    e = dict(os.environ, TMPDIR=run_dir, CPL_TMPDIR=run_dir, **env)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=e, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (way, r.returncode, r.stderr[-4000:]))
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    res = json.loads(line[7:])
    res["process_seconds"] = wall
    res["loadavg_before_after"] = [list(load0), list(os.getloadavg())]
    res["cache_bytes"] = cache_bytes
    return res


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 22), b""):
            h.update(b)
    return h.hexdigest()


def compare(a, b):
    """Differing pixels of the full resolution and of each overview."""
    import rasterio
    from rasterio.windows import Window
    out = {}
    with rasterio.open(a) as fa, rasterio.open(b) as fb:
        out["overviews"] = [fa.overviews(1), fb.overviews(1)]
        out["profiles"] = {k: [str(fa.profile.get(k)), str(fb.profile.get(k))]
                           for k in ("dtype", "nodata", "compress", "predictor",
                                     "blockxsize", "crs")}
        out["transform_equal"] = fa.transform == fb.transform
        W, H = fa.width, fa.height
        diff = 0
        for y in range(0, H, 2048):
            h = min(2048, H - y)
            diff += int(np.count_nonzero(fa.read(1, window=Window(0, y, W, h))
                                         != fb.read(1, window=Window(0, y, W, h))))
        out["pixels"] = W * H
        out["differing"] = diff
        ov = []
        for f in out["overviews"][0]:
            if f not in out["overviews"][1]:
                break
            oh, ow = -(-H // f), -(-W // f)
            ra = fa.read(1, out_shape=(oh, ow))
            rb = fb.read(1, out_shape=(oh, ow))
            if ra.shape == rb.shape:
                ov.append({"factor": f, "pixels": int(ra.size),
                           "differing": int(np.count_nonzero(ra != rb))})
        out["overview_diffs"] = ov
    return out


def s3_get(s3, key, path):
    s3.download_file(BUCKET, key, path)
    return path


def mb(n):
    return n / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default=None, help="one size: N or WxH")
    ap.add_argument("--sizes", default="8192,16384x4096,16384",
                    help="sizes, comma-separated (N or WxH): 8192 -> 16384 is "
                         "the region grown 4x both ways, 16384x4096 -> 16384 "
                         "4x at the same width")
    ap.add_argument("--byhand-sizes", default=None,
                    help="sizes the by-hand way runs at (default: all of --sizes)")
    ap.add_argument("--skip-byhand", action="store_true")
    ap.add_argument("--model", default="ramp", choices=("ramp", "identity"))
    ap.add_argument("--out-dir", default=None,
                    help="where inputs and outputs go (default: a temporary "
                         "folder, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep --out-dir's files")
    ap.add_argument("--json", default=None)
    # child mode
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--run-dir", help=argparse.SUPPRESS)
    ap.add_argument("--upload", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--predictor", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--acc-dtype", default="float32", help=argparse.SUPPRESS)
    ap.add_argument("--cache-bytes", type=int, default=None,
                    help="predict's cache_bytes= (the Loader's decoded tiles "
                         "kept; default: cogfeed's, 5%% of RAM)")
    ap.add_argument("--f64-check", default="8192",
                    help="at this size (N or WxH; 'none': never) also run the "
                         "by-hand way with a float64 accumulator, untimed, to "
                         "tell float32 rounding from a different blend")
    ap.add_argument("--cache-variant", type=int, default=128 << 20,
                    help="also run cogfeed locally with this cache_bytes= "
                         "(default 128 MiB; -1: don't)")
    args = ap.parse_args()
    if args.child:
        return child(args)

    sys.path.insert(0, os.path.join(ROOT, "tests", "servers"))
    from moto_server import Moto
    import boto3
    import cogfeed
    import rasterio

    sizes = [parse_size(s) for s in (args.size or args.sizes).split(",")]
    bh_sizes = (sizes if args.byhand_sizes is None
                else [parse_size(s) for s in args.byhand_sizes.split(",")])
    if args.skip_byhand:
        bh_sizes = []
    tmp = args.out_dir or tempfile.mkdtemp(prefix="inference_bench_")
    os.makedirs(tmp, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    results = {"started": started, "model": args.model,
               "patch_size": P, "overlap": O, "batch_size": B, "blend": "hann",
               "classes": K, "python": platform.python_version(),
               "rasterio": rasterio.__version__, "gdal": rasterio.__gdal_version__,
               "cpus": os.cpu_count(), "argv": sys.argv[1:], "sizes": []}
    try:
        with open("/proc/cpuinfo") as f:
            results["cpu_model"] = next(ln.split(":", 1)[1].strip() for ln in f
                                        if ln.startswith("model name"))
        results["mem_total_gb"] = round(os.sysconf("SC_PAGE_SIZE") *
                                        os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (OSError, StopIteration, ValueError):
        pass
    try:
        import torch
        results["torch"] = torch.__version__
    except ImportError:
        pass
    try:
        results["head_at_run"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                           capture_output=True, text=True).stdout.strip()
    except OSError:
        pass

    with Moto() as m:
        kid, secret = m.setup(BUCKET, {})
        env = m.env(kid, secret)
        s3 = boto3.client("s3", endpoint_url=m.endpoint, region_name=m.region,
                          aws_access_key_id=kid, aws_secret_access_key=secret)
        for (W, H) in sizes:
            tag = "%dx%d" % (W, H)
            d = os.path.join(tmp, tag)
            os.makedirs(d, exist_ok=True)
            src = os.path.join(d, "input.tif")
            t0 = time.perf_counter()
            make_input(src, W, H)
            rec = {"size": tag, "width": W, "height": H,
                   "input_bytes": os.path.getsize(src),
                   "input_seconds": time.perf_counter() - t0,
                   "patches": len(cogfeed.grid_windows(W, H, P, O))}
            print("[%s] input %.0f MB in %.1f s, %d patches" % (
                tag, mb(rec["input_bytes"]), rec["input_seconds"], rec["patches"]),
                flush=True)

            # cogfeed, local
            rd = os.path.join(d, "cogfeed-local")
            out_cf = os.path.join(rd, "out.tif")
            r = run_child("cogfeed-local", src, out_cf, rd, {}, args, 2,
                          cache_bytes=args.cache_bytes)
            r["output_bytes"] = os.path.getsize(out_cf)
            rec["cogfeed_local"] = r
            print("[%s] cogfeed local: %.1f s, %.0f MB RSS, %.0f MB disk" % (
                tag, r["seconds"], mb(r["peak_rss"]), mb(r["peak_disk"])), flush=True)
            with rasterio.open(out_cf) as f:
                predictor = int(f.tags(ns="IMAGE_STRUCTURE").get("PREDICTOR", 1))
            rec["output_predictor"] = predictor

            # cogfeed, S3
            rd = os.path.join(d, "cogfeed-s3")
            key_cf = "%s/cogfeed.tif" % tag
            r = run_child("cogfeed-s3", src, "s3://%s/%s" % (BUCKET, key_cf), rd, env,
                          args, predictor, cache_bytes=args.cache_bytes)
            got = s3_get(s3, key_cf, os.path.join(d, "cogfeed-s3.tif"))
            r["output_bytes"] = os.path.getsize(got)
            r["same_bytes_as_local"] = sha256_file(got) == sha256_file(out_cf)
            os.remove(got)
            s3.delete_object(Bucket=BUCKET, Key=key_cf)
            rec["cogfeed_s3"] = r
            print("[%s] cogfeed S3: %.1f s, %.0f MB RSS, %.0f MB disk, same bytes as local: %s" % (
                tag, r["seconds"], mb(r["peak_rss"]), mb(r["peak_disk"]),
                r["same_bytes_as_local"]), flush=True)

            rec["bound_local"] = bound(W, H, rec["cogfeed_local"]["loader_memory_budget"], False)
            rec["bound_s3"] = bound(W, H, rec["cogfeed_s3"]["loader_memory_budget"], True)

            # cogfeed, local, the Loader's tile cache set (RSS against rows)
            if args.cache_variant >= 0:
                rd = os.path.join(d, "cogfeed-local-cache")
                out_cc = os.path.join(rd, "out.tif")
                r = run_child("cogfeed-local", src, out_cc, rd, {}, args, predictor,
                              cache_bytes=args.cache_variant)
                r["output_bytes"] = os.path.getsize(out_cc)
                r["same_bytes_as_local"] = sha256_file(out_cc) == sha256_file(out_cf)
                os.remove(out_cc)
                rec["cogfeed_local_cache"] = r
                rec["bound_local_cache"] = bound(W, H, r["loader_memory_budget"], False)
                print("[%s] cogfeed local, cache_bytes=%d: %.1f s, %.0f MB RSS, %.0f MB disk, "
                      "same bytes: %s" % (tag, args.cache_variant, r["seconds"],
                                          mb(r["peak_rss"]), mb(r["peak_disk"]),
                                          r["same_bytes_as_local"]), flush=True)

            if (W, H) in bh_sizes:
                rd = os.path.join(d, "byhand")
                out_bh = os.path.join(rd, "out.tif")
                key_bh = "%s/byhand.tif" % tag
                r = run_child("byhand", src, out_bh, rd, env, args, predictor,
                              upload=key_bh)
                r["output_bytes"] = os.path.getsize(out_bh)
                got = s3_get(s3, key_bh, os.path.join(d, "byhand-s3.tif"))
                r["s3_same_bytes_as_local"] = sha256_file(got) == sha256_file(out_bh)
                os.remove(got)
                s3.delete_object(Bucket=BUCKET, Key=key_bh)
                rec["byhand"] = r
                print("[%s] by hand: %.1f s (+ %.1f s upload), %.0f MB RSS, %.0f MB disk; "
                      "phases %s" % (tag, r["seconds"], r["upload_seconds"], mb(r["peak_rss"]),
                                     mb(r["peak_disk"]),
                                     {k: round(v, 1) for k, v in r["phases"].items()}),
                      flush=True)
                rec["compare"] = compare(out_cf, out_bh)
                print("[%s] differing pixels (full resolution): %d of %d; overviews %s" % (
                    tag, rec["compare"]["differing"], rec["compare"]["pixels"],
                    [(o["factor"], o["differing"]) for o in rec["compare"]["overview_diffs"]]),
                    flush=True)
                os.remove(out_bh)
                if args.f64_check != "none" and parse_size(args.f64_check) == (W, H):
                    rd = os.path.join(d, "byhand-f64")
                    out_64 = os.path.join(rd, "out.tif")
                    r = run_child("byhand", src, out_64, rd, {}, args, predictor,
                                  acc_dtype="float64")
                    rec["byhand_f64"] = {k: r[k] for k in ("seconds", "peak_rss", "phases")}
                    rec["compare_f64"] = compare(out_cf, out_64)
                    os.remove(out_64)
                    print("[%s] by hand with a float64 accumulator (untimed check): %d "
                          "pixels differ from cogfeed's" % (tag, rec["compare_f64"]["differing"]),
                          flush=True)
            results["sizes"].append(rec)
            if not args.keep:
                shutil.rmtree(d, ignore_errors=True)
    results["ended"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    if not args.out_dir and not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    report(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")


def report(results):
    print()
    print("| size | way | time s | peak RSS MB | RSS bound MB | peak disk MB | "
          "write_bytes MB | output MB | time ratio by hand / cogfeed | RSS ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rec in results["sizes"]:
        cl, cs, bh = rec["cogfeed_local"], rec["cogfeed_s3"], rec.get("byhand")
        bl = cl["base_rss"] + rec["bound_local"]["total"]
        bs = cs["base_rss"] + rec["bound_s3"]["total"]
        rows = [("cogfeed, local", cl, cl["seconds"], "%.0f" % mb(bl), None),
                ("cogfeed, S3", cs, cs["seconds"], "%.0f" % mb(bs), None)]
        cc = rec.get("cogfeed_local_cache")
        if cc:
            rows.append(("cogfeed, local, cache_bytes=%d MiB" % (cc["cache_bytes"] >> 20), cc,
                         cc["seconds"], "%.0f" % mb(cc["base_rss"] +
                                                    rec["bound_local_cache"]["total"]), None))
        if bh:
            rows += [("by hand, local", bh, bh["seconds"], "-", cl),
                     ("by hand, S3", bh, bh["seconds"] + bh["upload_seconds"], "-", cs)]
        for name, r, secs, bnd, ref in rows:
            ratio = rratio = "-"
            if ref is not None:
                ratio = "%.2fx" % (secs / ref["seconds"])
                rratio = "%.1fx" % (r["peak_rss"] / ref["peak_rss"])
            print("| %s | %s | %.1f | %.0f | %s | %.0f | %.0f | %.1f | %s | %s |" % (
                rec["size"], name, secs, mb(r["peak_rss"]), bnd, mb(r["peak_disk"]),
                mb(r["write_bytes"]), mb(r.get("output_bytes", 0)), ratio, rratio))
        if "compare" in rec:
            c = rec["compare"]
            print("  %s: %d of %d pixels differ at full resolution; overviews %s" % (
                rec["size"], c["differing"], c["pixels"],
                [(o["factor"], o["differing"]) for o in c["overview_diffs"]]))
        if "compare_f64" in rec:
            print("  %s: with a float64 accumulator by hand, %d pixels differ" % (
                rec["size"], rec["compare_f64"]["differing"]))


if __name__ == "__main__":
    main()

"""Where the CPU goes when cogfeed's loader reads over the nginx link, and
what the link itself costs: the floor under issue 4's remote / local
target on a machine whose server shares the loader's cores.

Two measurements, one after the other, on the same files:

1. --pairs times: `cogfeed bench` of the Loader (blocked 512 px, batch 16,
   defaults) reading remotely (nginx, --latency-ms) and then locally.
   Inside each run's measured window (--window seconds, once its reader
   threads exist and --settle seconds have passed) it samples
   /proc/<pid>/task/<tid>/stat of every thread and /proc/stat, and splits
   the CPU into: the readers (cf-reader: decode, paste), the io thread
   (cf-io) in user space (libcurl and cogfeed's code) and in the kernel
   (receive copy, TCP), nginx, and softirq time, each in CPU s per GB
   delivered (scaled with the run's own readers' s/GB from its JSON).
   "floor" = io kernel + nginx + softirq: what the link costs whatever the
   client.

2. curl's own tool (`curl -Z`, --curl-parallel transfers) fetching the
   same tiles (random ones, as the blocked sampler reads them) from the
   same nginx into /dev/null for --seconds: the whole machine's CPU
   (/proc/stat) per GB, per compressed GB and per decoded GB of the
   dataset: a reference client that decodes nothing.

  PYTHONPATH=BUILD/python .venv/bin/python bench/remote_cpu.py \
      [--data DIR] [--pairs 3] [--latency-ms 164]

DIR as bench/loader_bench.py --targets uses it (DIR/lerc_zstd_512 with
images/ and masks/); without --data the same files are made in a
temporary folder.  Needs rasterio (GDAL's tile offsets; in .venv after
./run.sh build) and curl.
"""

import argparse
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from cogfeed.tools import common

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from loader_bench import bench_command, targets_lerc_data  # noqa: E402


def sample(pid):
    """(user, system) seconds of every thread of process pid by kind, of
    the nginx processes below it (the server `cogfeed bench` started), and
    the machine's ticks."""
    out = {"machine": common.machine_ticks()}
    for name, us in common.cpu_by_thread([pid], split=True).items():
        k = name if name in ("cf-reader", "cf-io") else "other"
        u, s = out.get(k, (0.0, 0.0))
        out[k] = (u + us[0], s + us[1])
    below = common.descendants(pid)[1:]
    out["nginx"] = common.cpu_by_thread(below, split=True).get("nginx",
                                                               (0.0, 0.0))
    return out


def split_run(data, latency_ms, settle, window, seconds):
    """One `cogfeed bench` child, sampled inside its measured window."""
    cmd = bench_command(data, "cogfeed", {"patch_size": 512,
                                          "batch_size": 16,
                                          "sampler": "blocked", "seed": 0},
                        seconds, 24, latency_ms)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, universal_newlines=True)
    while "cf-reader" not in common.cpu_by_thread([p.pid]):
        if p.poll() is not None:
            raise RuntimeError("%s failed" % " ".join(cmd))
        time.sleep(0.1)
    time.sleep(settle)
    a = sample(p.pid)
    time.sleep(window)
    b = sample(p.pid)
    out, _ = p.communicate()
    if p.returncode != 0 or "cf-reader" not in b:
        raise RuntimeError("cogfeed bench ended inside the window; raise "
                           "--seconds")
    r = json.loads(out)

    def dt(k, i):
        return b.get(k, (0, 0))[i] - a.get(k, (0, 0))[i]

    readers = dt("cf-reader", 0) + dt("cf-reader", 1)
    per = r["cpu_s_per_gb_by_thread"]["cf-reader"] / readers  # s/GB per s
    busy, total, softirq = (y - x for x, y in zip(a["machine"], b["machine"]))
    hz = os.sysconf("SC_CLK_TCK")
    res = {
        "mb_per_s": r["mb_per_s"],
        "readers": readers * per,
        "io_user": dt("cf-io", 0) * per,
        "io_kernel": dt("cf-io", 1) * per,
        "nginx": (dt("nginx", 0) + dt("nginx", 1)) * per,
        "softirq": softirq / hz * per,
        "idle_cores": os.cpu_count() * (1 - busy / total),
    }
    res["floor"] = res["io_kernel"] + res["nginx"] + res["softirq"]
    return res


def tiles_of(data):
    """(path, offset, length) of every tile, and decoded bytes."""
    import numpy as np
    import rasterio
    tiles, decoded = [], 0
    for f in sorted(glob.glob(os.path.join(data, "*", "*.tif"))):
        with rasterio.open(f) as ds:
            by, bx = ds.block_shapes[0]
            pixel = ds.tags(ns="IMAGE_STRUCTURE").get("INTERLEAVE") == "PIXEL"
            per = bx * by * np.dtype(ds.dtypes[0]).itemsize
            per *= ds.count if pixel else 1
            for bi in ([1] if pixel else range(1, ds.count + 1)):
                for ty in range((ds.height + by - 1) // by):
                    for tx in range((ds.width + bx - 1) // bx):
                        key = "%d_%d" % (tx, ty)
                        off = int(ds.get_tag_item("BLOCK_OFFSET_" + key, "TIFF", bidx=bi))
                        n = int(ds.get_tag_item("BLOCK_SIZE_" + key, "TIFF", bidx=bi))
                        tiles.append((f, off, n))
                        decoded += per
    return tiles, decoded


def curl_run(data, latency_ms, seconds, parallel):
    tiles, decoded = tiles_of(data)
    compressed = sum(t[2] for t in tiles)
    rnd = random.Random(0)
    # The server `cogfeed bench --serve-latency-ms` runs (common.served).
    paths = sorted({t[0] for t in tiles})
    with common.served(paths, latency_ms) as (srv, url), \
            tempfile.NamedTemporaryFile("w", suffix=".curl") as cfg:
        # One group per transfer: `next` resets the per-URL options.
        for _ in range(max(1000, int(seconds * 2000))):
            path, off, n = rnd.choice(tiles)
            cfg.write('write-out = "%%{size_download}\\n"\nrange = "%d-%d"\n'
                      'output = "/dev/null"\nurl = "%s"\nnext\n'
                      % (off, off + n - 1, url(path)))
        cfg.flush()
        p = subprocess.Popen(["curl", "-s", "--no-progress-meter", "-Z",
                              "--parallel-max", str(parallel),
                              "--parallel-immediate", "-K", cfg.name],
                             stdout=subprocess.PIPE, universal_newlines=True)
        got, t0, m0 = 0, time.time(), common.machine_ticks()
        for line in p.stdout:
            got += int(line)
            if time.time() - t0 > seconds:
                break
        t1, m1 = time.time(), common.machine_ticks()
        p.kill()
        p.wait()
    cpu = (m1[0] - m0[0]) / os.sysconf("SC_CLK_TCK")
    gb = got / 1e9
    return {"mb_per_s": got / 1e6 / (t1 - t0), "cores": cpu / (t1 - t0),
            "s_per_compressed_gb": cpu / gb,
            "s_per_decoded_gb": cpu / gb * compressed / decoded,
            "compressed_over_decoded": compressed / decoded}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data",
                    help="a folder with images/ and masks/ (LERC_ZSTD 512), "
                         "or the --data of loader_bench.py --targets that "
                         "holds it (default: made in a temporary folder)")
    ap.add_argument("--latency-ms", type=int, default=164)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=14,
                    help="each cogfeed run's measured seconds")
    ap.add_argument("--settle", type=float, default=4)
    ap.add_argument("--window", type=float, default=6)
    ap.add_argument("--curl-seconds", type=float, default=10)
    ap.add_argument("--curl-parallel", type=int, default=256)
    ap.add_argument("--json", help="write every result here")
    a = ap.parse_args(argv)
    a.data, tmp = targets_lerc_data(a.data, "cf-remote-cpu-")

    rows = []
    cols = ("readers", "io_user", "io_kernel", "nginx", "softirq", "floor")
    print("%-8s %8s %8s %8s %8s %8s %8s %8s %6s" % (
        ("run", "MB/s") + cols + ("idle",)))
    for i in range(a.pairs):
        for where, lat in (("remote", a.latency_ms), ("local", None)):
            r = split_run(a.data, lat, a.settle, a.window, a.seconds)
            r["where"], r["pair"] = where, i + 1
            rows.append(r)
            print("%-8s %8.1f %s %6.2f" % (
                where, r["mb_per_s"],
                " ".join("%8.3f" % r[c] for c in cols), r["idle_cores"]))
    print("(CPU s per GB delivered; floor = io kernel + nginx + softirq; "
          "idle in cores)")
    for i in range(a.pairs):
        rem, loc = rows[2 * i], rows[2 * i + 1]
        print("pair %d: remote / local %.2f; readers remote / local %.2f; "
              "with the readers at local cost and only the floor added: %.2f"
              % (i + 1, rem["mb_per_s"] / loc["mb_per_s"],
                 rem["readers"] / loc["readers"],
                 loc["readers"] / (loc["readers"] + rem["floor"])))
    c = curl_run(a.data, a.latency_ms, a.curl_seconds, a.curl_parallel)
    print("curl -Z, %d transfers: %.0f MB/s compressed, %.2f cores busy: "
          "%.3f CPU s per compressed GB = %.3f per decoded GB (compressed / "
          "decoded %.3f)" % (a.curl_parallel, c["mb_per_s"], c["cores"],
                             c["s_per_compressed_gb"], c["s_per_decoded_gb"],
                             c["compressed_over_decoded"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": rows, "curl": c}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

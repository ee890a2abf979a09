#!/usr/bin/python3
"""cogfeed's loader vs the paper-style baseline, side by side.

For each storage (local files; nginx with --latency-ms first-byte latency)
and each sampler, runs `cogfeed bench` for both loaders with the same patch
size, batch size and seed, and prints throughput, requests, CPU per GB and
peak memory with the cogfeed/baseline ratios.  Makes its own synthetic
dataset when --data is not given.

  PYTHONPATH=BUILD/python /usr/bin/python3 bench/loader_bench.py \
      [--data DIR] [--seconds 8] [--latency-ms 164] [--samplers random,blocked]

--json FILE writes every run's full result.
"""

import argparse
import json
import os
import sys
import tempfile

from cogfeed.tools import bench, common, convert, synth


def dataset(tmp, compress, tile):
    raw = os.path.join(tmp, "raw")
    synth.synth(raw, scenes=4, size=1024, seed=0, progress=False)
    out = os.path.join(tmp, convert.variant_name(compress, tile))
    convert.convert([raw], out, compress, tile, progress=False)
    return out


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="dataset folder (images/, masks/)")
    p.add_argument("--compress", default="lerc_zstd")
    p.add_argument("--tile", type=int, default=512)
    p.add_argument("--patch-size", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--samplers", default="random,blocked")
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--latency-ms", type=int, default=164,
                   help="remote latency; -1 to skip the remote runs")
    p.add_argument("--baseline-workers", type=int, default=4)
    p.add_argument("--json", help="write all results here")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cf-loader-bench-") as tmp:
        data = a.data or dataset(tmp, a.compress, a.tile)
        imgs, msks = common.resolve(data)
        results = []
        storages = [None] + ([a.latency_ms] if a.latency_ms >= 0 else [])
        print("%-8s %-14s %-9s %9s %9s %9s %9s" % (
            "storage", "sampler", "loader", "MB/s", "req/s", "CPU s/GB",
            "RSS MB"))
        for lat in storages:
            for smp in a.samplers.split(","):
                row = {}
                for kind in ("baseline", "cogfeed"):
                    s = {"patch_size": a.patch_size,
                         "batch_size": a.batch_size, "sampler": smp,
                         "seed": 0}
                    r = bench.run(imgs, msks, kind, s, seconds=a.seconds,
                                  warmup=1, serve_latency_ms=lat,
                                  baseline_workers=a.baseline_workers)
                    row[kind] = r
                    results.append(r)
                    where = "local" if lat is None else "%dms" % lat
                    print("%-8s %-14s %-9s %9.1f %9s %9s %9.0f" % (
                        where, smp, kind, r["mb_per_s"],
                        "%.0f" % r["requests_per_s"]
                        if r["requests_per_s"] is not None else "n/a",
                        "%.1f" % r["cpu_s_per_gb"]
                        if r["cpu_s_per_gb"] is not None else "n/a",
                        r["peak_rss_mb"]))
                b, c = row["baseline"], row["cogfeed"]
                print("%-8s %-14s %-9s %8.2fx %9s %8.2fx %8.2fx" % (
                    "", "", "ratio", c["mb_per_s"] / max(b["mb_per_s"],
                                                         1e-9), "",
                    (c["cpu_s_per_gb"] or 0) / max(b["cpu_s_per_gb"] or 1e-9,
                                                   1e-9),
                    c["peak_rss_mb"] / max(b["peak_rss_mb"], 1e-9)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

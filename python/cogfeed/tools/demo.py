"""cogfeed demo: the whole story in a few minutes, on a fresh machine.

1. synth      a small labelled Sentinel-2-like dataset (nothing downloaded)
2. convert    a LERC_ZSTD COG variant with 512 px tiles (the paper's remote
              winner)
3. serve      nginx on 127.0.0.1 adding 164 ms before every response's
              first byte (the paper's Azure latency)
4. bench      stream patches with the paper-style default loader (torch
              DataLoader, 4 workers, rasterio per patch) and with cogfeed,
              local and remote: MB/s, requests, CPU, memory
5. train      a small UNet for a short budget per set-up: optimizer steps,
              data-stall fraction, utilisation, IoU (cogfeed experiment;
              base-4 UNet on a CPU so that data, not compute, sets the
              pace)

and prints the comparison, leaving tables and plots in --out.
"""

import argparse
import json
import os
import sys
import time

from . import bench, common, convert, experiment, synth


def _plot(out, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.4))
    names = [r["name"] for r in rows]
    ax.bar(names, [r["mb_per_s"] for r in rows],
           color=["tab:gray" if "baseline" in n else "tab:blue"
                  for n in names])
    ax.set_ylabel("MB/s delivered")
    ax.set_title("Streaming throughput (bench)")
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    p = common.save_fig(fig, out, "bench.png")
    return p


def demo(out, scenes=4, size=1024, seconds=8.0, budget=20.0,
         latency_ms=164, compress="lerc_zstd", tile=512, patch_size=256,
         batch_size=16, baseline_workers=4, train=True, log=sys.stderr):
    t_all = time.perf_counter()
    data = os.path.join(out, "data")
    raw = os.path.join(data, "raw")
    var = os.path.join(data, convert.variant_name(compress, tile))
    log.write("== 1/5 synth: %d scenes of %d px into %s\n" % (scenes, size,
                                                               raw))
    synth.synth(raw, scenes, size, seed=0, progress=False)
    log.write("== 2/5 convert: %s, %d px tiles -> %s\n" % (compress, tile,
                                                            var))
    convert.convert([raw], var, compress, tile, progress=False)
    imgs, msks = common.resolve(var)
    itemsize = common.cog_shape(imgs[0])[3]
    settings = {"patch_size": patch_size, "batch_size": batch_size,
                "sampler": "random", "seed": 0}
    rows = []
    log.write("== 3/5 serve: nginx with %d ms first-byte latency\n"
              % latency_ms)
    log.write("== 4/5 bench: %g s per loader and storage\n" % seconds)
    kw = dict(seconds=seconds, warmup=1, itemsize=itemsize,
              baseline_workers=baseline_workers)
    for kind in ("baseline", "cogfeed"):
        r = bench.run_on(imgs, msks, kind, settings, transport="file", **kw)
        r["name"] = kind + "-local"
        rows.append(r)
        log.write("   %-16s %7.1f MB/s\n" % (r["name"], r["mb_per_s"]))
    with common.served(imgs + msks, latency_ms) as (srv, url):
        for kind in ("baseline", "cogfeed"):
            r = bench.run_on([url(p) for p in imgs], [url(p) for p in msks],
                             kind, settings, transport="http",
                             log=common.access_log(srv),
                             latency_ms=latency_ms, **kw)
            r["name"] = kind + "-remote"
            rows.append(r)
            log.write("   %-16s %7.1f MB/s\n" % (r["name"], r["mb_per_s"]))
    plots = [_plot(out, rows)]
    exp = None
    if train:
        log.write("== 5/5 train: UNet, %g s per set-up\n" % budget)
        import torch
        # On a CPU the base-8 UNet of the full experiment is so slow that
        # the CPU, not the data path, sets the pace; the demo is about the
        # data path, so it trains the narrower base-4 UNet there (the
        # experiment.md "lighter model" set-up).  A GPU gets base 16.
        base = None if torch.cuda.is_available() else 4
        exp = experiment.run(var, os.path.join(out, "experiment"),
                             budget=budget, patch_size=128, batch_size=8,
                             latency_ms=latency_ms,
                             baseline_workers=baseline_workers,
                             samplers=(), snapshots=4, base=base, log=log)
        plots += exp["plots"]
    with open(os.path.join(out, "bench.json"), "w") as f:
        json.dump(rows, f, indent=1, default=str)
    by = {r["name"]: r for r in rows}
    lines = ["", "cogfeed demo: %d scenes, %s %d px tiles, patch %d, batch "
             "%d, remote = nginx +%d ms" % (scenes, compress, tile,
                                              patch_size, batch_size,
                                              latency_ms), "",
             "%-16s %9s %10s %9s %9s %9s" % ("streaming", "MB/s",
                                             "patches/s", "req/s",
                                             "CPU s/GB", "RSS MB")]
    for r in rows:
        lines.append("%-16s %9.1f %10.1f %9s %9s %9.0f" % (
            r["name"], r["mb_per_s"], r["patches_per_s"],
            "%.0f" % r["requests_per_s"] if r["requests_per_s"] else "n/a",
            "%.1f" % r["cpu_s_per_gb"] if r["cpu_s_per_gb"] else "n/a",
            r["peak_rss_mb"]))
    for where in ("local", "remote"):
        b, c = by["baseline-" + where], by["cogfeed-" + where]
        if b["mb_per_s"] > 0:
            lines.append("cogfeed / baseline, %s: %.1fx" % (
                where, c["mb_per_s"] / b["mb_per_s"]))
    if exp:
        lines += ["", "%-16s %6s %9s %12s %6s" % ("training", "steps",
                                                   "stall", "utilisation",
                                                   "mIoU")]
        for r in exp["runs"]:
            lines.append("%-16s %6d %8.0f%% %11.0f%% %6.3f" % (
                r["setup"], r["steps"], 100 * r["stall_frac"],
                100 * r["utilisation"], r["final_miou"]))
    lines += ["", "plots: " + ", ".join(plots),
              "took %.0f s" % (time.perf_counter() - t_all)]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(text)
    return text, rows, exp


def main(argv):
    p = argparse.ArgumentParser(
        prog="cogfeed demo",
        description="synth -> convert -> serve with 164 ms latency -> "
                    "stream with the paper-style loader and cogfeed -> "
                    "short training; prints the comparison.")
    p.add_argument("--out", default="demo-out",
                   help="folder for the data, results and plots "
                        "(default demo-out)")
    p.add_argument("--scenes", type=int, default=4,
                   help="scenes synthesised (default 4)")
    p.add_argument("--size", type=int, default=1024,
                   help="scene width and height in pixels (default 1024)")
    p.add_argument("--seconds", type=float, default=8.0,
                   help="bench seconds per loader and storage")
    p.add_argument("--budget", type=float, default=20.0,
                   help="training seconds per set-up")
    p.add_argument("--latency-ms", type=int, default=164,
                   help="latency of the served (remote) runs, in ms "
                        "(default 164)")
    p.add_argument("--baseline-workers", type=int, default=4,
                   help="DataLoader worker processes of the baseline "
                        "(default 4)")
    p.add_argument("--no-train", action="store_true",
                   help="skip the training part")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    try:
        text, _, _ = demo(a.out, a.scenes, a.size, a.seconds, a.budget,
                          a.latency_ms, baseline_workers=a.baseline_workers,
                          train=not a.no_train)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        sys.stderr.write("cogfeed demo: %s\n" % e)
        return 1
    sys.stdout.write(text)
    return 0

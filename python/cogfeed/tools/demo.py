"""cogfeed demo: the whole story in a few minutes, on a fresh machine.

1. synth      a small labelled Sentinel-2-like dataset (nothing downloaded)
2. convert    a LERC_ZSTD COG variant with 512 px tiles (the paper's remote
              winner)
3. serve      the files on 127.0.0.1 with 164 ms before every response's
              first byte (the paper's Azure latency): nginx with the lua
              module when installed, else cogfeed's pure-Python range
              server (cogfeed.tools.servers); the output says which
4. bench      stream patches with the paper-style default loader (torch
              DataLoader, 4 workers, rasterio per patch) and with cogfeed,
              local and remote: the first pass over the data (cold) apart
              from the later ones (warm), each with MB/s, requests and
              chunk-cache hits; cogfeed's chunk cache is off
              (cache_bytes=0) so that every pass streams: the demo's data
              fits in the default cache (5% of memory), where warm passes
              would measure the cache.  One more cogfeed run with the
              default cache shows that cache-resident figure, labelled so.
5. train      a small UNet for a short budget per set-up: optimizer steps,
              data-stall fraction, utilisation, IoU (cogfeed experiment;
              base-4 UNet on a CPU so that data, not compute, sets the
              pace)
6. predict    the UNet cogfeed trained (cogfeed-local) over the held-out
              scene, the last one, which the experiment never trains on:
              cogfeed.predict in overlapping 256 px patches, Hann-blended,
              the classes (uint8 argmax) written with cogfeed's writer as
              predictions.tif (a COG on the scene's grid), prediction.png
              showing the scene, its ground truth and the prediction side
              by side, and the whole-scene mIoU

and prints the comparison, leaving tables and plots in --out.  --quick:
2 scenes, three passes per loader (one cold, two warm), no cache-resident
run, no training or prediction unless --train (about a minute on 2
cores).
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


def _data_bytes(paths):
    """(bytes on disk, bytes decoded) of COGs."""
    disk = dec = 0
    for p in paths:
        disk += os.path.getsize(p)
        w, h, c, isz = common.cog_shape(p)
        dec += w * h * c * isz
    return disk, dec


def _default_cache_bytes():
    """cogfeed.Loader's default cache_bytes: 5% of the physical memory, at
    least 256 MiB (loader.py)."""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(mem // 20, 256 << 20)


def _mb(n):
    return "%.0f MB" % (n / 1e6) if n < 1e9 else "%.1f GB" % (n / 1e9)


def _pass_row(name, r, key, label):
    p = (r.get("passes") or {}).get(key)
    if p is None:
        return "%-22s %-15s %s" % (name, label, "not reached")
    if not p["complete"]:
        label += " %d%%" % (100 * p["patches"] // max(1, r["pass_patches"]))
    gb = p["bytes_delivered"] / 1e9
    return "%-22s %-15s %8.1f %10.1f %9s %11s %9s" % (
        name, label, p["mb_per_s"], p["patches_per_s"],
        "n/a" if p["requests"] is None else "%d" % p["requests"],
        _hits(r, p),
        "%.1f" % (p["cpu_seconds"] / gb) if gb > 0 else "n/a")


def _hits(r, p):
    if p["cache_hits"] is None:
        return "n/a"
    if r["settings"].get("cache_bytes") == 0:
        return "off"
    return "%d/%d" % (p["cache_hits"], p["cache_hits"] + p["cache_misses"])


def _ratio(by, where, key):
    b = (by["baseline-" + where].get("passes") or {}).get(key)
    c = (by["cogfeed-" + where].get("passes") or {}).get(key)
    if not b or not c or b["mb_per_s"] <= 0:
        return "n/a"
    text = "%.1fx" % (c["mb_per_s"] / b["mb_per_s"])
    if where == "remote" and b["requests"] is not None and b["patches"]:
        # GDAL's /vsicurl/ cache (16 MB a worker) can hold a small
        # dataset: say how much the baseline still fetched.
        text += " (baseline %.1f requests a patch)" % (
            b["requests"] / b["patches"])
    return text


# Class colours of the PNG, in synth.CLASSES order.
_CLASS_COLOURS = ("#2166ac", "#1b7837", "#d9d94a", "#8cc66b", "#8c8c8c",
                  "#c49a6c")


def _miou(truth, pred, classes):
    """(mean IoU over the classes present in truth or prediction, as
    unet.iou_from_confusion, per class) of two class maps; a pixel with
    no prediction (255) counts as a miss."""
    import numpy as np
    cm = np.bincount(truth.astype(np.int64).ravel() * (classes + 1) +
                     np.minimum(pred, classes).astype(np.int64).ravel(),
                     minlength=classes * (classes + 1)).reshape(
                         classes, classes + 1)
    tp = np.diag(cm[:, :classes]).astype(np.float64)
    union = cm.sum(1) + cm[:, :classes].sum(0) - tp
    per = [float(t / u) if u > 0 else None for t, u in zip(tp, union)]
    got = [v for v in per if v is not None]
    return (float(np.mean(got)) if got else 0.0), per


def _rgb(cog):
    """B04, B03, B02 of a scene stretched to 0..1 (2-98 percentiles)."""
    import numpy as np
    a = cog.read(bands=[3, 2, 1]).astype(np.float32)
    lo, hi = np.percentile(a, (2, 98))
    return np.clip((a - lo) / max(hi - lo, 1.0), 0, 1).transpose(1, 2, 0)


def _predict(out, exp, patch_size=256, overlap=64, log=sys.stderr):
    """Step 6: the model cogfeed trained over the held-out scene with
    cogfeed.predict (classes, Hann blend), written to out/predictions.tif;
    the PNG of scene, ground truth and prediction, and the whole-scene
    mIoU.  Returns a record for the summary."""
    import numpy as np
    import cogfeed
    from .synth import CLASSES
    meta = exp["meta"]
    name = "cogfeed-local"
    model = exp["models"][name]
    img, msk = meta["val_scene"], meta["val_mask"]
    path = os.path.join(out, "predictions.tif")
    log.write("== 6/6 predict: %s's UNet over the held-out scene %s, patch "
              "%d, overlap %d, hann -> %s\n" % (
                  name, os.path.basename(img), patch_size, overlap, path))
    t0 = time.perf_counter()
    # The training's normalisation, done by the Loader under predict.
    cogfeed.predict(model, img, path, patch_size=patch_size,
                    overlap=overlap, blend="hann", batch_size=8,
                    device=meta["device"], output="classes",
                    progress=False, mean=meta["mean"], std=meta["std"])
    secs = time.perf_counter() - t0
    with cogfeed.open(path) as c:
        pred = c.read()[0]
    with cogfeed.open(msk) as c:
        truth = c.read(bands=[1])[0]
    with cogfeed.open(img) as c:
        rgb = _rgb(c)
    miou, per = _miou(truth, pred, len(CLASSES))
    run = next(r for r in exp["runs"] if r["setup"] == name)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    cmap = ListedColormap(_CLASS_COLOURS)
    fig, axs = plt.subplots(1, 3, figsize=(13.5, 5.2))
    axs[0].imshow(rgb, interpolation="antialiased")
    axs[0].set_title("held-out scene %s (B04 B03 B02)"
                     % os.path.basename(img), fontsize=10)
    axs[1].imshow(truth, cmap=cmap, vmin=0, vmax=len(CLASSES) - 1,
                  interpolation="nearest")
    axs[1].set_title("ground truth", fontsize=10)
    axs[2].imshow(np.where(pred < len(CLASSES), pred, 0), cmap=cmap,
                  vmin=0, vmax=len(CLASSES) - 1, interpolation="nearest")
    axs[2].set_title("prediction (%s, %d steps): mIoU %.3f"
                     % (name, run["steps"], miou), fontsize=10)
    for a in axs:
        a.set_xticks([])
        a.set_yticks([])
    fig.legend(handles=[Patch(color=c, label=n) for c, n in
                        zip(_CLASS_COLOURS, CLASSES)],
               loc="lower center", ncol=len(CLASSES), fontsize=9,
               frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    png = common.save_fig(fig, out, "prediction.png")
    log.write("   whole-scene mIoU %.3f; predict %.1f s, the step %.1f s\n"
              % (miou, secs, time.perf_counter() - t0))
    return {"setup": name, "scene": img, "mask": msk, "path": path,
            "png": png, "patch_size": patch_size, "overlap": overlap,
            "blend": "hann", "seconds": secs, "miou": miou,
            "per_class": dict(zip(CLASSES, per)),
            "patch_miou": run["final_miou"], "steps": run["steps"],
            "unpredicted": int((pred >= len(CLASSES)).sum())}


def demo(out, scenes=4, size=1024, seconds=8.0, budget=20.0,
         latency_ms=164, compress="lerc_zstd", tile=512, patch_size=256,
         batch_size=16, baseline_workers=4, train=True, passes=None,
         cached=True, server="auto", log=sys.stderr):
    """seconds: measured seconds per run after one warm-up batch (None:
    no limit); passes: end each run after this many passes over the data
    (None: no limit); cached: one more cogfeed run with the default
    cache."""
    t_all = time.perf_counter()
    data = os.path.join(out, "data")
    raw = os.path.join(data, "raw")
    var = os.path.join(data, convert.variant_name(compress, tile))
    log.write("== 1/6 synth: %d scenes of %d px into %s\n" % (scenes, size,
                                                               raw))
    synth.synth(raw, scenes, size, seed=0, progress=False)
    log.write("== 2/6 convert: %s, %d px tiles -> %s\n" % (compress, tile,
                                                            var))
    convert.convert([raw], var, compress, tile, progress=False)
    imgs, msks = common.resolve(var)
    itemsize = common.cog_shape(imgs[0])[3]
    disk, decoded = _data_bytes(imgs + msks)
    cache = _default_cache_bytes()
    pass_size = bench.pass_patches(imgs, patch_size)
    settings = {"patch_size": patch_size, "batch_size": batch_size,
                "sampler": "random", "seed": 0}
    # Streaming: no chunk cache, so that every pass fetches and decodes
    # (the data is far smaller than the default cache).
    streaming = dict(settings, cache_bytes=0)
    rows = []
    kw = dict(seconds=seconds, warmup=1, itemsize=itemsize,
              baseline_workers=baseline_workers, pass_size=pass_size,
              passes=passes)
    what = []
    if seconds:
        what.append("%g s" % seconds)
    if passes:
        what.append("%d passes" % passes)
    log.write("== 3/6 bench, local: %s per loader; one pass = %d "
              "patches\n" % (" or ".join(what) or "until stopped",
                              pass_size))
    for kind in ("baseline", "cogfeed"):
        r = bench.run_on(imgs, msks, kind, streaming, transport="file", **kw)
        r["name"] = kind + "-local"
        rows.append(r)
        log.write("   %-16s %7.1f MB/s (window, %s)\n"
                  % (r["name"], r["mb_per_s"], r["window_state"]))
    with common.served(imgs + msks, latency_ms, server) as (srv, url):
        note = common.server_note(srv)
        log.write("== 4/6 serve and bench, remote: %s, %d ms first-byte "
                  "latency\n" % (note, latency_ms))
        runs = [("baseline", streaming, "-remote"),
                ("cogfeed", streaming, "-remote")]
        if cached:
            runs.append(("cogfeed", settings, "-remote-cached"))
        for kind, s, suffix in runs:
            r = bench.run_on([url(p) for p in imgs], [url(p) for p in msks],
                             kind, s, transport="http",
                             log=common.access_log(srv),
                             latency_ms=latency_ms, server=note, **kw)
            r["name"] = kind + suffix
            rows.append(r)
            log.write("   %-16s %7.1f MB/s (window, %s)\n"
                      % (r["name"], r["mb_per_s"], r["window_state"]))
    plots = [_plot(out, rows)]
    exp = pred = None
    if train:
        log.write("== 5/6 train: UNet, %g s per set-up\n" % budget)
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
        pred = _predict(out, exp, log=log)
        plots.append(pred["png"])
    with open(os.path.join(out, "bench.json"), "w") as f:
        json.dump(rows, f, indent=1, default=str)
    by = {r["name"]: r for r in rows}
    lines = ["", "cogfeed demo: %d scenes (%s in files, %s decoded), %s %d "
             "px tiles, patch %d, batch %d, random windows"
             % (scenes, _mb(disk), _mb(decoded), compress, tile,
                patch_size, batch_size),
             "remote: %s, +%d ms before each response's first byte"
             % (note, latency_ms),
             "one pass = %d patches (the files' non-overlapping patches); "
             "pass 1 is cold (from the loader's creation), passes 2+ warm"
             % pass_size,
             "streaming: cogfeed's chunk cache off (cache_bytes=0), so "
             "every pass fetches and decodes; the baseline keeps GDAL's "
             "defaults (a 16 MB /vsicurl/ cache per worker, which holds "
             "much of this small dataset: see its requests); local files "
             "come from the OS page cache after pass 1, for both",
             "",
             "%-22s %-15s %8s %10s %9s %11s %9s" % (
                 "streaming", "pass", "MB/s", "patches/s", "requests",
                 "cache hits", "CPU s/GB")]
    for r in rows:
        if r["name"].endswith("-cached"):
            continue
        lines.append(_pass_row(r["name"], r, "cold", "1 (cold)"))
        lines.append(_pass_row("", r, "warm", "2+ (warm)"))
    for where in ("local", "remote"):
        lines.append("cogfeed / baseline, %s: pass 1 (cold) %s, passes 2+ "
                     "(warm) %s" % (where, _ratio(by, where, "cold"),
                                    _ratio(by, where, "warm")))
    lines.append("(a baseline pass with few or no requests came from GDAL's "
                 "cache and the DataLoader's read-ahead, not streaming: "
                 "that ratio understates cogfeed's)")
    if "cogfeed-remote-cached" in by:
        if cache >= decoded:
            lines += ["", "cache-resident: cogfeed with its default chunk "
                      "cache (%s, 5%% of memory), which holds all %s "
                      "decoded: after pass 1 nothing is fetched or decoded, "
                      "so the warm passes measure the cache, not streaming"
                      % (_mb(cache), _mb(decoded))]
        else:
            lines += ["", "cogfeed with its default chunk cache (%s, 5%% of "
                      "memory), smaller than the %s decoded"
                      % (_mb(cache), _mb(decoded))]
        r = by["cogfeed-remote-cached"]
        lines.append(_pass_row(r["name"], r, "cold", "1 (cold)"))
        lines.append(_pass_row("", r, "warm", "2+ (warm)"))
    if exp:
        lines += ["", "%-16s %6s %9s %12s %6s" % ("training", "steps",
                                                   "stall", "utilisation",
                                                   "mIoU")]
        for r in exp["runs"]:
            lines.append("%-16s %6d %8.0f%% %11.0f%% %6.3f" % (
                r["setup"], r["steps"], 100 * r["stall_frac"],
                100 * r["utilisation"], r["final_miou"]))
    if pred:
        lines += ["", "prediction: %s's UNet (%d steps) over the held-out "
                  "scene %s, never trained on: cogfeed.predict, %d px "
                  "patches overlapping by %d, Hann blend, uint8 classes "
                  "-> %s (a COG on the scene's grid), %.1f s"
                  % (pred["setup"], pred["steps"],
                     os.path.basename(pred["scene"]), pred["patch_size"],
                     pred["overlap"], pred["path"], pred["seconds"]),
                  "whole-scene mIoU against the ground truth: %.3f (the "
                  "training's mIoU on the same scene in separate %d px "
                  "patches: %.3f)" % (pred["miou"], exp["meta"]["patch_size"],
                                      pred["patch_miou"])]
        if pred["unpredicted"]:
            lines.append("%d pixels got no prediction" % pred["unpredicted"])
    lines += ["", "plots: " + ", ".join(plots),
              "took %.0f s" % (time.perf_counter() - t_all)]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(text)
    if exp:
        exp = dict(exp, prediction=pred)
    return text, rows, exp


def main(argv):
    p = argparse.ArgumentParser(
        prog="cogfeed demo",
        description="synth -> convert -> serve with 164 ms latency -> "
                    "stream with the paper-style loader and cogfeed -> "
                    "short training -> the trained model over a held-out "
                    "scene; prints the comparison.")
    p.add_argument("--out", default="demo-out",
                   help="folder for the data, results and plots "
                        "(default demo-out)")
    p.add_argument("--quick", action="store_true",
                   help="a short run: 2 scenes, 3 passes per loader (one "
                        "cold, two warm), no cache-resident run, no "
                        "training or prediction unless --train (about a "
                        "minute on 2 cores)")
    p.add_argument("--scenes", type=int,
                   help="scenes synthesised (default 4; --quick: 2)")
    p.add_argument("--size", type=int, default=1024,
                   help="scene width and height in pixels (default 1024)")
    p.add_argument("--seconds", type=float,
                   help="measured seconds per loader and storage (default "
                        "8; --quick: none, 3 passes)")
    p.add_argument("--passes", type=int,
                   help="end each run after this many passes over the data")
    p.add_argument("--budget", type=float, default=20.0,
                   help="training seconds per set-up")
    p.add_argument("--latency-ms", type=int, default=164,
                   help="latency of the served (remote) runs, in ms "
                        "(default 164)")
    p.add_argument("--baseline-workers", type=int, default=4,
                   help="DataLoader worker processes of the baseline "
                        "(default 4)")
    p.add_argument("--server", choices=("auto", "nginx", "python"),
                   default="auto",
                   help="what serves the files: nginx with the lua module, "
                        "cogfeed's pure-Python range server, or auto (nginx "
                        "when installed; default)")
    p.add_argument("--no-train", action="store_true",
                   help="skip the training and the prediction")
    p.add_argument("--train", action="store_true",
                   help="train and predict with --quick too (for "
                        "--budget seconds per set-up)")
    a = p.parse_args(argv)
    scenes = a.scenes or (2 if a.quick else 4)
    seconds, passes = a.seconds, a.passes
    if a.quick and seconds is None and passes is None:
        passes = 3
    elif seconds is None and passes is None:
        seconds = 8.0
    os.makedirs(a.out, exist_ok=True)
    try:
        text, _, _ = demo(a.out, scenes, a.size, seconds, a.budget,
                          a.latency_ms, baseline_workers=a.baseline_workers,
                          train=not a.no_train and (a.train or not a.quick),
                          passes=passes,
                          cached=not a.quick, server=a.server)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        sys.stderr.write("cogfeed demo: %s\n" % e)
        return 1
    sys.stdout.write(text)
    return 0

"""cogfeed experiment: does the loader keep the accelerator busy?

A small UNet (unet.py; --model unet-resnet18: the paper's UNet with a
ResNet-18 encoder, from segmentation-models-pytorch) is trained for a
fixed wall-clock budget on a synthetic dataset (synth.py) under four
set-ups: files on local disk and files behind nginx with a first-byte
latency (164 ms by default, the paper's Azure figure; the command starts
the server), each read with the paper-style loader (baseline.py) and
with cogfeed.  Every set-up uses the
same patch size, batch size, sampler, seed and model initialisation, so
local vs remote is a like-for-like comparison.

Per set-up it records:
  steps         optimizer steps done within the budget
  stall         data-stall fraction: time the loop waited in next(batch)
                divided by the training wall time
  utilisation   NVML GPU utilisation sampled every 0.2 s when a GPU is
                used (nvidia-smi polling if pynvml is missing); on CPU,
                the time spent in the training step over wall time
  IoU           mean IoU over the 6 classes on a held-out scene (the
                last one), for snapshots taken along the way; snapshots
                are evaluated after the budget so evaluation neither
                pauses training nor gives the loader free time

Then a sampler comparison: cogfeed on local files with the random,
blocked and tile-shuffle samplers for the same number of steps, with the
IoU each reaches.  Blocked sampling keeps every patch inside one tile,
which is cheap to read but shows the model fewer distinct contexts; this
measures what that costs in accuracy.

Outputs in --out: results.csv, samplers.csv, results.md (tables), run.json
(everything, including IoU curves), iou_over_time.png, throughput.png,
samplers.png.
"""

import argparse
import contextlib
import copy
import csv
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np

from . import common

CLASSES = 6


class UtilMonitor:
    """Samples GPU utilisation (percent) in a thread while running."""

    def __init__(self, device_index=0, period=0.2):
        self.samples = []
        self.period = period
        self.idx = device_index
        self._stop = threading.Event()
        self._th = None
        self.source = None
        try:
            import pynvml
            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(device_index)
            self._read = lambda: pynvml.nvmlDeviceGetUtilizationRates(h).gpu
            self.source = "nvml"
        except Exception:
            if shutil.which("nvidia-smi"):
                self._read = self._smi
                self.source = "nvidia-smi"

    def _smi(self):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=utilization.gpu",
             "--format=csv,noheader,nounits", "-i", str(self.idx)],
            capture_output=True, text=True, timeout=5).stdout
        return float(out.strip().splitlines()[0])

    def _loop(self):
        while not self._stop.wait(self.period):
            try:
                self.samples.append(float(self._read()))
            except Exception:
                pass

    def __enter__(self):
        if self.source:
            self._th = threading.Thread(target=self._loop, daemon=True)
            self._th.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._th:
            self._th.join()

    def mean(self):
        return float(np.mean(self.samples)) if self.samples else None


def band_stats(images, decim=8):
    """Per-band mean and std of the training images, from the first
    overview at least `decim` times smaller (else every decim-th pixel of
    the full image)."""
    import cogfeed
    acc = []
    for p in images:
        with cogfeed.open(p) as c:
            lvl = next((i + 1 for i, (w, h) in enumerate(c.overviews)
                        if w * decim <= c.width), None)
            if lvl is None:
                a = c.read()[:, ::decim, ::decim]
            else:
                a = c.read(level=lvl)
            acc.append(a.reshape(c.count, -1).astype(np.float64))
    a = np.concatenate(acc, axis=1)
    return [float(x) for x in a.mean(1)], \
        [float(max(x, 1.0)) for x in a.std(1)]


def validation_set(image, mask, patch, mean, std):
    """The held-out scene as non-overlapping patches (N,C,P,P), (N,P,P)."""
    import cogfeed
    with cogfeed.open(image) as c:
        a = c.read().astype(np.float32)
    with cogfeed.open(mask) as c:
        m = c.read(bands=[1])[0]
    c, h, w = a.shape
    a = (a - np.asarray(mean, np.float32)[:, None, None]) / \
        np.asarray(std, np.float32)[:, None, None]
    xs, ys = [], []
    for y in range(0, h - patch + 1, patch):
        for x in range(0, w - patch + 1, patch):
            xs.append(a[:, y:y + patch, x:x + patch])
            ys.append(m[y:y + patch, x:x + patch])
    return np.stack(xs), np.stack(ys)


def evaluate(model, val, device, batch=16):
    import torch
    from .unet import confusion, iou_from_confusion
    xs, ys = val
    model.eval()
    cm = torch.zeros(CLASSES, CLASSES, dtype=torch.long)
    with torch.no_grad():
        for i in range(0, len(xs), batch):
            x = torch.from_numpy(xs[i:i + batch]).to(device)
            pred = model(x).argmax(1).cpu()
            cm += confusion(pred, torch.from_numpy(ys[i:i + batch]).long(),
                            CLASSES)
    model.train()
    return iou_from_confusion(cm)


def _to_tensor(a, device, dtype):
    import torch
    t = a if isinstance(a, torch.Tensor) else torch.from_numpy(np.asarray(a))
    # A cogfeed batch lives in a ring slot that is reused later: copy.
    return t.to(device=device, dtype=dtype, copy=True)


def train(name, ld, val, device, budget=None, steps=None, snap_every=None,
          snap_steps=None, seed=0, lr=2e-3, base=16, log=sys.stderr,
          model="unet", keep=None):
    """Train a fresh model (unet.MODELS) from `ld` until `budget` seconds
    of training wall time or `steps` steps; returns the record of the
    run.  keep: a dict that gets the trained model (its final weights, in
    eval mode) under `name`."""
    import torch
    from .unet import make_model
    torch.manual_seed(seed)
    model = make_model(model, val[0].shape[1], CLASSES, base).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    lossf = torch.nn.CrossEntropyLoss()
    cuda = device.type == "cuda"
    snaps = []
    stall = compute = step_cpu = 0.0
    n = 0
    delivered = 0
    next_snap = snap_every or float("inf")
    it = iter(ld)
    mon = UtilMonitor(device.index or 0) if cuda else None
    cpu0 = common.cpu_seconds(ld.pids())
    t_start = time.perf_counter()
    with (mon if mon else contextlib.nullcontext()):
        while True:
            t0 = time.perf_counter()
            el = t0 - t_start
            if budget is not None and el >= budget:
                break
            if steps is not None and n >= steps:
                break
            b = next(it)
            img, msk = common.batch_arrays(b)
            x = _to_tensor(img, device, torch.float32)
            y = _to_tensor(msk, device, torch.long)[:, 0]
            t1 = time.perf_counter()
            c1 = time.thread_time()
            stall += t1 - t0
            opt.zero_grad(set_to_none=True)
            loss = lossf(model(x), y)
            loss.backward()
            opt.step()
            if cuda:
                torch.cuda.synchronize()
            t2 = time.perf_counter()
            compute += t2 - t1
            step_cpu += time.thread_time() - c1
            n += 1
            delivered += common.nelem(img) * 2 + common.nelem(msk)
            if t2 - t_start >= next_snap or \
                    (snap_steps and n % snap_steps == 0 and n < (steps or 0)):
                snaps.append((t2 - t_start, n, float(loss),
                              copy.deepcopy(model.state_dict())))
                while next_snap <= t2 - t_start:
                    next_snap += snap_every
    wall = time.perf_counter() - t_start
    cpu = common.cpu_seconds(ld.pids()) - cpu0
    if not snaps or snaps[-1][1] != n:
        snaps.append((wall, n, float(loss) if n else None,
                      copy.deepcopy(model.state_dict())))
    curve = []
    for t, k, lv, sd in snaps:
        model.load_state_dict(sd)
        miou, per = evaluate(model, val, device)
        curve.append({"t": t, "steps": k, "loss": lv, "miou": miou,
                      "per_class": per})
    if keep is not None:
        # The last snapshot is the final state: the model holds it now.
        model.eval()
        keep[name] = model
    util = mon.mean() if mon else None
    rec = {"setup": name, "steps": n, "wall_s": wall,
           "steps_per_s": n / wall if wall else 0.0,
           "stall_s": stall, "stall_frac": stall / wall if wall else 0.0,
           "compute_s": compute, "busy_frac": compute / wall if wall
           else 0.0, "step_cpu_s": step_cpu,
           "utilisation": (util / 100.0 if util is not None
                           else cpu_util(step_cpu, compute, wall)),
           "utilisation_source": (mon.source if mon and mon.source else
                                  "step CPU time/wall (CPU)"),
           "mb_per_s": delivered / 1e6 / wall if wall else 0.0,
           "cpu_s": cpu, "final_miou": curve[-1]["miou"],
           "final_loss": curve[-1]["loss"], "curve": curve}
    if log:
        log.write("experiment: %-16s %5d steps in %5.1f s, stall %4.0f%%, "
                  "util %4.0f%%, mIoU %.3f\n" % (
                      name, n, wall, 100 * rec["stall_frac"],
                      100 * rec["utilisation"], rec["final_miou"]))
    return rec


def cpu_util(step_cpu, compute, wall):
    """Utilisation of a CPU "accelerator": CPU time the training step got
    over wall time.  It is lower than the step's share of wall time when
    the loader's processes or threads take the cores from the model.
    With one torch thread the step runs on this thread, so its thread CPU
    time is the step's CPU time; with more, intra-op threads are not
    counted and the step's wall-time share is used instead."""
    import torch
    if not wall:
        return 0.0
    if torch.get_num_threads() == 1:
        return step_cpu / wall
    return compute / wall


def _plots(out, runs, sampler_runs):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    paths = []
    if runs:
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        for r in runs:
            ax.plot([c["t"] for c in r["curve"]],
                    [c["miou"] for c in r["curve"]], "o-", label=r["setup"],
                    ms=3)
        ax.set_xlabel("training wall time (s)")
        ax.set_ylabel("validation mIoU (held-out scene)")
        ax.set_title("IoU over time, equal budget")
        ax.legend(fontsize=8)
        p = common.save_fig(fig, out, "iou_over_time.png")
        paths.append(p)

        fig, axs = plt.subplots(1, 2, figsize=(8, 3.4))
        names = [r["setup"] for r in runs]
        axs[0].bar(names, [r["steps"] for r in runs], color="tab:blue")
        axs[0].set_title("optimizer steps in budget")
        axs[1].bar(names, [100 * r["stall_frac"] for r in runs],
                   color="tab:red", label="data stall")
        axs[1].bar(names, [100 * r["utilisation"] for r in runs],
                   color="tab:green", alpha=0.5, label="utilisation")
        axs[1].set_title("% of wall time")
        axs[1].legend(fontsize=7)
        for a in axs:
            a.tick_params(axis="x", labelrotation=30, labelsize=7)
        p = common.save_fig(fig, out, "throughput.png")
        paths.append(p)

    if sampler_runs:
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
        for r in sampler_runs:
            if r.get("seed", 0):
                continue
            ax.plot([c["steps"] for c in r["curve"]],
                    [c["miou"] for c in r["curve"]], "o-", ms=3,
                    label=r["setup"])
        ax.set_xlabel("optimizer steps")
        ax.set_ylabel("validation mIoU")
        ax.set_title("Samplers at equal steps (cogfeed, local)")
        ax.legend(fontsize=8)
        p = common.save_fig(fig, out, "samplers.png")
        paths.append(p)
    return paths


COLS = ("setup", "seed", "steps", "wall_s", "steps_per_s", "stall_frac",
        "busy_frac", "utilisation", "utilisation_source", "mb_per_s", "cpu_s",
        "final_miou", "final_loss")


def _write_tables(out, runs, sampler_runs, meta):
    for name, rs in (("results.csv", runs), ("samplers.csv", sampler_runs)):
        if not rs:
            continue
        with open(os.path.join(out, name), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(COLS)
            for r in rs:
                w.writerow([("%.4g" % r.get(k)) if isinstance(r.get(k),
                                                              float)
                            else r.get(k, 0) for k in COLS])
    lines = ["# cogfeed experiment results", "",
             "device: %s; budget %s s per set-up; patch %d, batch %d, "
             "sampler %s; model %s; remote = nginx with %d ms "
             "first-byte latency" % (
                 meta["device"], meta["budget"], meta["patch_size"],
                 meta["batch_size"], meta["sampler"],
                 "UNet base %d" % meta["unet_base"]
                 if meta.get("model", "unet") == "unet"
                 else meta["model"], meta["latency_ms"]),
             "",
             "| set-up | steps | steps/s | data stall | step busy | "
             "utilisation | MB/s to model | CPU s (all processes) | "
             "final mIoU |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append("| %s | %d | %.2f | %.0f%% | %.0f%% | %.0f%% | %.2f | "
                     "%.1f | %.3f |" % (
                         r["setup"], r["steps"], r["steps_per_s"],
                         100 * r["stall_frac"], 100 * r["busy_frac"],
                         100 * r["utilisation"], r["mb_per_s"],
                         r["cpu_s"], r["final_miou"]))
    lines += ["", "utilisation: %s" % (runs[0]["utilisation_source"]
                                       if runs else "")]
    by = {r["setup"]: r for r in runs}
    lines += ["", "Remote vs local at equal patch size and sampler "
              "(steps remote / steps local):", ""]
    for k in ("baseline", "cogfeed"):
        lo, re_ = by.get(k + "-local"), by.get(k + "-remote")
        if lo and re_ and lo["steps"]:
            lines.append("- %s: %d / %d = %.2f" % (
                k, re_["steps"], lo["steps"], re_["steps"] / lo["steps"]))
    if not runs:
        lines = lines[:2]       # only the sampler comparison was run
    if sampler_runs:
        seeds = sorted({r.get("seed", 0) for r in sampler_runs})
        lines += ["", "Samplers at equal steps (%d), cogfeed, local, "
                  "seeds %s:" % (sampler_runs[0]["steps"],
                                 ",".join(map(str, seeds))), "",
                  "| sampler | steps | wall s | data stall | final mIoU "
                  "per seed | mean mIoU | sd |",
                  "|---|---|---|---|---|---|---|"]
        for smp in dict.fromkeys(r["setup"] for r in sampler_runs):
            rs = [r for r in sampler_runs if r["setup"] == smp]
            m = [r["final_miou"] for r in rs]
            lines.append("| %s | %d | %.1f | %.0f%% | %s | %.3f | %s |" % (
                smp, rs[0]["steps"], float(np.mean([r["wall_s"]
                                                    for r in rs])),
                100 * float(np.mean([r["stall_frac"] for r in rs])),
                " ".join("%.3f" % v for v in m), float(np.mean(m)),
                "%.3f" % float(np.std(m, ddof=1)) if len(m) > 1 else "-"))
    p = os.path.join(out, "results.md")
    with open(p, "w") as f:
        f.write("\n".join(lines) + "\n")
    return p


def run(data, out, budget=60.0, patch_size=128, batch_size=8,
        sampler="random", latency_ms=164, baseline_workers=4,
        baseline_prefetch=2, cogfeed_settings=None, sampler_steps=None,
        samplers=("random", "blocked", "tile-shuffle"), snapshots=6,
        loaders=("baseline", "cogfeed"), device=None, base=None,
        sampler_seeds=1, log=sys.stderr, model="unet"):
    """Train and measure every set-up; returns {"runs", "samplers" (the
    records), "plots", "table" (paths), "meta" (settings, the held-out
    scene "val_scene"/"val_mask", the normalisation "mean"/"std"),
    "models"}: models holds the model trained by cogfeed-local (final
    weights, eval mode, on the training device) under that name, for
    whole-scene prediction (the demo's last step)."""
    import torch
    from .unet import MODELS, make_model
    if sampler not in ("random", "blocked", "grid"):
        raise ValueError("experiment: the four set-ups need a sampler both "
                         "loaders have (random, blocked, grid)")
    if model not in MODELS:
        raise ValueError("experiment: unknown model %r (one of %s)"
                         % (model, ", ".join(MODELS)))
    # The small UNet pools 3 times, the ResNet-18 encoder 5 times.
    step = 32 if model == "unet-resnet18" else 8
    if patch_size % step:
        raise ValueError("experiment: --model %s needs a patch size that "
                         "is a multiple of %d, not %d"
                         % (model, step, patch_size))
    make_model(model, 4, CLASSES)   # fails now, not after reading data
    os.makedirs(out, exist_ok=True)
    imgs, msks = common.resolve(data)
    if not msks or len(imgs) < 2:
        raise ValueError("experiment: %s needs >= 2 scenes with masks "
                         "(`cogfeed synth` makes them)" % data)
    train_i, train_m = imgs[:-1], msks[:-1]
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if base is None:
        # On a CPU the model shares the cores with the loader; a narrower
        # UNet keeps steps short enough for a budget of a minute.
        base = 16 if device.type == "cuda" else 8
    mean, std = band_stats(train_i)
    val = validation_set(imgs[-1], msks[-1], patch_size, mean, std)
    settings = {"patch_size": patch_size, "batch_size": batch_size,
                "sampler": sampler, "seed": 0, "dtype": "float32"}
    cf_settings = dict(cogfeed_settings or {}, **settings)
    snap = budget / snapshots if snapshots else None
    meta = {"device": str(device), "budget": budget,
            "patch_size": patch_size, "batch_size": batch_size,
            "sampler": sampler, "latency_ms": latency_ms,
            "train_scenes": train_i, "val_scene": imgs[-1],
            "val_mask": msks[-1],
            "mean": mean, "std": std, "baseline_workers": baseline_workers,
            "baseline_prefetch": baseline_prefetch,
            "cogfeed_settings": cf_settings, "unet_base": base,
            "model": model,
            "torch_threads":
            torch.get_num_threads(), "cpus": os.cpu_count()}

    models = {}

    def one(kind, name, ti, tm, s, steps=None, bud=None, sn=None,
            sn_steps=None, seed=0, keep=None):
        ld = common.make_loader(kind, ti, tm, s if kind == "cogfeed"
                                else settings, baseline_workers,
                                baseline_prefetch, mean=mean, std=std)
        try:
            return train(name, ld, val, device, budget=bud, steps=steps,
                         snap_every=sn, snap_steps=sn_steps, base=base,
                         seed=seed, log=log, model=model, keep=keep)
        finally:
            ld.close()

    runs = []
    for kind in loaders:
        runs.append(one(kind, kind + "-local", train_i, train_m,
                        cf_settings, bud=budget, sn=snap,
                        keep=models if kind == "cogfeed" else None))
    if loaders:
        with common.served(imgs + msks, latency_ms) as (_, url):
            for kind in loaders:
                runs.append(one(kind, kind + "-remote",
                                [url(p) for p in train_i],
                                [url(p) for p in train_m],
                                cf_settings, bud=budget, sn=snap))
    runs.sort(key=lambda r: (r["setup"].split("-")[0],
                             r["setup"].endswith("remote")))
    sampler_runs = []
    if samplers:
        ref = [r for r in runs if r["setup"] == "cogfeed-local"]
        if not ref and not sampler_steps:
            raise ValueError("experiment: the sampler comparison needs "
                             "--sampler-steps when cogfeed-local is not run")
        n = sampler_steps or max(10, ref[0]["steps"])
        # Seed k changes the sampler's windows and the model's
        # initialisation together: the spread over seeds is the noise
        # level a sampler difference must beat.
        for k in range(max(1, sampler_seeds)):
            for smp in samplers:
                s = dict(cf_settings, sampler=smp, seed=k)
                r = one("cogfeed", smp, train_i, train_m, s, steps=n,
                        sn_steps=max(1, n // max(1, snapshots)), seed=k)
                r["seed"] = k
                sampler_runs.append(r)
    plots = _plots(out, runs, sampler_runs)
    md = _write_tables(out, runs, sampler_runs, meta)
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump({"meta": meta, "runs": runs, "samplers": sampler_runs},
                  f, indent=1, default=str)
    return {"runs": runs, "samplers": sampler_runs, "plots": plots,
            "table": md, "meta": meta, "models": models}


def main(argv):
    p = argparse.ArgumentParser(
        prog="cogfeed experiment",
        description="Train a UNet (small by default) for a fixed time "
                    "under local/remote x baseline/cogfeed, then compare "
                    "samplers at equal steps; writes tables and plots.")
    p.add_argument("--data", required=True,
                   help="dataset folder with images/ and masks/ (the last "
                        "scene is held out for validation)")
    p.add_argument("--out", default="experiment-out",
                   help="folder for the results and plots (default "
                        "experiment-out)")
    p.add_argument("--budget", type=float, default=60.0,
                   help="training seconds per set-up")
    p.add_argument("--patch-size", type=int, default=128,
                   help="patch width and height in pixels (default 128)")
    p.add_argument("--batch-size", type=int, default=8,
                   help="patches per batch (default 8)")
    p.add_argument("--sampler", default="random",
                   choices=("random", "blocked", "grid"),
                   help="sampler of the four set-ups (both loaders)")
    p.add_argument("--latency-ms", type=int, default=164,
                   help="latency of the served (remote) set-ups, in ms "
                        "(default 164)")
    p.add_argument("--baseline-workers", type=int, default=4,
                   help="DataLoader worker processes of the baseline "
                        "(default 4)")
    p.add_argument("--baseline-prefetch", type=int, default=2,
                   help="DataLoader prefetch_factor of the baseline "
                        "(default 2)")
    p.add_argument("--config", help="cogfeed settings JSON (tune's best.json;"
                   " patch size, batch size and sampler stay the "
                   "experiment's)")
    p.add_argument("--sampler-steps", type=int, default=None,
                   help="steps per sampler in the comparison (default: "
                        "what cogfeed-local reached in the budget)")
    p.add_argument("--samplers", default="random,blocked,tile-shuffle",
                   help="comma list, or 'none' to skip the comparison")
    p.add_argument("--sampler-seeds", type=int, default=1,
                   help="repeat the sampler comparison with seeds "
                        "0..N-1 (sampler windows and model init)")
    p.add_argument("--snapshots", type=int, default=6,
                   help="IoU points per set-up")
    p.add_argument("--loaders", default="baseline,cogfeed",
                   help="loaders of the four set-ups; 'none' runs only "
                        "the sampler comparison (needs --sampler-steps)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: "
                   "cuda when available)")
    p.add_argument("--unet-base", type=int, default=None,
                   help="UNet channels at the top level (default 16 on "
                        "cuda, 8 on cpu; --model unet only)")
    p.add_argument("--model", default="unet",
                   choices=("unet", "unet-resnet18"),
                   help="unet: the small UNet (default, for a 2-core "
                        "CPU); unet-resnet18: the paper's UNet with a "
                        "ResNet-18 encoder (segmentation-models-pytorch, "
                        "random initialisation; patch size a multiple "
                        "of 32)")
    a = p.parse_args(argv)
    cfg = None
    if a.config:
        cfg = {k: v for k, v in common.load_config(a.config).items()
               if k in common.LOADER_KEYS}
    try:
        r = run(a.data, a.out, a.budget, a.patch_size, a.batch_size,
                a.sampler, a.latency_ms, a.baseline_workers,
                a.baseline_prefetch, cfg, a.sampler_steps,
                () if a.samplers == "none" else tuple(a.samplers.split(",")),
                a.snapshots,
                () if a.loaders == "none" else tuple(a.loaders.split(",")),
                a.device, a.unet_base, a.sampler_seeds, model=a.model)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        sys.stderr.write("cogfeed experiment: %s\n" % e)
        return 1
    with open(r["table"]) as f:
        sys.stdout.write(f.read())
    print("\nplots: %s" % ", ".join(r["plots"]))
    return 0

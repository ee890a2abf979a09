"""cogfeed tune: Bayesian search (Optuna TPE) for the fastest loader set-up.

The search space is the paper's: the dataset variants found in a folder
(convert's layout, DIR/<compress>_<tile>/{images,masks}), patch size and
sampler, plus cogfeed's own knobs: concurrency (or adaptive), decode
threads, prefetch depth and the tile cache.  Each trial is a short
`cogfeed bench` (same code) and its objective is steady-state MB/s.  With
--serve-latency-ms the whole folder is served once by nginx with that
first-byte latency and every trial reads over http.

Writes to --out:
  best.json    Loader keyword arguments of the best trial, plus "images"
               and "masks" (the chosen variant's files) and "variant"
               (that folder); `cogfeed bench --config best.json` and
               cogfeed.Loader.from_config("best.json") accept it
  trials.csv   one row per trial: number, state, MB/s, seconds, params
  history.png  optimisation history (best so far and each trial)
  importance.png  parameter importance (optuna.importance)
"""

import argparse
import csv
import json
import os
import sys

from . import bench, common

# optuna (the experiments extra) is imported where a search runs, so that
# `cogfeed tune --help` works in any install.

CONCURRENCY = ("adaptive", "4", "16", "64", "256")
CACHE_MB = (8, 32, 128, 512)
DECODE_THREADS = ("auto", "2", "8", "32", "64")


def variants(dataset):
    """{name: (images, masks)} of the variants under `dataset`."""
    out = {}
    if os.path.isdir(os.path.join(dataset, "images")):
        out["."] = common.resolve(dataset)
    for name in sorted(os.listdir(dataset)):
        d = os.path.join(dataset, name)
        if os.path.isdir(os.path.join(d, "images")):
            out[name] = common.resolve(d)
    if not out:
        raise FileNotFoundError(
            "%s holds no dataset variant (a folder with images/; "
            "`cogfeed convert` writes them)" % dataset)
    return out


def decoded_bytes(paths):
    """Bytes the images hold decoded (all bands, full resolution)."""
    n = 0
    for p in paths:
        w, h, b, isz = common.cog_shape(p)
        n += w * h * b * isz
    return n


def cache_choices(dataset_bytes, frac):
    """Tile-cache sizes (MB) to try: at most `frac` of the decoded dataset.

    A cache as large as the dataset turns tile-shuffle into "everything in
    RAM after the first epoch", which a small test dataset allows and a
    real one does not; bounding the cache by a fraction of the data keeps
    the winner valid for datasets larger than memory.
    """
    cap = dataset_bytes * frac / (1 << 20)
    ok = [c for c in CACHE_MB if c <= cap]
    return ok or [max(1, int(cap))]


def anova_importance():
    """An optuna importance evaluator that needs nothing beyond numpy."""
    import optuna

    class AnovaImportance(optuna.importance.BaseImportanceEvaluator):
        """First-order variance decomposition of the objective by parameter.

        optuna.importance's own evaluators (fANOVA, mean decrease impurity)
        need scikit-learn, which optuna does not pull in; this one
        needs nothing: for each parameter, the share of the objective's
        variance explained by the parameter's value (numeric values in
        quartile bins), normalised to sum to 1.  It plugs into
        optuna.importance.get_param_importances(evaluator=...).
        """

        def evaluate(self, study, params=None, *, target=None):
            import numpy as np
            trials = [t for t in study.trials if t.value is not None]
            if len(trials) < 2:
                raise ValueError("need at least 2 completed trials")
            names = params or sorted({k for t in trials for k in t.params})
            y = np.array([target(t) if target else t.value for t in trials],
                         float)
            var = y.var()
            imp = {}
            for k in names:
                vals = [t.params.get(k) for t in trials]
                if all(isinstance(v, (int, float)) for v in vals) and \
                        len(set(vals)) > 4:
                    edges = np.quantile(vals, [0.25, 0.5, 0.75])
                    keys = list(np.searchsorted(edges, vals))
                else:
                    keys = [str(v) for v in vals]
                groups = {}
                for g, v in zip(keys, y):
                    groups.setdefault(g, []).append(v)
                between = sum(len(g) * (np.mean(g) - y.mean()) ** 2
                              for g in groups.values()) / len(y)
                imp[k] = between / var if var > 0 else 0.0
            tot = sum(imp.values())
            if tot > 0:
                imp = {k: v / tot for k, v in imp.items()}
            return dict(sorted(imp.items(), key=lambda kv: -kv[1]))

    return AnovaImportance()


def importances(study):
    import optuna
    try:
        import sklearn  # noqa: F401
        ev = None       # optuna's default (fANOVA)
    except ImportError:
        ev = anova_importance()
    return optuna.importance.get_param_importances(study, evaluator=ev)


def plot(study, out):
    """history.png and importance.png; returns their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    done = [t for t in study.trials if t.value is not None]
    paths = []
    fig, ax = plt.subplots(figsize=(6, 3.6))
    xs = [t.number for t in done]
    ys = [t.value for t in done]
    best = []
    for v in ys:
        best.append(v if not best else max(best[-1], v))
    ax.plot(xs, ys, "o", label="trial", alpha=0.7)
    ax.plot(xs, best, "-", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel("throughput (MB/s)")
    ax.set_title("Optimisation history (TPE)")
    ax.legend()
    p = common.save_fig(fig, out, "history.png")
    paths.append(p)
    if len(done) >= 2:
        imp = importances(study)
        fig, ax = plt.subplots(figsize=(6, 3.6))
        names = list(imp)[::-1]
        ax.barh(names, [imp[n] for n in names])
        ax.set_xlabel("importance (share of throughput variance)")
        ax.set_title("Parameter importance")
        p = common.save_fig(fig, out, "importance.png")
        paths.append(p)
    return paths


def tune(dataset, out, trials=20, trial_seconds=5.0, warmup=1,
         serve_latency_ms=None, loader="cogfeed", batch_size=None,
         patch_sizes=(128, 256, 512), samplers=None, seed=0,
         baseline_workers=(1, 2, 4, 8), max_cache_frac=0.25,
         log=sys.stderr):
    import optuna
    if batch_size is None:  # the Loader's (the C table's)
        batch_size = bench.table_default("batch_size")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    os.makedirs(out, exist_ok=True)
    var = variants(dataset)
    names = sorted(var)
    first = {n: common.cog_shape(v[0][0]) for n, v in var.items()}
    side = min(min(s[0], s[1]) for s in first.values())
    psz = [p for p in patch_sizes if p <= side] or [side]
    if samplers is None:
        samplers = ("random", "blocked", "grid") if loader == "baseline" \
            else ("random", "blocked", "tile-shuffle")
    cache_mb = cache_choices(min(decoded_bytes(v[0]) for v in var.values()),
                             max_cache_frac)
    # jpeg/webp variants hold 8-bit samples, the others 16-bit.
    itemsize = {n: s[3] for n, s in first.items()}

    def objective_with(url, logpath, transport):
        def objective(trial):
            vname = trial.suggest_categorical("variant", names)
            s = {"patch_size": trial.suggest_categorical("patch_size", psz),
                 "sampler": trial.suggest_categorical("sampler",
                                                      list(samplers)),
                 "batch_size": batch_size, "seed": seed}
            kw = {}
            if loader == "cogfeed":
                mi = trial.suggest_categorical("concurrency",
                                               list(CONCURRENCY))
                s["concurrency"] = None if mi == "adaptive" else int(mi)
                # cogfeed's reader threads each read and decode one patch
                # at a time, so with adaptive concurrency they bound the
                # patches in flight: "auto" (the loader's default: 64 for
                # remote files) must be among the choices.
                dt = trial.suggest_categorical("decode_threads",
                                               list(DECODE_THREADS))
                s["decode_threads"] = None if dt == "auto" else int(dt)
                s["prefetch"] = trial.suggest_int("prefetch", 2, 8)
                s["cache_bytes"] = trial.suggest_categorical(
                    "cache_mb", cache_mb) << 20
            else:
                kw["baseline_workers"] = trial.suggest_categorical(
                    "workers", list(baseline_workers))
                kw["baseline_prefetch"] = trial.suggest_int(
                    "prefetch_factor", 1, 4)
            imgs, msks = var[vname]
            r = bench.run_on([url(p) for p in imgs],
                             [url(p) for p in msks] if msks else None,
                             loader, s, seconds=trial_seconds, warmup=warmup,
                             transport=transport, log=logpath,
                             latency_ms=serve_latency_ms,
                             itemsize=itemsize[vname],
                             **kw)
            trial.set_user_attr("settings", r["settings"])
            res = {k: r[k] for k in (
                "mb_per_s", "patches_per_s", "requests_per_s",
                "cpu_s_per_gb", "peak_rss_mb", "fetch_ratio")}
            st = r.get("loader_stats") or {}
            res["cache_hit_rate"] = st.get("cache_hit_rate")
            trial.set_user_attr("result", res)
            if log:
                log.write("tune: trial %d/%d: %.1f MB/s  %s\n" % (
                    trial.number + 1, trials, r["mb_per_s"],
                    json.dumps(trial.params)))
            return r["mb_per_s"]
        return objective

    study = optuna.create_study(
        direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=seed,
                                           n_startup_trials=min(10, trials)))
    if serve_latency_ms is None:
        study.optimize(objective_with(lambda p: p, None, "file"),
                       n_trials=trials)
    else:
        allf = [p for v in var.values() for p in v[0] + (v[1] or [])]
        with common.served(allf, serve_latency_ms) as (srv, url):
            study.optimize(objective_with(url, common.access_log(srv),
                                          "http"), n_trials=trials)
    done = [t for t in study.trials if t.value is not None]
    if not done:
        raise RuntimeError("tune: no trial completed")
    best = study.best_trial
    imgs, msks = var[best.params["variant"]]
    cfg = {k: v for k, v in best.user_attrs["settings"].items()
           if k in common.LOADER_KEYS and v is not None}
    cfg["images"] = [os.path.abspath(p) for p in imgs]
    if msks:
        cfg["masks"] = [os.path.abspath(p) for p in msks]
    cfg["variant"] = os.path.abspath(os.path.join(dataset,
                                                  best.params["variant"]))
    with open(os.path.join(out, "best.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
    keys = sorted({k for t in study.trials for k in t.params})
    with open(os.path.join(out, "trials.csv"), "w", newline="") as f:
        w = csv.writer(f)
        # (No per-trial RSS: all trials share one process.)
        extra = ("fetch_ratio", "cache_hit_rate", "requests_per_s",
                 "cpu_s_per_gb")
        w.writerow(["number", "state", "mb_per_s", "seconds"] + keys +
                   list(extra))
        for t in study.trials:
            dur = t.duration.total_seconds() if t.duration else ""
            res = t.user_attrs.get("result", {})
            w.writerow([t.number, t.state.name,
                        "" if t.value is None else "%.3f" % t.value,
                        "%.2f" % dur if dur != "" else ""] +
                       [t.params.get(k, "") for k in keys] +
                       ["" if res.get(k) is None else "%.4g" % res[k]
                        for k in extra])
    plots = plot(study, out)
    return {"best": cfg, "best_mb_per_s": best.value,
            "best_params": best.params, "trials": len(study.trials),
            "plots": plots, "study": study}


def main(argv):
    p = argparse.ArgumentParser(
        prog="cogfeed tune",
        description="Optuna TPE search over dataset variants and loader "
                    "settings; writes best.json, trials.csv and plots.")
    p.add_argument("dataset", help="folder of variants "
                   "(DIR/<compress>_<tile>/images, masks) or one dataset")
    p.add_argument("--out", default="tune-out",
                   help="folder for best.json, trials.csv and the plots "
                        "(default tune-out)")
    p.add_argument("--trials", type=int, default=20,
                   help="number of trials (default 20)")
    p.add_argument("--trial-seconds", type=float, default=5.0,
                   help="measured seconds per trial")
    p.add_argument("--warmup", type=int, default=1,
                   help="batches skipped before each trial's clock starts "
                        "(default 1)")
    p.add_argument("--serve-latency-ms", type=int, default=None,
                   help="tune for remote reads: serve DATASET with nginx "
                        "at this latency")
    p.add_argument("--loader", choices=("cogfeed", "baseline"),
                   default="cogfeed",
                   help="tune cogfeed's Loader (default) or the "
                        "paper-style baseline")
    p.add_argument("--batch-size", type=int,
                   default=bench.table_default("batch_size"),
                   help="patches per batch, fixed (the Loader's: %s)"
                   % bench.table_help("batch_size"))
    p.add_argument("--patch-sizes", default="128,256,512",
                   help="comma list of patch sizes tried (default "
                        "128,256,512)")
    p.add_argument("--samplers", default=None,
                   help="comma list (default: random,blocked,tile-shuffle)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the search (default 0)")
    p.add_argument("--max-cache-frac", type=float, default=0.25,
                   help="largest tile cache tried, as a fraction of the "
                        "decoded dataset (default 0.25, so that a small "
                        "dataset cannot win by fitting in the cache)")
    a = p.parse_args(argv)
    try:
        r = tune(a.dataset, a.out, a.trials, a.trial_seconds, a.warmup,
                 a.serve_latency_ms, a.loader, a.batch_size,
                 tuple(int(x) for x in a.patch_sizes.split(",")),
                 tuple(a.samplers.split(",")) if a.samplers else None,
                 a.seed, max_cache_frac=a.max_cache_frac)
    except (FileNotFoundError, ValueError, RuntimeError) as e:
        sys.stderr.write("cogfeed tune: %s\n" % e)
        return 1
    print("best: %.1f MB/s with %s" % (r["best_mb_per_s"],
                                        json.dumps(r["best_params"])))
    print("wrote %s, trials.csv, %s" % (
        os.path.join(a.out, "best.json"),
        ", ".join(os.path.basename(x) for x in r["plots"])))
    return 0

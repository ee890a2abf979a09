"""The loader over a link with a slow tail, with hedged requests and
without, side by side in one run on the same files.

Object stores answer most GETs in one round trip and a few much later
(an overloaded partition, a lost packet, a slow disk).  The loader hands
batches out in order, so a patch whose request is late holds its batch
back while the readers behind it run out of ring slots.  The project's
nginx adds --latency-ms to every response and, with --tail SHARE:SECONDS,
that many seconds more to a random SHARE of them.  Each round runs the
Loader (blocked 512 px, batch 16, defaults) with hedging at its default
(hedge_after_ms=0: a request with no first byte after the 95th
percentile of recent first-byte times, or twice their median, is sent
again) and off (hedge_after_ms=-1), in alternating order.

  PYTHONPATH=BUILD/python .venv/bin/python bench/tail_bench.py \\
      [--data DIR] [--tail 0:0 --tail 0.01:1 --tail 0.002:2] \\
      [--rounds 2] [--seconds 10] [--json OUT]

DIR as bench/loader_bench.py --targets uses it (DIR/lerc_zstd_512 with
images/ and masks/); without --data the same files are made in a
temporary folder.
"""

import argparse
import glob
import json
import os
import sys

import cogfeed
from cogfeed.tools import bench, common, servers as srvmod

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loader_bench import targets_lerc_data  # noqa: E402


def run(urls, murls, hedge, seconds, warmup):
    ld = cogfeed.Loader(urls, murls, patch_size=512, batch_size=16,
                        sampler="blocked", epoch_length=bench.STREAM_EPOCH,
                        io_options={"hedge_after_ms": hedge})
    try:
        r = bench.measure(common._Cogfeed(ld), seconds=seconds,
                          warmup=warmup, itemsize=2)
        st = ld.stats()
    finally:
        ld.close()
    return {"hedge_after_ms": hedge, "mb_per_s": r["mb_per_s"],
            "patches_per_s": r["patches_per_s"], "requests": st["requests"],
            "hedges": st["hedges"], "hedge_wins": st["hedge_wins"],
            "concurrency": st["concurrency"]}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data",
                   help="folder with images/ and masks/ (LERC_ZSTD 512), "
                        "or the --data of loader_bench.py --targets that "
                        "holds it (default: made in a temporary folder, "
                        "about a minute)")
    p.add_argument("--latency-ms", type=float, default=164)
    p.add_argument("--tail", action="append",
                   help="SHARE:SECONDS of the slow tail (repeatable; "
                        "default 0:0, 0.01:1, 0.002:2)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--warmup", type=int, default=24)
    p.add_argument("--json")
    a = p.parse_args(argv)
    tails = [tuple(float(v) for v in t.split(":"))
             for t in (a.tail or ["0:0", "0.01:1", "0.002:2"])]
    a.data, tmp = targets_lerc_data(a.data, "cf-tail-bench-")
    images = sorted(glob.glob(os.path.join(a.data, "images", "*.tif")))
    masks = sorted(glob.glob(os.path.join(a.data, "masks", "*.tif")))
    if not images:
        p.error("no images under %s/images" % a.data)
    results = []
    print("%-14s %-7s %9s %9s %8s %8s %8s" % (
        "tail", "hedging", "MB/s", "patch/s", "requests", "hedges", "won"))
    for share, secs in tails:
        with srvmod.Nginx(a.data, latency_ms=a.latency_ms,
                          tail=(share, secs) if share > 0 else None,
                          workers=max(1, (os.cpu_count() or 1) // 4)) as srv:
            def url(path):
                return srv.url(os.path.relpath(path, a.data))
            urls = [url(x) for x in images]
            murls = [url(x) for x in masks] or None
            for rnd in range(a.rounds):
                order = (0, -1) if rnd % 2 == 0 else (-1, 0)
                for hedge in order:
                    r = run(urls, murls, hedge, a.seconds, a.warmup)
                    r.update({"tail_share": share, "tail_s": secs,
                              "round": rnd + 1})
                    results.append(r)
                    print("%-14s %-7s %9.1f %9.1f %8d %8d %8d" % (
                        "%g%% +%gs" % (share * 100, secs) if share else "none",
                        "on" if hedge == 0 else "off", r["mb_per_s"],
                        r["patches_per_s"], r["requests"], r["hedges"],
                        r["hedge_wins"]))
                    sys.stdout.flush()
    print("\nhedging on / off (mean over rounds):")
    for share, secs in tails:
        on = [r["mb_per_s"] for r in results if r["tail_share"] == share
              and r["tail_s"] == secs and r["hedge_after_ms"] == 0]
        off = [r["mb_per_s"] for r in results if r["tail_share"] == share
               and r["tail_s"] == secs and r["hedge_after_ms"] == -1]
        print("  %-14s %.2f  (%.1f / %.1f MB/s)" % (
            "%g%% +%gs" % (share * 100, secs) if share else "no tail",
            (sum(on) / len(on)) / (sum(off) / len(off)),
            sum(on) / len(on), sum(off) / len(off)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"latency_ms": a.latency_ms, "runs": results}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""cogfeed.predict under torchrun against one process, on one machine: the
time of the whole call and whether the COG is the same bytes (issue 29,
"Many machines"; docs/inference.md, "Several processes or machines").

    PYTHONPATH=build/python .venv/bin/python bench/distributed_predict_bench.py \
        [--size 4096] [--ranks 2] [--outputs probabilities,classes] \
        [--compression deflate] [--repeat 2] [--store local|s3] [--json OUT]

--store s3 writes to moto's S3 server on 127.0.0.1 (SigV4 enforced,
tests/servers/moto_server.py) instead of a local file: one process
streams the object; the ranks each upload their own tiles as parts of one
multipart upload, and each rank's bytes put (and those that came to it
from other ranks) are read from its log line.  Loopback, no link limit:
the times show the CPU cost of the way, the bytes what each rank's link
carries.

Input: a size x size 3-band uint8 COG (512 px tiles, DEFLATE), made in a
temporary folder and read once before the timings, so every run is warm
(the input in the page cache).  Model: 4 scores from the 3 bands in exact
float32 arithmetic (tests/python/predict_ddp_worker.py's), cheap, so the
run measures reading, blending, encoding and the assembly, not a model.

Each way runs in fresh processes, `repeat` times, best kept:
  one process   cogfeed.predict(model, src, out, patch_size=512,
                overlap=64, batch_size=8, output=..., compression=...)
  N ranks       the same with distributed=True under
                `python -m torch.distributed.run --standalone
                --nproc_per_node=N` (gloo, CPU): the ranks blend and
                encode their shares, rank 0 copies their tiles and makes
                the overviews; the time is rank 0's, from the call to a
                barrier after it.
On a machine with fewer cores than ranks x the Loader's threads the ranks
compete for the cores: the figure is the assembly's cost there, not a
scaling curve.
"""
import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = r'''
import logging, sys, time
import torch, torch.distributed as dist
import cogfeed
def model(x):
    r, g, b = x[:, 0], x[:, 1], x[:, 2]
    return torch.stack([r + g, g - 0.5 * b, 0.25 * b + 3, r - 2 * b], 1)
src, out, output, compression, ranks = sys.argv[1:6]
dist_on = ranks != "1"
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
if dist_on:
    dist.init_process_group("gloo")
t = time.perf_counter()
cogfeed.predict(model, src, out, patch_size=512, overlap=64, batch_size=8,
                output=output, compression=compression, progress=False,
                distributed=dist_on)
if dist_on:
    dist.barrier()
if not dist_on or dist.get_rank() == 0:
    print("SECONDS %.3f" % (time.perf_counter() - t), flush=True)
if dist_on:
    dist.destroy_process_group()
'''


def make_scene(path, n):
    import numpy as np

    import cogfeed
    rng = np.random.default_rng(3)
    g = cogfeed.Grid(32633, width=n, height=n,
                     geotransform=(500000.0, 10.0, 0.0, 5000000.0, 0.0, -10.0))
    with cogfeed.Writer(path, n, n, 3, "uint8", grid=g, tile_size=512,
                        compression="deflate") as w:
        for y in range(0, n, 512):
            h = min(512, n - y)
            yy, xx = np.mgrid[y:y + h, 0:n]
            a = np.stack([(xx * (b + 1) + yy * 2 + rng.integers(0, 40, (h, n))) % 256
                          for b in range(3)]).astype(np.uint8)
            w.write(a, 0, y)


def run(worker, src, out, output, compression, ranks):
    if ranks == 1:
        cmd = [sys.executable, worker]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node=%d" % ranks, worker]
    r = subprocess.run(cmd + [src, out, output, compression, str(ranks)],
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit("run failed (%d ranks):\n%s%s" % (ranks, r.stdout[-3000:],
                                                           r.stderr[-3000:]))
    put = {int(m[0]): {"parts": int(m[1]), "bytes_put": int(m[2]), "bytes_from_others":
                       int(m[3])} for m in re.findall(
        r"rank (\d+) put (\d+) of the \d+ parts of \S+ \((\d+) bytes, (\d+) of them",
        r.stdout)}
    secs = float([ln for ln in r.stdout.splitlines() if ln.startswith("SECONDS")][0].split()[1])
    return secs, put


class S3:
    """moto on 127.0.0.1 with a bucket; its credentials in os.environ."""

    def __enter__(self):
        sys.path.insert(0, os.path.join(HERE, "..", "tests", "servers"))
        from moto_server import Moto
        self.m = Moto().start()
        key_id, secret = self.m.setup("bench", {})
        os.environ.update(AWS_ENDPOINT_URL=self.m.endpoint, AWS_REGION=self.m.region,
                          AWS_ACCESS_KEY_ID=key_id, AWS_SECRET_ACCESS_KEY=secret)
        import boto3
        self.s3 = boto3.client("s3", endpoint_url=self.m.endpoint,
                               region_name=self.m.region, aws_access_key_id=key_id,
                               aws_secret_access_key=secret)
        return self

    def get(self, key):
        return self.s3.get_object(Bucket="bench", Key=key)["Body"].read()

    def __exit__(self, *exc):
        self.m.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--outputs", default="probabilities,classes")
    ap.add_argument("--compression", default="deflate")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--store", choices=("local", "s3"), default="local")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="cogfeed-dbench-") as d, \
            (S3() if a.store == "s3" else contextlib.nullcontext()) as store:
        src = os.path.join(d, "scene.tif")
        make_scene(src, a.size)
        with open(src, "rb") as f:  # warm: in the page cache
            while f.read(1 << 24):
                pass
        worker = os.path.join(d, "worker.py")
        with open(worker, "w") as f:
            f.write(WORKER)
        for output in a.outputs.split(","):
            outs = {}
            for ranks in (1, a.ranks):
                key = "out_%d.tif" % ranks
                out = "s3://bench/" + key if store else os.path.join(d, key)
                best, put = min(run(worker, src, out, output, a.compression, ranks)
                                for _ in range(a.repeat))
                if store:
                    outs[ranks] = store.get(key)
                else:
                    with open(out, "rb") as f:
                        outs[ranks] = f.read()
                rows.append({"output": output, "ranks": ranks, "seconds": best,
                             "state": "warm (input in the page cache)", "store": a.store,
                             "out_bytes": len(outs[ranks]), "ranks_put": put})
                print("%-13s %d rank(s): %.2f s%s" % (output, ranks, best, "".join(
                    "; rank %d put %d parts, %.1f MB (%.1f MB from others)"
                    % (r, v["parts"], v["bytes_put"] / 1e6, v["bytes_from_others"] / 1e6)
                    for r, v in sorted(put.items()))), flush=True)
            same = outs[1] == outs[a.ranks]
            rows.append({"output": output, "identical": same,
                         "ratio_one_over_ranks": rows[-2]["seconds"] / rows[-1]["seconds"]})
            print("%-13s identical: %s, one process / %d ranks: %.2fx"
                  % (output, same, a.ranks, rows[-1]["ratio_one_over_ranks"]), flush=True)
    res = {"size": a.size, "ranks": a.ranks, "compression": a.compression, "store": a.store,
           "cpus": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
           "when": time.strftime("%Y-%m-%d %H:%M:%S"), "results": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

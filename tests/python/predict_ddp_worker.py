"""One rank of tests/python/test_predict_distributed.py, started by
torchrun: predict over SRC into OUT with a fixed model, under a gloo
process group.  Usage: predict_ddp_worker.py SRC OUT OUTPUT [FAIL_RANK [PATCH
[MASK [COMPRESSION]]]] (FAIL_RANK: that rank's model raises, to check
that every rank ends, -1 for none; PATCH: the patch size, 256; MASK: 1
for mask=True; COMPRESSION: the output's, deflate)."""
import logging
import sys

import torch
import torch.distributed as dist

import cogfeed


SEEN = [0]  # patches this process's model ran


def model_for(rank, fail_rank):
    """4 scores from the 3 bands in exact float32 arithmetic (sums of
    small multiples of integers): the same bits whatever the batch and the
    thread count (torchrun sets OMP_NUM_THREADS=1; a convolution's sums
    would round differently), so any difference is cogfeed's."""
    def run(x):
        if rank == fail_rank:
            raise RuntimeError("model failed on rank %d" % rank)
        SEEN[0] += x.shape[0]
        r, g, b = x[:, 0], x[:, 1], x[:, 2]
        return torch.stack([r + g, g - 0.5 * b, 0.25 * b + 3, r - 2 * b], 1)
    return run


def main():
    src, out, output = sys.argv[1:4]
    fail_rank = int(sys.argv[4]) if len(sys.argv) > 4 else -1
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
    dist.init_process_group("gloo")
    try:
        patch = int(sys.argv[5]) if len(sys.argv) > 5 else 256
        mask = len(sys.argv) > 6 and sys.argv[6] == "1"
        compression = sys.argv[7] if len(sys.argv) > 7 else "deflate"
        cogfeed.predict(model_for(dist.get_rank(), fail_rank), src, out,
                        patch_size=patch, overlap=48, batch_size=4,
                        output=output, progress=False, distributed=True,
                        mask=mask, compression=compression)
        print("rank %d ran %d patches" % (dist.get_rank(), SEEN[0]), flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""cogfeed.torch: cogfeed.Loader as a PyTorch IterableDataset.

    ds = cogfeed.torch.CogDataset(images, masks, patch_size=256,
                                  batch_size=32, sampler="blocked",
                                  dtype="float32", device="cuda")
    dl = torch.utils.data.DataLoader(ds, batch_size=None)
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        for batch in dl:
            x, y = batch["image"], batch["mask"]   # already on the GPU

The dataset yields whole batches (hence ``batch_size=None``; another
batch_size gets a warning).  One cogfeed loader already reads many patches
at once from one process, so ``num_workers=0`` is the intended setting;
with workers, every worker reads its own disjoint shard.  ``len(ds)`` is
the number of batches the DataLoader holding it yields per epoch (tqdm and
OneCycleLR need it), for any number of workers.
"""

import gc
import multiprocessing
import os
import warnings
from multiprocessing import context as _mp_context

import torch
from torch.utils.data import IterableDataset, get_worker_info

from .grid import Grid
from .loader import Loader

try:
    # A batch's "grid" is a list of cogfeed.Grid: torch's default_collate
    # (a DataLoader given a batch_size, which is warned about) keeps them
    # as lists instead of failing on an unknown type.
    from torch.utils.data._utils.collate import default_collate_fn_map

    def _collate_grids(batch, *, collate_fn_map=None):
        return list(batch)

    default_collate_fn_map.setdefault(Grid, _collate_grids)
except ImportError:  # older torch: no extensible collate
    pass


def _dist_rank_world():
    """(rank, world_size) from an initialised process group, else from the
    RANK / WORLD_SIZE environment variables, else (0, 1)."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:  # torch built without distributed support
        pass
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


# Unsigned types this torch cannot hold, and the next wider signed type
# that holds every value.
_WIDEN = {"uint16": "int32", "uint32": "int64"}


def _tensor(arr):
    """torch.from_numpy without a copy; a lossless widening copy for
    uint16/uint32.  Widened on every torch version: torch >= 2.3 can hold
    uint16 but few operations accept it, and a batch's dtype should not
    depend on the torch version."""
    wide = _WIDEN.get(arr.dtype.name)
    if wide is not None:
        return torch.from_numpy(arr.astype(wide))
    try:
        return torch.from_numpy(arr)
    except TypeError:
        raise TypeError("torch cannot hold %s; use dtype='float32'" %
                        arr.dtype.name) from None


class CogDataset(IterableDataset):
    """Batches of COG patches as torch tensors, for
    ``torch.utils.data.DataLoader(dataset, batch_size=None)``.

    Tensors share memory with the loader (torch.from_numpy) except for
    uint16/uint32 data, which torch cannot hold: those are widened to
    int32/int64 (a copy); dtype="float32" is the zero-copy path for them.

    Each item is a dict: ``"image"`` (B, C, H, W) (or (B, T, C, H, W)),
    ``"mask"`` (B, 1, H, W) when masks are given, ``"windows"``,
    ``"grid"`` (each sample's cogfeed.Grid), ``"augment"``, ``"index"``,
    ``"epoch"`` as in cogfeed.Loader.

    Sharding is automatic: the shard of a DataLoader worker w of W in
    process rank r of R (rank/world size from torch.distributed when
    initialised, else RANK/WORLD_SIZE) is r * W + w of R * W; shards are
    disjoint and together cover the epoch.  DataLoader workers are not
    part of the process group: they use the rank the main process saw
    when the dataset was made or set_epoch was last called, so make the
    dataset (or call set_epoch) after init_process_group.

    Arguments:
        images, masks: as cogfeed.Loader.
        pin_memory: read straight into pinned (page-locked) host memory
            when CUDA is available, so that ``.cuda(non_blocking=True)``
            needs no further host copy (main process only; default False).
            A ring slot is reused as soon as the next batch is asked for,
            so before that the dataset waits for the work queued on the
            current CUDA stream (which holds your copy of the batch).
        device: "cuda" / a torch.device: copy each batch to that device on
            a side stream, from pinned ring memory (implies pin_memory),
            and hand out device tensors; the consumer's stream waits for
            the copy, and a ring slot is reused once its copy is done
            (not the whole training step).  Main process only; default
            None (CPU tensors).
        copy: give every batch its own memory.  Default: False in the main
            process (tensors view the ring: valid until the next batch),
            True in DataLoader workers (whose batches are sent to the main
            process after the worker has moved on).
        epoch: first epoch (default 0); see set_epoch.
        **loader_kwargs: any other cogfeed.Loader argument (patch_size,
            batch_size, sampler, seed, flip, rot90, dtype, mean, std,
            skip_errors, prefetch, concurrency, ...); rank and world_size
            are set from the DataLoader and torch.distributed.
    """

    def __init__(self, images, masks=None, *, pin_memory=False, device=None,
                 copy=None, epoch=0, **loader_kwargs):
        super().__init__()
        for k in ("rank", "world_size"):
            if k in loader_kwargs:
                raise ValueError("CogDataset sets %s itself (from "
                                 "torch.distributed / RANK, WORLD_SIZE)" % k)
        self.images = images
        self.masks = masks
        self.device = None if device is None else torch.device(device)
        if self.device is not None and self.device.type == "cpu":
            self.device = None
        self.pin_memory = bool(pin_memory) or self.device is not None
        self.copy = copy
        self.epoch = int(epoch)
        # Workers read the epoch from shared memory: persistent workers
        # keep their copy of the dataset from one epoch to the next, and
        # would not see set_epoch otherwise.
        try:
            self._epoch_shared = multiprocessing.RawValue("q", self.epoch)
        except OSError:  # no shared memory here: set_epoch reaches new
            self._epoch_shared = None  # workers only
        # Workers are outside the process group: they shard by the rank
        # the main process saw.
        self._rank_world = _dist_rank_world()
        self.loader_kwargs = dict(loader_kwargs)
        # The main process keeps its loader from one iteration to the next,
        # so that epochs run into each other (see Loader); workers make
        # theirs per iteration.
        self._ld, self._ld_pid = None, None
        self._iterating = False
        self._resume = None  # load_state_dict's state, for the next iteration
        self._len = {}  # (workers, rank, world_size): batches per epoch
        self._warned = set()  # DataLoaders warned about their batch_size

    # -- length, and the DataLoader this dataset is in ----------------------

    def _dataloaders(self):
        """The torch DataLoaders whose dataset this is (found through the
        garbage collector's referrers: a DataLoader tells its dataset
        nothing, yet len() depends on its num_workers)."""
        from torch.utils.data import DataLoader
        found = []
        for r in gc.get_referrers(self):
            if isinstance(r, DataLoader):
                cands = [r]
            elif isinstance(r, dict):  # an instance's __dict__
                cands = [o for o in gc.get_referrers(r)
                         if isinstance(o, DataLoader) and getattr(o, "__dict__", None) is r]
            else:
                continue
            found += [d for d in cands if d.dataset is self and d not in found]
        return found

    def _check_dataloaders(self):
        """The DataLoaders holding this dataset; warns (once per DataLoader)
        about one whose batch_size is not None."""
        loaders = self._dataloaders()
        for dl in loaders:
            if dl.batch_size is not None and id(dl) not in self._warned:
                self._warned.add(id(dl))
                bs = self.loader_kwargs.get("batch_size", 32)
                warnings.warn(
                    "CogDataset yields whole batches: use DataLoader(dataset, "
                    "batch_size=None).  With batch_size=%d the DataLoader "
                    "stacks %d of them, so images come out (%d, %d, C, H, W) "
                    "instead of (%d, C, H, W)" % (dl.batch_size, dl.batch_size,
                                                   dl.batch_size, bs, bs),
                    UserWarning, stacklevel=3)
        return loaders

    def __len__(self):
        """Batches per epoch of the DataLoader holding this dataset (or, in
        none, of iterating it in this process): the sum over the workers'
        shards, computed from the sampler (no data is read)."""
        loaders = self._check_dataloaders()
        workers = {dl.num_workers for dl in loaders}
        if len(workers) > 1:
            raise TypeError("len(CogDataset): DataLoaders with num_workers %s "
                            "hold this dataset, and its length depends on "
                            "the number of workers" % sorted(workers))
        nw = max(workers.pop() if workers else 0, 1)
        rank, world = _dist_rank_world()
        key = (nw, rank, world)
        if key not in self._len:
            ld = self._ld if self._ld is not None and self._ld_pid == os.getpid() else None
            probe = ld or Loader(self.images, self.masks, rank=0, world_size=1,
                                 epoch=self.epoch, **self.loader_kwargs)
            try:
                self._len[key] = sum(probe.shard_len(rank * nw + w, world * nw)
                                     for w in range(nw))
            finally:
                if probe is not ld:
                    probe.close()
        return self._len[key]

    def set_epoch(self, epoch):
        """Use epoch ``epoch`` for the next iteration (call it before each
        epoch, as with DistributedSampler; persistent workers see it too).
        In the main process it also takes the current rank and world size
        for the workers."""
        self.epoch = int(epoch)
        if get_worker_info() is None:
            if self._epoch_shared is not None:
                self._epoch_shared.value = self.epoch
            self._rank_world = _dist_rank_world()

    def state_dict(self):
        """Where the main process's iteration is (cogfeed.Loader.state_dict:
        epoch, next batch and what the stream depends on), for a
        checkpoint; before any iteration, the start of set_epoch's epoch."""
        if self._resume is not None:
            return dict(self._resume)
        ld = self._ld
        if ld is not None and self._ld_pid == os.getpid():
            return ld.state_dict()
        return {"epoch": self.epoch, "batch": 0}

    def load_state_dict(self, state):
        """Make the next iteration continue from `state` (a state_dict() of
        a dataset with the same settings).  Mid-epoch (batch > 0) needs the
        main process (num_workers=0): DataLoader workers split the epoch
        among themselves and start it from the top."""
        state = dict(state)
        self.set_epoch(int(state["epoch"]))
        self._resume = state if int(state.get("batch", 0)) > 0 else None

    def _current_epoch(self):
        """The epoch to read: in a worker the main process's latest."""
        s = self._epoch_shared
        if s is not None and get_worker_info() is not None:
            return int(s.value)
        return self.epoch

    def shard(self):
        """(rank, world_size) this process/worker reads."""
        info = get_worker_info()
        if info is None:
            nw, wid = 1, 0
            rank, world = _dist_rank_world()
        else:
            nw, wid = info.num_workers, info.id
            rank, world = self._rank_world
        return rank * nw + wid, world * nw

    def make_loader(self):
        """The cogfeed.Loader of this process/worker's shard."""
        rank, world = self.shard()
        in_worker = get_worker_info() is not None
        copy = self.copy if self.copy is not None else in_worker
        if self.device is not None and in_worker:
            raise ValueError("CogDataset(device=...) works in the main "
                             "process only (num_workers=0)")
        if self.device is not None and self.device.type != "cuda":
            raise ValueError("CogDataset: device %s is not a CUDA device"
                             % self.device)
        if self.device is not None and not torch.cuda.is_available():
            raise ValueError("CogDataset(device=%r): torch sees no CUDA "
                             "device" % str(self.device))
        ld = Loader(self.images, self.masks, rank=rank, world_size=world,
                    epoch=self._current_epoch(), copy=copy,
                    **self.loader_kwargs)
        if self.pinned(in_worker):
            lay = ld.layout
            for slot in range(lay["prefetch"]):
                img = torch.empty(lay["image_bytes"], dtype=torch.uint8,
                                  pin_memory=True)
                msk = (torch.empty(lay["mask_bytes"], dtype=torch.uint8,
                                   pin_memory=True)
                       if lay["has_mask"] else None)
                ld.set_buffers(slot, img.numpy(),
                               None if msk is None else msk.numpy())
                # The loader keeps the numpy views, which keep the tensors'
                # storage alive.
        return ld

    def pinned(self, in_worker=None):
        """Whether the ring slots are pinned host memory."""
        if in_worker is None:
            in_worker = get_worker_info() is not None
        return self.pin_memory and not in_worker and torch.cuda.is_available()

    def _loader(self):
        """This process's loader for self.epoch from its first batch: the
        one kept from the last iteration in the main process (its readers
        have been reading this epoch ahead when it is the next one), or a
        new one."""
        in_worker = get_worker_info() is not None
        if self._iterating:
            return self.make_loader()  # a second iterator at once: its own
        ld = self._ld
        if ld is not None and (in_worker or self._ld_pid != os.getpid()):
            ld = None  # a copy inherited by a worker / forked process
        if ld is None:
            ld = self.make_loader()
            if not in_worker:
                self._ld, self._ld_pid = ld, os.getpid()
            return ld
        st = ld.state_dict()
        if st["epoch"] != self.epoch or st["batch"] != 0:
            ld.set_epoch(self.epoch)
        return ld

    def _resumed(self, ld):
        """Apply load_state_dict's state to this iteration's loader."""
        state, self._resume = self._resume, None
        if state is None:
            return
        if get_worker_info() is not None:
            raise ValueError("CogDataset.load_state_dict mid-epoch (batch "
                             "%d) needs num_workers=0" % state["batch"])
        ld.load_state_dict(state)

    def __getstate__(self):
        # Sent to spawned DataLoader workers: they make their own loader.
        d = self.__dict__.copy()
        d["_ld"] = d["_ld_pid"] = None
        d["_iterating"] = False
        d["_warned"] = set(d["_warned"])
        if _mp_context.get_spawning_popen() is None:
            # Plain pickling (not to a new process): shared memory cannot
            # travel, and a copy has no workers to share the epoch with.
            d["_epoch_shared"] = None
        else:
            d["_rank_world"] = _dist_rank_world()
        return d

    def close(self):
        """Stop the kept loader's readers and free its ring."""
        ld, self._ld = self._ld, None
        if ld is not None and self._ld_pid == os.getpid():
            ld.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __iter__(self):
        if get_worker_info() is None or not self._warned:
            self._check_dataloaders()
        ld = self._loader()
        self._resumed(ld)
        kept = ld is self._ld
        if kept:
            self._iterating = True
        pinned = self.pinned()
        dev = self.device
        stream = torch.cuda.Stream(dev) if dev is not None else None
        # CUDA work that may still read the ring slot of the batch handed
        # out last; the loader reuses that slot when asked for the next.
        done = None
        try:
            while True:
                if done is not None:
                    done.synchronize()
                elif pinned:
                    # The caller's non_blocking copy is somewhere in the
                    # current stream's queue: wait for all of it.
                    torch.cuda.current_stream().synchronize()
                try:
                    b = next(ld)
                except StopIteration:
                    return
                out = {"image": _tensor(b["image"]),
                       "windows": b["windows"], "augment": b["augment"],
                       "grid": b["grid"],
                       "index": b["index"], "epoch": b["epoch"]}
                if "mask" in b:
                    out["mask"] = _tensor(b["mask"])
                if stream is not None:
                    done = self._to_device(out, stream)
                yield out
        finally:
            if kept:
                self._iterating = False
            else:
                ld.close()

    def _to_device(self, out, stream):
        """Copy the batch's tensors to self.device on `stream`; the
        consumer's stream waits for them.  Returns the copy's event."""
        consumer = torch.cuda.current_stream(self.device)
        # The copy does not wait for the consumer's queued work, so it
        # overlaps the training step; record_stream below keeps the
        # allocator from reusing the new tensors before the consumer is done.
        with torch.cuda.stream(stream):
            for k in ("image", "mask"):
                if k in out:
                    out[k] = out[k].to(self.device, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(stream)
        consumer.wait_event(ev)
        for k in ("image", "mask"):
            if k in out:
                # Allocated on the side stream, used on the consumer's:
                # the caching allocator must not reuse it before that
                # use is done.
                out[k].record_stream(consumer)
        return ev

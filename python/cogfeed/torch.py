"""cogfeed.torch: cogfeed.Loader as a PyTorch IterableDataset.

    ds = cogfeed.torch.CogDataset(images, masks, patch_size=256,
                                  batch_size=32, sampler="blocked",
                                  dtype="float32", device="cuda")
    dl = torch.utils.data.DataLoader(ds, batch_size=None)
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        for batch in dl:
            x, y = batch["image"], batch["mask"]   # already on the GPU

The dataset yields whole batches, hence ``batch_size=None``: a DataLoader
that batches them again (its default batch_size=1, or any other) raises
a TypeError saying so at its first batch, instead of stacking them into
(N, B, C, H, W).  One cogfeed loader already reads many patches at once
from one process, so ``num_workers=0`` is the intended setting; with
workers, every worker reads its own disjoint shard.  ``len(ds)`` is the
number of batches the DataLoader holding it yields per epoch (tqdm and
OneCycleLR need it), for any number of workers.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
from multiprocessing import context as _mp_context
from typing import (TYPE_CHECKING, Any, Dict, Iterator, List, Mapping,
                    Optional, Sequence, Tuple, TypedDict, Union, cast)

import torch
from torch.utils.data import IterableDataset, get_worker_info

from .grid import Grid
from .loader import Loader, LoaderOptions, LoaderState, StrPath, Window

if sys.version_info >= (3, 11):
    from typing import NotRequired, Unpack
elif TYPE_CHECKING:  # type checkers bundle typing_extensions' stubs
    from typing_extensions import NotRequired, Unpack

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["CogDataset", "TorchBatch"]


class TorchBatch(TypedDict):
    """A batch of CogDataset: cogfeed.Batch with tensors (see CogDataset)."""
    image: torch.Tensor
    mask: NotRequired[torch.Tensor]
    valid: NotRequired[torch.Tensor]
    dates: NotRequired[torch.Tensor]  # int64 seconds since 1970 UTC (B, T)
    date_valid: NotRequired[torch.Tensor]
    series: NotRequired[List[int]]
    windows: List[Window]
    augment: List[int]
    grid: List[Optional[Grid]]
    index: int
    epoch: int


class _Batch(Dict[str, Any]):
    """What CogDataset yields (a dict, typed as TorchBatch): its own type
    so that torch's default_collate can refuse to batch batches."""
    __slots__ = ()


def _refuse_collation(batch: Sequence[Mapping[str, Any]], *,
                      collate_fn_map: Optional[Dict[Any, Any]] = None) -> Any:
    """default_collate of a list of CogDataset batches: a DataLoader with a
    batch_size (its default is 1) would stack them into (N, B, C, H, W)."""
    shape = tuple(batch[0]["image"].shape) if batch else ()
    raise TypeError(
        "CogDataset yields whole batches (image %s): use "
        "DataLoader(dataset, batch_size=None).  A DataLoader with a "
        "batch_size (default 1; here %d) stacks them into (%d, %s)"
        % ("x".join(map(str, shape)), len(batch), len(batch),
           ", ".join(map(str, shape))))


try:
    # torch's default_collate dispatches on the element's type first: a
    # DataLoader with a batch_size (auto-collation) gets a TypeError naming
    # the fix.  batch_size=None does not collate (default_convert keeps a
    # dict subclass as it is).
    from torch.utils.data._utils.collate import default_collate_fn_map

    default_collate_fn_map[_Batch] = _refuse_collation

    # A batch's "grid" is a list of cogfeed.Grid: a user's default_collate
    # of their own samples holding Grids keeps them as lists.
    def _collate_grids(batch: Sequence[Grid], *,
                       collate_fn_map: Optional[Dict[Any, Any]] = None
                       ) -> List[Grid]:
        return list(batch)

    default_collate_fn_map.setdefault(Grid, _collate_grids)
except ImportError:  # older torch: no extensible collate
    pass


def _dist_rank_world() -> Tuple[int, int]:
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


def _tensor(arr: npt.NDArray[Any]) -> torch.Tensor:
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


class CogDataset(IterableDataset[TorchBatch]):
    """Batches of COG patches as torch tensors, for
    ``torch.utils.data.DataLoader(dataset, batch_size=None)`` (a DataLoader
    with a batch_size, its default 1 included, raises a TypeError at its
    first batch: it would stack the dataset's batches).

    Tensors share memory with the loader (torch.from_numpy) except for
    uint16/uint32 data, which torch cannot hold: those are widened to
    int32/int64 (a copy); dtype="float32" is the zero-copy path for them.

    Each item is a dict (typed cogfeed.torch.TorchBatch): ``"image"``
    (B, C, H, W) (or (B, T, C, H, W)),
    ``"mask"`` (B, 1, H, W) when masks are given, ``"valid"`` (B, 1, H, W)
    (time series: (B, T, H, W)) uint8 with ``valid_mask=True``, with dates (time series) ``"dates"``
    (B, T) int64 seconds since 1970 UTC and ``"date_valid"`` (B, T) bool,
    ``"windows"``,
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

    def __init__(
        self,
        images: Union[StrPath, Sequence[StrPath], Sequence[Sequence[StrPath]]],
        masks: Union[StrPath, Sequence[StrPath], None] = None,
        *,
        pin_memory: bool = False,
        device: Union[str, torch.device, None] = None,
        copy: Optional[bool] = None,
        epoch: int = 0,
        **loader_kwargs: Unpack[LoaderOptions],
    ) -> None:
        super().__init__()
        for k in ("rank", "world_size"):
            if k in loader_kwargs:
                raise ValueError("CogDataset sets %s itself (from "
                                 "torch.distributed / RANK, WORLD_SIZE)" % k)
        self.images = images
        self.masks = masks
        dev = None if device is None else torch.device(device)
        self.device: Optional[torch.device] = (
            None if dev is not None and dev.type == "cpu" else dev)
        self.pin_memory = bool(pin_memory) or self.device is not None
        self.copy = copy
        self.epoch = int(epoch)
        # Workers read the epoch from shared memory: persistent workers
        # keep their copy of the dataset from one epoch to the next, and
        # would not see set_epoch otherwise.
        self._epoch_shared: Any
        try:
            self._epoch_shared = multiprocessing.RawValue("q", self.epoch)
        except OSError:  # no shared memory here: set_epoch reaches new
            self._epoch_shared = None  # workers only
        # Workers are outside the process group: they shard by the rank
        # the main process saw.
        self._rank_world = _dist_rank_world()
        self.loader_kwargs: LoaderOptions = cast(LoaderOptions, dict(loader_kwargs))
        # The main process keeps its loader from one iteration to the next,
        # so that epochs run into each other (see Loader); workers make
        # theirs per iteration.
        self._ld: Optional[Loader] = None
        self._ld_pid: Optional[int] = None
        self._iterating = False
        # load_state_dict's state, for the next iteration
        self._resume: Optional[LoaderState] = None
        # (workers, rank, world_size): batches per epoch
        self._len: Dict[Tuple[int, int, int], int] = {}

    # -- length, and the DataLoader this dataset is in ----------------------

    def _dataloaders(self) -> List[Any]:
        """The torch DataLoaders whose dataset this is (found through the
        garbage collector's referrers: a DataLoader tells its dataset
        nothing, yet len() depends on its num_workers)."""
        from torch.utils.data import DataLoader
        found: List[Any] = []
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

    def __len__(self) -> int:
        """Batches per epoch of the DataLoader holding this dataset (or, in
        none, of iterating it in this process): the sum over the workers'
        shards, computed from the sampler (no data is read)."""
        workers = {dl.num_workers for dl in self._dataloaders()}
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

    def set_epoch(self, epoch: int) -> None:
        """Use epoch ``epoch`` for the next iteration (call it before each
        epoch, as with DistributedSampler; persistent workers see it too).
        In the main process it also takes the current rank and world size
        for the workers."""
        self.epoch = int(epoch)
        if get_worker_info() is None:
            if self._epoch_shared is not None:
                self._epoch_shared.value = self.epoch
            self._rank_world = _dist_rank_world()

    def state_dict(self) -> LoaderState:
        """Where the main process's iteration is (cogfeed.Loader.state_dict:
        epoch, next batch and what the stream depends on), for a
        checkpoint; before any iteration, the start of set_epoch's epoch
        (epoch and batch only)."""
        if self._resume is not None:
            return cast(LoaderState, dict(self._resume))
        ld = self._ld
        if ld is not None and self._ld_pid == os.getpid():
            return ld.state_dict()
        return {"epoch": self.epoch, "batch": 0}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Make the next iteration continue from `state` (a state_dict() of
        a dataset with the same settings).  A state of other settings
        (seed, sampler, files, batch size, ...) raises ValueError here,
        naming the first that differs, as cogfeed.Loader.load_state_dict:
        the check is the main process loader's own (made here, and kept for
        the next iteration).  Mid-epoch (batch > 0) needs the main process
        (num_workers=0): DataLoader workers split the epoch among
        themselves and start it from the top."""
        if "epoch" not in state:
            raise ValueError("CogDataset.load_state_dict: the state has no "
                             "'epoch' (keys: %s)" % ", ".join(sorted(state)))
        st = cast(LoaderState, dict(state, epoch=int(state["epoch"]),
                                    batch=int(state.get("batch", 0))))
        ld = self._main_loader()
        ld.load_state_dict(st)  # ValueError for another stream; seeks
        self.set_epoch(st["epoch"])
        self._resume = st if st["batch"] > 0 else None

    def _main_loader(self) -> Loader:
        """The loader kept in the main process (made now if there is none)."""
        if get_worker_info() is not None:
            raise RuntimeError("CogDataset: the main process's loader is not "
                               "a worker's")
        ld = self._ld
        if ld is None or self._ld_pid != os.getpid():
            ld = self.make_loader()
            self._ld, self._ld_pid = ld, os.getpid()
        return ld

    def _current_epoch(self) -> int:
        """The epoch to read: in a worker the main process's latest."""
        s = self._epoch_shared
        if s is not None and get_worker_info() is not None:
            return int(s.value)
        return self.epoch

    def shard(self) -> Tuple[int, int]:
        """(rank, world_size) this process/worker reads."""
        info = get_worker_info()
        if info is None:
            nw, wid = 1, 0
            rank, world = _dist_rank_world()
        else:
            nw, wid = info.num_workers, info.id
            rank, world = self._rank_world
        return rank * nw + wid, world * nw

    def make_loader(self) -> Loader:
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

    def pinned(self, in_worker: Optional[bool] = None) -> bool:
        """Whether the ring slots are pinned host memory."""
        if in_worker is None:
            in_worker = get_worker_info() is not None
        return bool(self.pin_memory and not in_worker and torch.cuda.is_available())

    def _loader(self) -> Loader:
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
        want = (self.epoch, 0 if self._resume is None else self._resume["batch"])
        if (st["epoch"], st["batch"]) != want:  # (load_state_dict's seek kept)
            ld.set_epoch(self.epoch)
        return ld

    def _resumed(self, ld: Loader) -> None:
        """Apply load_state_dict's state to this iteration's loader."""
        state, self._resume = self._resume, None
        if state is None:
            return
        if get_worker_info() is not None:
            raise ValueError("CogDataset.load_state_dict mid-epoch (batch "
                             "%d) needs num_workers=0" % state["batch"])
        pos = ld.state_dict()
        if (pos["epoch"], pos["batch"]) != (state["epoch"], state["batch"]):
            ld.load_state_dict(state)

    def __getstate__(self) -> Dict[str, Any]:
        # Sent to spawned DataLoader workers: they make their own loader.
        d = self.__dict__.copy()
        d["_ld"] = d["_ld_pid"] = None
        d["_iterating"] = False
        if _mp_context.get_spawning_popen() is None:
            # Plain pickling (not to a new process): shared memory cannot
            # travel, and a copy has no workers to share the epoch with.
            d["_epoch_shared"] = None
        else:
            d["_rank_world"] = _dist_rank_world()
        return d

    def close(self) -> None:
        """Stop the kept loader's readers and free its ring."""
        ld, self._ld = self._ld, None
        if ld is not None and self._ld_pid == os.getpid():
            ld.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __iter__(self) -> Iterator[TorchBatch]:
        ld = self._loader()
        self._resumed(ld)
        kept = ld is self._ld
        if kept:
            self._iterating = True
        pinned = self.pinned()
        dev = self.device
        stream = torch.cuda.Stream(dev) if dev is not None else None  # type: ignore[no-untyped-call]
        # CUDA work that may still read the ring slot of the batch handed
        # out last; the loader reuses that slot when asked for the next.
        done: Optional[torch.cuda.Event] = None
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
                out = _Batch(image=_tensor(b["image"]),
                             windows=b["windows"], augment=b["augment"],
                             grid=b["grid"],
                             index=b["index"], epoch=b["epoch"])
                for k in ("mask", "valid"):
                    if k in b:
                        out[k] = _tensor(b[k])
                if "dates" in b:
                    # small, and the loader's own: copies, on the CPU;
                    # seconds since 1970 UTC (padding: int64's minimum,
                    # numpy's NaT; date_valid tells)
                    out["dates"] = torch.from_numpy(b["dates"].astype("int64"))
                    out["date_valid"] = torch.from_numpy(b["date_valid"].copy())
                if "series" in b:
                    out["series"] = b["series"]
                if stream is not None:
                    done = self._to_device(out, stream)
                yield cast(TorchBatch, out)
        finally:
            if kept:
                self._iterating = False
            else:
                ld.close()

    def _to_device(self, out: Dict[str, Any],
                   stream: torch.cuda.Stream) -> torch.cuda.Event:
        """Copy the batch's tensors to self.device on `stream`; the
        consumer's stream waits for them.  Returns the copy's event."""
        consumer = torch.cuda.current_stream(self.device)
        # The copy does not wait for the consumer's queued work, so it
        # overlaps the training step; record_stream below keeps the
        # allocator from reusing the new tensors before the consumer is done.
        with torch.cuda.stream(stream):
            # "valid" is the loader's own (unpinned) memory: its copy
            # is synchronous, so the slot may be reused at once.
            for k in ("image", "mask", "valid"):
                if k in out:
                    out[k] = out[k].to(self.device, non_blocking=True)
            ev = torch.cuda.Event()  # type: ignore[no-untyped-call]
            ev.record(stream)
        consumer.wait_event(ev)
        for k in ("image", "mask", "valid"):
            if k in out:
                # Allocated on the side stream, used on the consumer's:
                # the caching allocator must not reuse it before that
                # use is done.
                out[k].record_stream(consumer)
        return ev

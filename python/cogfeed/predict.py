"""cogfeed.Stitcher and cogfeed.predict: a model run over a whole scene in
overlapping patches, the predictions blended and written as a COG.

    cogfeed.predict(model, "scene.tif", "classes.tif", patch_size=512,
                    overlap=64, blend="hann", batch_size=8, device="cuda")

or, in a loop of one's own:

    windows = cogfeed.grid_windows(w, h, 512, 64)
    with cogfeed.Stitcher("probs.tif", windows, channels=10, like="scene.tif") as st:
        for batch in loader:                      # sampler="grid", stride=448
            st.add_batch(model(batch["image"]), batch["windows"])

The C stitcher (cf_stitcher) keeps weighted sums per row of output tiles
and writes a row once every patch listed over it came, so memory follows
the rows of tiles in flight, not the scene (docs/writer.md).
"""

from __future__ import annotations

import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._cogfeed import _Stitcher
from .grid import Grid
from .writer import StrPath, _codec, _share_arg, _Sharing, _usable_cpus

__all__ = ["Stitcher", "grid_windows", "predict"]

_BLEND = {"mean": 0, "linear": 1, "hann": 2}
Rect = Tuple[int, int, int, int]


def grid_windows(width: int, height: int, patch_size: int,
                 overlap: int = 0) -> List[Rect]:
    """The windows (x, y, w, h) of the Loader's grid sampler over an image
    of width x height with stride patch_size - overlap: row by row, the
    last of each row and column moved back to end at the edge; an image
    smaller than a patch gets one window, clipped to it."""
    stride = patch_size - overlap
    if stride <= 0:
        raise ValueError("grid_windows: overlap %d must be below patch_size %d"
                         % (overlap, patch_size))

    def axis(n: int) -> List[int]:
        if n <= patch_size:
            return [0]
        k = -(-(n - patch_size) // stride) + 1
        return [min(i * stride, n - patch_size) for i in range(k)]

    pw, ph = min(patch_size, width), min(patch_size, height)
    return [(x, y, pw, ph) for y in axis(height) for x in axis(width)]


def _rect(window: Sequence[int]) -> Rect:
    """(x, y, w, h) from a window or a Loader's (file, x, y, w, h)."""
    t = tuple(int(v) for v in window)
    return t[-4:]  # type: ignore[return-value]


class Stitcher(_Sharing):
    """Stitcher(path, patches, channels, *, grid=None, like=None,
    width=None, height=None, blend="hann", overlap=0,
    output="probabilities", tile_size=512, compression="deflate",
    level=0, overviews="auto", max_error=0.0, io=None, part_size=0,
    mask=False, threads=None, share=None)

    compression: as cogfeed.Writer's, "lerc_zstd" with max_error (the
    largest error per probability) included; JPEG and WEBP are refused
    for float32 probabilities.  patches: every window (x, y, w, h) whose prediction will be added (a
    row of output tiles is written once all of its patches came; patches
    may come in any order).  channels: the predictions' channels.  blend:
    "mean", "linear" (a ramp over `overlap` pixels from each edge) or
    "hann" (sin^2 over the patch).  output: "probabilities" (float32, one
    band per channel, NaN where no patch came) or "classes" (uint8, the
    channel with the largest blended value, 255 where no patch came; its
    overviews by mode).  grid / like / width / height, and path, io and
    part_size for an object in S3 or Azure: as cogfeed.Writer.  add(...,
    valid=) leaves out of the blend the pixels whose input had no data;
    a pixel no patch reached with valid input is written as no patch
    came, and with mask=True the output carries an internal mask band
    (cogfeed.Writer's) that is valid where some patch did.  threads: None
    (one per CPU this process may use) or at most that many, to blend and
    encode a finished row's tiles and to make the overviews
    (cogfeed.Writer's `threads`).  share=(first row of tiles, rows of
    tiles): a share writer (cogfeed.Writer's share=), for one of several
    processes: only its rows of tiles are written (the rows beside them
    that its patches reach in part are dropped), and it finishes with
    share_build, share_carry and close.
    """

    def __init__(self, path: StrPath, patches: Iterable[Sequence[int]],
                 channels: int, *, grid: Optional[Grid] = None,
                 like: Any = None, width: Optional[int] = None,
                 height: Optional[int] = None, blend: str = "hann",
                 overlap: int = 0, output: str = "probabilities",
                 tile_size: int = 512, compression: str = "deflate",
                 level: int = 0, overviews: Union[str, int] = "auto",
                 max_error: float = 0.0, io: Any = None,
                 part_size: int = 0, mask: bool = False,
                 threads: Optional[int] = None,
                 share: Optional[Tuple[int, int]] = None) -> None:
        if threads is not None and int(threads) < 1:
            raise ValueError("Stitcher: threads %r: None (one per CPU) or at least 1"
                             % (threads,))
        share_row0, share_rows = _share_arg("Stitcher", share)
        if like is not None and grid is None:
            grid = Grid.like(like)
        if grid is not None:
            width = grid.width if width is None else width
            height = grid.height if height is None else height
        if width is None or height is None:
            raise ValueError("Stitcher: give width and height, grid= or like=")
        if blend not in _BLEND:
            raise ValueError("Stitcher: blend %r: one of %s" % (
                blend, ", ".join(_BLEND)))
        if output not in ("probabilities", "classes"):
            raise ValueError("Stitcher: output %r: 'probabilities' or "
                             "'classes'" % (output,))
        code, layer = _codec("Stitcher", compression)
        rects = np.array([_rect(p) for p in patches], dtype=np.int64)
        if rects.size == 0:
            raise ValueError("Stitcher: no patches listed")
        self.channels = int(channels)
        self.width, self.height = int(width), int(height)
        self.path = os.fspath(path)
        self._c: Optional[_Stitcher] = _Stitcher(
            path, self.width, self.height, int(tile_size), code,
            int(level), -1 if overviews == "auto" else int(overviews), grid,
            self.channels, _BLEND[blend], int(overlap), output == "classes",
            np.ascontiguousarray(rects.reshape(-1)), layer, float(max_error),
            io, int(part_size), bool(mask), 0 if threads is None else int(threads),
            share_row0, share_rows)

    def add(self, pred: Any, window: Sequence[int], valid: Any = None) -> None:
        """The prediction (channels, h, w) of window (x, y, w, h) (or a
        Loader's (file, x, y, w, h)); a torch tensor is taken too.  A
        window reaching past the image (an image smaller than a patch) is
        cropped to it.  valid (h, w) (or a Loader's batch["valid"][i], (1,
        h, w)): true or non-zero where the input had data; the rest is
        left out of the blend."""
        c = self._open()
        if hasattr(pred, "detach"):  # (bfloat16 has no numpy type)
            pred = pred.detach().float().cpu().numpy()
        a = np.asarray(pred, dtype=np.float32)
        if a.ndim == 2:
            a = a[None]
        x, y, w, h = _rect(window)
        if 0 <= x < self.width and 0 <= y < self.height:
            w, h = min(w, self.width - x), min(h, self.height - y)
        if a.ndim != 3 or a.shape[0] != self.channels or a.shape[1] < h \
                or a.shape[2] < w:
            raise ValueError("Stitcher.add: a prediction (%d, >=%d, >=%d) "
                             "expected, got %s" % (self.channels, h, w,
                                                   a.shape))
        plane = None
        if valid is not None:
            if hasattr(valid, "detach"):
                valid = valid.detach().cpu().numpy()
            v = np.asarray(valid)
            if v.ndim == 3 and v.shape[0] == 1:  # a Loader's (1, h, w)
                v = v[0]
            if v.ndim != 2 or v.shape[0] < h or v.shape[1] < w:
                raise ValueError("Stitcher.add: validity (>=%d, >=%d) expected, got %s"
                                 % (h, w, v.shape))
            plane = v[:h, :w]
            if plane.dtype not in (np.uint8, np.bool_):  # (C: non-zero is valid)
                plane = plane != 0
            plane = np.ascontiguousarray(plane).view(np.uint8)
        c.add(x, y, w, h, np.ascontiguousarray(a[:, :h, :w]), plane)

    def add_batch(self, preds: Any, windows: Sequence[Sequence[int]],
                  valid: Any = None) -> None:
        """add() for each of a batch (B, channels, h, w) and its windows
        (and validity (B, h, w), a Loader's batch["valid"])."""
        if hasattr(preds, "detach"):
            preds = preds.detach().float().cpu().numpy()
        if len(preds) != len(windows) or (valid is not None and len(valid) != len(preds)):
            raise ValueError("Stitcher.add_batch: %d predictions, %d windows%s: one of "
                             "each per patch" % (len(preds), len(windows), "" if valid is None
                                                 else ", %d validity planes" % len(valid)))
        if hasattr(valid, "detach"):
            valid = valid.detach().cpu().numpy()
        for p, win, v in zip(preds, windows, [None] * len(preds) if valid is None else valid):
            self.add(p, win, v)



def _share(tile_rows: int, rank: int, world: int) -> Tuple[int, int]:
    """The rows of output tiles [r0, r1) rank writes: contiguous, balanced."""
    return tile_rows * rank // world, tile_rows * (rank + 1) // world


def _band_roi(grid: Grid, y0: int, y1: int) -> Tuple[float, float, float, float]:
    """A bbox in the grid's CRS over pixel rows [y0, y1), widened by half
    a pixel so that every window over those rows meets it."""
    a, b, c, d, e, f = grid.transform
    xs, ys = [], []
    for px in (-0.5, grid.width + 0.5):
        for py in (y0 - 0.5, y1 + 0.5):
            xs.append(a * px + b * py + c)
            ys.append(d * px + e * py + f)
    return min(xs), min(ys), max(xs), max(ys)


def predict(model: Any, inputs: StrPath, out: StrPath,
            *, patch_size: int = 512, overlap: int = 64, blend: str = "hann",
            batch_size: int = 8, device: Any = None, output: str = "classes",
            progress: bool = True, compression: str = "deflate",
            mask: bool = False, distributed: bool = False,
            group_timeout_s: float = 6 * 3600, threads: Optional[int] = None,
            **loader_kwargs: Any) -> None:
    """Run `model` over a whole image in overlapping patches and write the
    blended predictions to `out` as a COG on the image's grid: a local
    file, or an object (s3://, gs://, az://) streamed to the store as rows of
    tiles are finished (cogfeed.Writer).

    inputs: an image file (path or URL).  The patches come from a
    cogfeed.Loader over it with the grid sampler (stride patch_size -
    overlap), float32, batch_size at a time; loader_kwargs go to it
    (bands=, layers= for a stack of files on its grid, io_options=, ...;
    cache_bytes defaults to the rows of input tiles two rows of patches
    share, so memory follows the rows, not the scene).  model: a
    callable taking a (B, C, H, W) torch
    tensor on `device` and returning (B, K, H, W) scores.  output:
    "classes" (uint8 argmax of the blended scores) or "probabilities"
    (float32, the blended scores).  A progress bar is drawn when tqdm is
    installed and progress is true.  The read, the model and the write
    overlap: the Loader reads the next batches on its threads while the
    model runs, and each batch's predictions are blended and finished rows
    encoded and written on a thread of their own (at most 2 batches
    behind).

    mask=True: the Loader says where the input has data (valid_mask: its
    nodata, internal masks, layers), predictions where it has none are
    left out of the blend, those pixels are written as no patch came (255
    or NaN), and `out` carries an internal mask band that is valid where
    the input had data (cogfeed.Writer(mask=True)).

    threads: the threads that blend and encode finished rows and make the
    overviews (cogfeed.Stitcher's and cogfeed.Writer's): None is one per
    CPU the process may use, or with distributed=True that divided among
    the machine's ranks (torchrun's LOCAL_WORLD_SIZE).

    distributed=True, under torchrun (torch.distributed initialised, world
    size N), every rank calls predict with the same arguments: the rows of output
    tiles are split into N contiguous shares, each rank runs the model
    over the windows that reach its share (windows across a boundary run
    on both ranks), blends and encodes them into a share writer of its
    own and makes its share's overview tiles there (the carries of the
    rows near the boundaries pass from rank to rank over a gloo group),
    then sends its tiles of every level to rank 0, which copies them
    into `out` without decoding or encoding any, or, for an object URL,
    uploads them itself as parts of one multipart upload (rank 0 lays out
    the header and completes the object): one COG equal byte for byte to
    the one-process result (docs/inference.md, "Several processes or
    machines").  Every wait of that exchange is bounded by
    group_timeout_s (rank 0 writes the whole output while the others
    wait).  A failure on any rank makes every rank raise, and nothing is
    written."""
    import torch.distributed as dist
    from . import open as _open

    if distributed and not (dist.is_available() and dist.is_initialized()):
        raise ValueError("predict: distributed=True needs torch.distributed "
                         "initialised (torchrun, init_process_group)")
    # The stitcher lists every grid window in advance: nothing may change
    # which windows the Loader reads.
    fixed = sorted(set(loader_kwargs) & {
        "sampler", "stride", "patch_size", "level", "skip_empty", "roi",
        "roi_crs", "epoch_length", "rank", "world_size", "drop_last",
        "grid", "epoch"})
    if fixed:
        raise ValueError("predict: %s would change the windows read (the "
                         "blend needs every grid window of the image)"
                         % ", ".join(fixed))
    if output not in ("probabilities", "classes"):
        raise ValueError("predict: output %r: 'probabilities' or 'classes'"
                         % (output,))
    if mask:
        if loader_kwargs.get("valid_mask") is False:
            raise ValueError("predict: mask=True reads the input's validity "
                             "(valid_mask=False given)")
        loader_kwargs = dict(loader_kwargs, valid_mask=True)

    src = os.fspath(inputs)
    with _open(src) as cog:
        grid = cog.grid(0)
        # The grid sampler goes down the image once: a decoded tile is
        # wanted again only by the next row of patches.  A cache of the
        # rows of input tiles two rows of patches share keeps every tile
        # decoded once; the default (5% of RAM) would fill with tiles no
        # patch reads again, and memory would grow with the scene.
        if "cache_bytes" not in loader_kwargs:
            th = max(1, cog.tile_height if cog.tiled else 256)
            rows = -(-patch_size // th) + 1
            per = rows * th * cog.width * cog.count * np.dtype(cog.dtype).itemsize
            if loader_kwargs.get("layers"):
                per *= 2
            loader_kwargs = dict(loader_kwargs, cache_bytes=max(per, 64 << 20))
    windows = grid_windows(grid.width, grid.height, patch_size, overlap)
    if threads is not None and int(threads) < 1:
        raise ValueError("predict: threads %r: None (one per CPU) or at least 1"
                         % (threads,))
    if distributed:
        if threads is None:  # the machine's ranks share its CPUs
            local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
            threads = max(1, _usable_cpus() // local) if local > 1 else None
        _predict_shard(model, src, out, grid, windows, dist.get_rank(),
                       dist.get_world_size(),
                       patch_size=patch_size, overlap=overlap, blend=blend,
                       batch_size=batch_size, device=device, output=output,
                       progress=progress, compression=compression, mask=mask,
                       loader_kwargs=loader_kwargs, timeout_s=group_timeout_s,
                       threads=threads)
        return
    _run(model, src, out, grid, windows, patch_size=patch_size,
         overlap=overlap, blend=blend, batch_size=batch_size, device=device,
         output=output, progress=progress, compression=compression,
         mask=mask, loader_kwargs=loader_kwargs, threads=threads)


def _is_object(out: StrPath) -> bool:
    """Whether the writer takes `out` as an object (its rule,
    cf__url_is_remote: a URL of any scheme but file://; the upload then
    takes s3://, gs:// and Azure Blob URLs and refuses the rest)."""
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", out) if isinstance(out, str) else None
    return m is not None and m.group(1).lower() != "file"


def _clip(r: Rect, grid: Grid) -> Rect:
    """A Loader window as grid_windows gives it: clipped to the image (the
    sampler reports a patch larger than a small image whole)."""
    x, y, w, h = r
    return x, y, min(w, grid.width - x), min(h, grid.height - y)


def _run(model: Any, src: str, out: StrPath, grid: Grid, windows: List[Rect],
         *, patch_size: int, overlap: int, blend: str, batch_size: int,
         device: Any, output: str, progress: bool, compression: str,
         loader_kwargs: Any, roi: Any = None, desc: Optional[str] = None,
         overviews: Union[str, int] = "auto", level: int = 0,
         mask: bool = False, threads: Optional[int] = None,
         share: Optional[Tuple[int, int]] = None,
         keep_open: bool = False) -> Optional[Stitcher]:
    """The model over `windows` (grid windows of src, in the Loader's
    order; roi: a bbox every one of them meets, for a share of them),
    blended into a Stitcher writing `out` (mask: with the input's
    validity, the Loader's batch["valid"]; share: a share writer's rows,
    Stitcher's share=).  keep_open: the Stitcher is returned with every
    patch added, not closed (a share's steps come first)."""
    import torch
    from .loader import Loader

    wanted = None
    extra = dict(loader_kwargs)
    if roi is not None:
        wanted = set(windows)
        extra.update(roi=roi, roi_crs=grid.crs)
    ld = Loader([src], patch_size=patch_size, sampler="grid",
                stride=patch_size - overlap, batch_size=batch_size,
                dtype="float32", **extra)
    bar: Any = None
    if progress:
        import importlib
        try:  # optional: a bar where tqdm is installed
            bar = importlib.import_module("tqdm").tqdm(
                total=len(windows), unit="patch", desc=desc or os.fspath(out))
        except ImportError:
            bar = None
    st: Optional[Stitcher] = None
    # The blend and the writes run on a thread of their own (the stitcher
    # releases the GIL), at most 2 batches behind the model: the model's
    # next batch does not wait for the encoder, and a failure there stops
    # the run at the next batch.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cogfeed-write")
    pending: List[Future[None]] = []
    try:
        with torch.no_grad():
            for batch in ld:
                wins = list(batch["windows"])
                image = batch["image"]
                valid = batch["valid"] if mask else None
                if wanted is not None:  # the roi's windows past the share
                    keep = [i for i, w in enumerate(wins)
                            if _clip(_rect(w), grid) in wanted]
                    if not keep:
                        continue
                    if len(keep) < len(wins):
                        image = image[keep]
                        valid = valid[keep] if valid is not None else None
                        wins = [wins[i] for i in keep]
                x = torch.from_numpy(image)
                if device is not None:
                    x = x.to(device)
                y = model(x)
                if st is None:
                    st = Stitcher(out, windows, int(y.shape[1]), grid=grid,
                                  blend=blend, overlap=overlap, output=output,
                                  compression=compression, overviews=overviews,
                                  level=level, mask=mask, threads=threads,
                                  share=share)
                # on the host now: the GPU's next batch may overwrite y
                preds = y.detach().float().cpu().numpy()
                if valid is not None:  # the ring's slot is reused: a copy
                    valid = np.array(valid, dtype=np.uint8)
                pending.append(pool.submit(st.add_batch, preds, wins, valid))
                while len(pending) > 2 or (pending and pending[0].done()):
                    pending.pop(0).result()
                if bar is not None:
                    bar.update(len(wins))
        for f in pending:
            f.result()
        pending = []
        if st is None:
            raise RuntimeError("predict: the Loader gave none of the %d windows "
                               "of %s" % (len(windows), src))
        if keep_open:
            kept, st = st, None
            return kept
        st.close()
        st = None
    finally:
        for f in pending:  # a failure: let the writes in flight end first
            f.exception()
        pool.shutdown(wait=True)
        if st is not None:
            st.abort()
        ld.close()
        if bar is not None:
            bar.close()
    return None


def _predict_shard(model: Any, src: str, out: StrPath, grid: Grid,
                   windows: List[Rect], rank: int, world: int, *,
                   patch_size: int, overlap: int, blend: str,
                   batch_size: int, device: Any, output: str, progress: bool,
                   compression: str, loader_kwargs: Any,
                   timeout_s: float, mask: bool = False,
                   threads: Optional[int] = None) -> None:
    """predict's share of rank `rank` (see predict).  Its windows are those
    over its rows of output tiles; their blend goes to a share writer of
    its own (the output's codec and options, Stitcher(share=)) whose
    share rows are complete, as in one process, since every window over
    them came.  The share writer makes the overview rows its share owns
    from its own rows (share_build, every rank at once), then the carries
    pass from rank to rank in order over gloo (a few rows a level, and a
    row of overview tiles a level at most: share_carry), and each rank's
    file then holds every tile of every level its share makes, encoded by
    it.  Rank 0 writes `out` through a Writer with overviews_given,
    copying the tiles' encoded bytes (write_encoded_tile(level=)): its
    own, then each rank's received over gloo a row of tiles at a time, so
    that no process holds more than a row of tiles of the output, no tile
    is encoded twice and none is decoded by rank 0.  An object `out`:
    every rank puts its own tiles' bytes up as parts of one upload
    (_share_upload.upload_shares).

    Every rank makes the same collective calls in the same order whatever
    fails: a failure is carried to the end of its phase (a rank that
    failed passes on a failed carry, a sender whose read fails sends empty
    rows for the rest of its share, rank 0 keeps receiving after a failure
    of its own), then an all-reduce of the failures makes every rank
    raise."""
    import datetime
    import shutil
    import tempfile

    import torch
    import torch.distributed as dist

    from . import open as _open
    from ._cogfeed import SHARE_FAILED_CARRY
    from ._share_upload import upload_shares
    from .writer import Writer

    T = 512  # the Stitcher's tile size: a share is whole rows of its tiles
    rows = -(-grid.height // T)
    r0, r1 = _share(rows, rank, world)
    y0, y1 = r0 * T, min(r1 * T, grid.height)
    mine = [w for w in windows if w[1] < y1 and w[1] + w[3] > y0] if r1 > r0 else []
    classes = output == "classes"
    # CPU tensors travel over gloo whatever backend the run chose (NCCL
    # moves only GPU tensors); creating it is collective: every rank here.
    group = dist.new_group(backend="gloo",
                           timeout=datetime.timedelta(seconds=timeout_s))
    errors: List[BaseException] = []

    def agree(failed: bool) -> None:
        """All ranks learn whether any failed, and then each failed rank's
        first error (torchrun may stop the others before theirs is
        printed); then all raise."""
        f = torch.tensor([1 if failed else 0], dtype=torch.int32)
        dist.all_reduce(f, op=dist.ReduceOp.MAX, group=group)
        if not f[0]:
            return
        said: List[Optional[str]] = [None] * world
        mine = "%s: %s" % (type(errors[0]).__name__, errors[0]) if errors else None
        dist.all_gather_object(said, mine, group=group)
        if errors:
            raise errors[0]
        raise RuntimeError("predict: %s; %s not written" % ("; ".join(
            "rank %d failed: %s" % (r, m) for r, m in enumerate(said) if m)
            or "another rank failed", os.fspath(out)))

    def send_bytes(b: bytes, dst: int) -> None:
        """Its length, then (when not empty) the bytes."""
        dist.send(torch.tensor([len(b)], dtype=torch.int64), dst=dst, group=group)
        if b:
            dist.send(torch.frombuffer(bytearray(b), dtype=torch.uint8), dst=dst, group=group)

    def recv_bytes(src_rank: int) -> bytes:
        n = torch.empty(1, dtype=torch.int64)
        dist.recv(n, src=src_rank, group=group)
        if not int(n[0]):
            return b""
        data = torch.empty(int(n[0]), dtype=torch.uint8)
        dist.recv(data, src=src_rank, group=group)
        return bytes(data.numpy().tobytes())

    tmp = None
    st: Optional[Stitcher] = None
    try:
        # -- phase 1: the model over this rank's windows into its share
        # writer, which makes the overview rows of its own rows
        spool = ""
        try:
            tmp = tempfile.mkdtemp(prefix="cogfeed-predict-")
            spool = os.path.join(tmp, "share.tif")
            if mine:
                st = _run(model, src, spool, grid, mine, patch_size=patch_size,
                          overlap=overlap, blend=blend, batch_size=batch_size,
                          device=device, output=output,
                          progress=progress and rank == 0, compression=compression,
                          loader_kwargs=loader_kwargs,
                          roi=_band_roi(grid, y0, y1),
                          desc="%s (rank %d of %d)" % (os.fspath(out), rank, world),
                          mask=mask, threads=threads, share=(r0, r1 - r0),
                          keep_open=True)
                assert st is not None
                st.share_build()
        except BaseException as e:
            errors.append(e)

        # -- the carries, rank to rank in order: each share's rows whose
        # windows reach into the share before are made from its carry
        # (b"": no share before this one had rows)
        carry = (recv_bytes(rank - 1) if rank > 0 else b"") or None
        ranges: List[Tuple[int, int, int]] = []
        bands = levels = 1
        passed = SHARE_FAILED_CARRY
        try:
            if errors:
                pass
            elif st is None:  # no share (more ranks than rows): pass it on
                passed = carry or b""
            else:
                passed = st.share_carry(carry)
                levels = st.levels
                ranges = [st.share_tiles(level) + (0,) for level in range(levels)]
                st.close()
                st = None
                with _open(spool) as c:
                    bands = c.count
                    widths = [c.width] + [w for w, _ in c.overviews]
                    ranges = [(a, b, -(-wl // T)) for (a, b, _), wl in zip(ranges, widths)]
        except BaseException as e:
            errors.append(e)
            passed = SHARE_FAILED_CARRY
        if rank + 1 < world:
            send_bytes(passed, rank + 1)
        if st is not None:
            st.abort()
            st = None
        nb = torch.tensor([bands, levels], dtype=torch.int64)
        dist.all_reduce(nb, op=dist.ReduceOp.MAX, group=group)
        agree(bool(errors))
        bands, levels = int(nb[0]), int(nb[1])
        ranges += [(0, 0, 0)] * (levels - len(ranges))

        def share_rows() -> Any:
            """This rank's rows of tiles of every level as its file stores
            them: per row, each tile's encoded bytes and its mask tile's
            (b"" for a sparse tile, and for every tile after a failure: the
            receiver still waits for them)."""
            c = fd = None
            try:
                if r1 > r0:  # a rank with no share has no file
                    c = _open(spool)
                    fd = os.open(spool, os.O_RDONLY)
            except BaseException as e:
                errors.append(e)

            def stored(k: int, level: int, m: bool) -> bytes:
                assert c is not None and fd is not None
                ti = c.tile_info(k, level, mask=m)
                n = int(ti["byte_count"])
                b = os.pread(fd, n, int(ti["offset"])) if n else b""
                if len(b) != n:
                    raise OSError("predict: %s: tile %d of level %d: %d of its %d bytes "
                                  "read" % (spool, k, level, len(b), n))
                return b

            try:
                for level, (a, b, ntx) in enumerate(ranges):
                    for ty in range(a, b):
                        tiles = [(b"", b"")] * ntx
                        if c is not None and not errors:
                            try:
                                tiles = [(stored(ty * ntx + tx, level, False),
                                          stored(ty * ntx + tx, level, True) if mask
                                          else b"") for tx in range(ntx)]
                            except BaseException as e:
                                errors.append(e)
                                tiles = [(b"", b"")] * ntx
                        yield level, ty, tiles
            finally:
                if fd is not None:
                    os.close(fd)
                if c is not None:
                    c.close()

        def pack(tiles: List[Tuple[bytes, bytes]]) -> Tuple[Any, Any]:
            """A row of tiles as two tensors: the lengths (image, mask per
            tile) and the bytes, one after another."""
            lens = torch.tensor([len(b) for t in tiles for b in t], dtype=torch.int64)
            data = b"".join(b for t in tiles for b in t)
            return lens, torch.frombuffer(bytearray(data), dtype=torch.uint8) \
                if data else None

        def unpack(lens: Any, data: Any) -> List[Tuple[bytes, bytes]]:
            raw = data.numpy().tobytes() if data is not None else b""
            out, at = [], 0
            for i in range(0, len(lens), 2):
                n, mn = int(lens[i]), int(lens[i + 1])
                out.append((raw[at:at + n], raw[at + n:at + n + mn]))
                at += n + mn
            return out

        def output_writer(**extra: Any) -> Writer:
            return Writer(out, grid=grid, bands=bands,
                          dtype="uint8" if classes else "float32",
                          nodata=255 if classes else float("nan"),
                          overview_resampling="mode" if classes else "average",
                          compression=compression, mask=mask, overviews_given=True,
                          **extra)

        if _is_object(out):  # each rank uploads its own tiles' parts
            upload_shares(os.fspath(out), spool if r1 > r0 else None,
                          lambda: output_writer(layout_only=True), ranges, mask, rank,
                          world, group, errors, agree, send_bytes, recv_bytes)
            return

        # -- phase 2: every level's encoded tiles to rank 0, which writes
        # them: first each rank's rows of tiles per level, then the rows
        if rank != 0:
            dist.send(torch.tensor(ranges, dtype=torch.int64), dst=0, group=group)
            for _, _, tiles in share_rows():
                lens, data = pack(tiles)
                dist.send(lens, dst=0, group=group)
                if data is not None:
                    dist.send(data, dst=0, group=group)
            agree(bool(errors))   # the transfer
            agree(False)          # rank 0's close
            return
        w: Optional[Writer] = None
        try:
            w = output_writer()
        except BaseException as e:
            errors.append(e)
        try:
            for r in range(world):
                if r == 0:
                    it: Any = share_rows()
                else:
                    rr = torch.empty((levels, 3), dtype=torch.int64)
                    dist.recv(rr, src=r, group=group)

                    def received(rr: Any = rr, r: int = r) -> Any:
                        for level in range(levels):
                            a, b, ntx = (int(v) for v in rr[level])
                            for ty in range(a, b):
                                lens = torch.empty(2 * ntx, dtype=torch.int64)
                                dist.recv(lens, src=r, group=group)
                                data = None
                                total = int(lens.sum())
                                if total:
                                    data = torch.empty(total, dtype=torch.uint8)
                                    dist.recv(data, src=r, group=group)
                                yield level, ty, unpack(lens, data)
                    it = received()
                for level, ty, tiles in it:
                    if errors or w is None:
                        continue  # keep receiving: the senders wait for it
                    try:
                        for tx, (b, mb) in enumerate(tiles):
                            w.write_encoded_tile(tx, ty, b, mb if mask and b else None,
                                                 level=level)
                    except BaseException as e:
                        errors.append(e)
            agree(bool(errors))
            try:
                assert w is not None
                w.close()
                w = None
            except BaseException as e:
                errors.append(e)
            agree(bool(errors))
        finally:
            if w is not None:
                w.abort()
    finally:
        if st is not None:
            st.abort()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        dist.destroy_process_group(group)

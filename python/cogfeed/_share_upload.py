"""predict(distributed=True) to object storage: every rank uploads its own
tiles as parts of one object (docs/inference.md, "Several processes or
machines").

After the share writers' carries, each rank's share file holds its tiles of
every level, encoded.  Then, in every rank at once:

1. the tiles' encoded sizes are summed over the group (each rank fills its
   own rows), so that every rank lays out the same COG with a layout
   writer (Writer(layout_only=True)): the header and each tile's offset in
   the object;
2. the object's bytes are runs of one rank each (the header is rank 0's),
   and plan_parts cuts them into parts (S3: 5 MiB at least but the last),
   each put by the rank owning most of it; the few bytes of a part that
   another rank holds (short runs at share and level boundaries) travel to
   it over the gloo group;
3. rank 0 begins the upload and sends its token; the others join, put
   their parts and send their receipts; rank 0 completes the object.

Rank 0's link thus carries the header and the boundary bytes, not the
output.  Every rank makes the same collective calls in the same order
whatever fails; a failure anywhere makes rank 0 free the upload without
completing it (aborted: nothing is left) and every rank raise.
"""

from __future__ import annotations

import bisect
import logging
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .upload import Upload, plan_parts

log = logging.getLogger("cogfeed.predict")


def upload_shares(out: str, spool: Optional[str], layout_writer: Callable[[], Any],
                  ranges: Sequence[Tuple[int, int, int]], mask: bool, rank: int,
                  world: int, group: Any, errors: List[BaseException],
                  agree: Callable[[bool], None],
                  send_bytes: Callable[[bytes, int], None],
                  recv_bytes: Callable[[int], bytes]) -> None:
    """This rank's part of the joint upload of `out` (see the module).
    spool: its share file (None: a rank without rows); ranges: per level
    (first row of tiles, end, tiles across) of its share; layout_writer():
    a Writer(layout_only=True) of the output's options."""
    import torch
    import torch.distributed as dist

    from . import open as _open

    levels = len(ranges)
    m = 2 if mask else 1
    # -- the rows of every rank and the size of every tile, everywhere
    rows = torch.zeros((world, levels, 3), dtype=torch.int64)
    rows[rank] = torch.tensor([list(r) for r in ranges], dtype=torch.int64)
    dist.all_reduce(rows, group=group)
    ntx = [int(rows[:, lv, 2].max()) for lv in range(levels)]
    nty = [int(rows[:, lv, 1].max()) for lv in range(levels)]
    base = [0] * levels
    for lv in range(1, levels):
        base[lv] = base[lv - 1] + m * ntx[lv - 1] * nty[lv - 1]
    n = base[-1] + m * ntx[-1] * nty[-1]
    sizes = torch.zeros(n, dtype=torch.int64)
    at_file: Dict[int, int] = {}  # index in sizes -> offset in the share file
    cog = None
    try:
        if spool is not None and not errors:
            cog = _open(spool)
            for lv, (a, b, _) in enumerate(ranges):
                for k in range(a * ntx[lv], b * ntx[lv]):
                    for j in range(m):
                        info = cog.tile_info(k, lv, mask=bool(j))
                        i = base[lv] + m * k + j
                        sizes[i] = int(info["byte_count"])
                        at_file[i] = int(info["offset"])
    except BaseException as e:
        errors.append(e)
    finally:
        if cog is not None:
            cog.close()
    dist.all_reduce(sizes, group=group)
    agree(bool(errors))
    sz: List[int] = sizes.tolist()

    # -- the upload: rank 0 begins it, the others join with its token
    up: Optional[Upload] = None
    try:
        if rank == 0:
            try:
                up = Upload(out)
                token = up.token.encode()
            except BaseException as e:
                errors.append(e)
                token = b""
            for r in range(1, world):
                send_bytes(token, r)
        else:
            token = recv_bytes(0)
            if token:
                try:
                    up = Upload(out, token=token.decode())
                except BaseException as e:
                    errors.append(e)
        agree(bool(errors) or up is None)
        assert up is not None
        min_part = up.min_part

        # -- the layout (every rank the same) and the parts
        header = b""
        plan: List[Any] = []
        mine: List[Tuple[int, int, int]] = []  # (object offset, size, file offset), sorted
        try:
            lw = layout_writer()
            try:
                header, offsets = lw.layout(sz)
            finally:
                lw.close()
            owner = [0] * n
            for r in range(world):
                for lv in range(levels):
                    a, b = int(rows[r, lv, 0]), int(rows[r, lv, 1])
                    owner[base[lv] + m * a * ntx[lv]:base[lv] + m * b * ntx[lv]] = \
                        [r] * (m * (b - a) * ntx[lv])
            order = sorted((o, i) for i, o in enumerate(offsets) if sz[i])
            runs = [(0, len(header))] + [(owner[i], sz[i]) for _, i in order]
            mine = [(o, sz[i], at_file[i]) for o, i in order if owner[i] == rank]
            plan = plan_parts(runs, min_part)
        except BaseException as e:
            errors.append(e)
        agree(bool(errors))

        fd = None
        try:
            if mine and spool is not None:
                fd = os.open(spool, os.O_RDONLY)
        except BaseException as e:
            errors.append(e)

        def held(a: int, b: int) -> bytes:
            """This rank's bytes [a, b) of the object (b"" after a failure:
            the receiver still waits for them)."""
            if errors:
                return b""
            try:
                got = [header[a:b]] if a < len(header) else []
                k = max(bisect.bisect_right(mine, (a, 1 << 62, 0)) - 1, 0)
                while k < len(mine) and mine[k][0] < b:
                    o, sz, fo = mine[k]
                    lo, hi = max(a, o), min(b, o + sz)
                    if lo < hi:
                        assert fd is not None
                        chunk = os.pread(fd, hi - lo, fo + lo - o)
                        if len(chunk) != hi - lo:
                            raise OSError("predict: %s: %d of %d bytes read at %d"
                                          % (spool, len(chunk), hi - lo, fo + lo - o))
                        got.append(chunk)
                    k += 1
                data = b"".join(got)
                if len(data) != b - a:
                    raise RuntimeError("predict: bytes %d..%d of %s: %d held by rank %d"
                                       % (a, b, out, len(data), rank))
                return data
            except BaseException as e:
                errors.append(e)
                return b""

        sent = put = came = 0
        try:
            for part in plan:
                if rank == part.rank:
                    data = b"".join(held(a, b) if o == rank else recv_bytes(o)
                                    for o, a, b in part.pieces)
                    if errors or up is None:
                        continue
                    if len(data) != part.end - part.start:
                        errors.append(RuntimeError(
                            "predict: part %d of %s: %d of its %d bytes came"
                            % (part.number, out, len(data), part.end - part.start)))
                        continue
                    try:
                        up.put(part.number, data)
                        sent += 1
                        put += len(data)
                        came += sum(b - a for o, a, b in part.pieces if o != rank)
                    except BaseException as e:
                        errors.append(e)
                else:
                    for o, a, b in part.pieces:
                        if o == rank:
                            send_bytes(held(a, b), part.rank)
        finally:
            if fd is not None:
                os.close(fd)

        log.info("predict: rank %d put %d of the %d parts of %s (%d bytes, %d of them "
                 "from other ranks)", rank, sent, len(plan), out, put, came)

        # -- receipts to rank 0, which completes the object
        if rank != 0:
            receipts = b""
            if up is not None and not errors:
                try:
                    receipts = up.receipts().encode()
                except BaseException as e:
                    errors.append(e)
            if errors and up is not None:
                # its parts in flight end before rank 0 learns of the
                # failure: the abort then follows this rank's last PUT
                # (a part still being sent during an abort may be kept)
                u, up = up, None
                u.free()
            send_bytes(receipts, 0)
            agree(bool(errors))   # the parts
            agree(False)          # rank 0's completion
            return
        got: List[str] = []
        for r in range(1, world):
            raw = recv_bytes(r)
            try:
                got.append(raw.decode("ascii"))
            except BaseException as e:
                errors.append(e)
        # every part of the plan put once: rank 0's own and the receipts'
        # (cf_upload_complete also refuses a gap in the numbers)
        lines = sent + sum(len(g.splitlines()) for g in got)
        if not errors and lines != len(plan):
            errors.append(RuntimeError("predict: %s: %d of the %d parts put" % (
                out, lines, len(plan))))
        agree(bool(errors))
        try:
            assert up is not None
            u, up = up, None
            u.complete(got)
        except BaseException as e:
            errors.append(e)
        agree(bool(errors))
    finally:
        if up is not None:
            up.free()  # rank 0: aborted, nothing left; others: its parts dropped


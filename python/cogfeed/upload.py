"""cogfeed.Upload and plan_parts: one object uploaded by several processes.

The ranks of a job that each hold some of an object's bytes (the share
writers of cogfeed.predict(distributed=True), or a loop of one's own) put
them up themselves, as parts of one S3 multipart upload or one Azure
block blob, instead of sending them all to one process:

    if rank == 0:
        up = cogfeed.Upload(url)                 # begins: S3 creates it
        token = up.token                         # no secret: send it on
    else:
        up = cogfeed.Upload(url, token=token)    # joins
    for number, data in my_parts:                # numbered in object order
        up.put(number, data)
    if rank == 0:
        up.complete(receipts_of_the_others)      # the object appears
    else:
        send_to_rank_0(up.receipts())

The object is the parts in number order; S3 wants every part but the last
at least min_part (5 MiB), so a process's bytes that border another's
may have to travel to the process that puts their part: plan_parts cuts
an object whose byte ranges belong to processes into parts that move as
few bytes as it can.  Any failure: rank 0 calls free() instead of
complete(), which aborts the upload; nothing is left (C: cf_upload,
include/cogfeed.h).
"""

from __future__ import annotations

import bisect
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ._cogfeed import _Upload

__all__ = ["Upload", "Part", "plan_parts"]

MAX_PARTS = 10000       # S3's
MAX_PART = 5 << 30      # S3's largest part


class Upload:
    """One object uploaded by several processes (see the module's text).

    Upload(url, io=None): begin (this process completes it); Upload(url,
    token=..., io=None): join the upload another process began.  put()
    copies a part's bytes and returns once one of the upload's threads is
    free (at most 4 parts at once in each process); a failed part is sent
    again whole (io's retries).  A beginning process that ends without
    complete() (free(), an exception in `with`, garbage collection)
    aborts the upload."""

    def __init__(self, url: str, io: Any = None, token: Optional[str] = None) -> None:
        self.url = url
        self._c: Optional[_Upload] = _Upload(url, io, token)
        self.owner = token is None

    def _open(self) -> _Upload:
        if self._c is None:
            raise RuntimeError("Upload of %s ended" % self.url)
        return self._c

    @property
    def token(self) -> str:
        """What other processes join with (S3's upload id; Azure's block
        id nonce): no secret."""
        return self._open().token

    @property
    def min_part(self) -> int:
        """The smallest part but the last the store takes."""
        return self._open().min_part

    def put(self, number: int, data: Any) -> None:
        """Part `number` (1..10000, once in the whole job)."""
        if not 1 <= int(number) <= MAX_PARTS:
            raise ValueError("Upload.put: part number %r not in 1..%d" % (number, MAX_PARTS))
        self._open().put(int(number), bytes(data) if not isinstance(data, bytes) else data)

    def receipts(self) -> str:
        """A joined process's receipts, once all its parts are sent (the
        first failure of its parts raises): send them to the beginning
        process."""
        return self._open().receipts()

    def complete(self, receipts: Sequence[str] = ()) -> None:
        """The beginning process: make the object from every part (its own
        and those of the receipts given).  Any failure aborts the upload;
        the Upload has ended either way."""
        c, self._c = self._open(), None
        c.complete(list(receipts))

    def free(self) -> None:
        """End without completing: the beginning process's upload is
        aborted (nothing is left)."""
        c, self._c = self._c, None
        if c is not None:
            c.free()

    def __enter__(self) -> "Upload":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.free()


class Part(NamedTuple):
    """Part `number` holds the object's bytes [start, end); `rank` puts it,
    taking the bytes of `pieces` it does not own from their owners:
    pieces are (owner, start, end) runs of one owner each, in order."""
    number: int
    start: int
    end: int
    rank: int
    pieces: Tuple[Tuple[int, int, int], ...]


def plan_parts(runs: Sequence[Tuple[int, int]], min_part: int,
               part_size: int = 8 << 20) -> List[Part]:
    """Cut an object into parts of an upload shared by processes.

    runs: (owner, length) in object order (adjacent runs of one owner are
    joined; empty ones dropped).  Every part but the last is at least
    min_part bytes and at most max(part_size, 2 * min_part) (both raised
    when the object would pass 10,000 parts); a part ends where an owner's
    run ends whenever it can, and a long run is cut so that its last part
    is not shorter than min_part: a run is put by its owner alone but for
    the bytes that fill a part of shorter runs before it, and only the
    bytes of runs shorter than min_part (and that filling) travel.  Each
    part is put by the owner of most of its bytes (the lowest rank on a
    tie)."""
    joined: List[List[int]] = []
    for owner, n in runs:
        if n < 0:
            raise ValueError("plan_parts: a run of %d bytes" % n)
        if not n:
            continue
        if joined and joined[-1][0] == owner:
            joined[-1][1] += n
        else:
            joined.append([int(owner), int(n)])
    if min_part < 1:
        raise ValueError("plan_parts: min_part %d" % min_part)
    total = sum(n for _, n in joined)
    ends, at = [], 0
    for _, n in joined:
        at += n
        ends.append(at)
    size, least = max(int(part_size), int(min_part)), int(min_part)
    while True:
        cuts = _cuts(ends, total, least, size)
        if len(cuts) <= MAX_PARTS or size >= MAX_PART:
            break
        # bigger parts, and (for many short runs) parts that span them
        size = min(MAX_PART, size * 2)
        least = max(least, size // 4)
    if len(cuts) > MAX_PARTS:
        raise ValueError("plan_parts: %d bytes need more than %d parts" % (total, MAX_PARTS))
    parts, start = [], 0
    for number, end in enumerate(cuts, 1):
        pieces: List[Tuple[int, int, int]] = []
        owned: Dict[int, int] = {}
        k = bisect.bisect_right(ends, start)
        a = start
        while a < end:
            b = min(ends[k], end)
            owner = joined[k][0]
            pieces.append((owner, a, b))
            owned[owner] = owned.get(owner, 0) + b - a
            a, k = b, k + 1
        rank = min(owned, key=lambda r: (-owned[r], r))
        parts.append(Part(number, start, end, rank, tuple(pieces)))
        start = end
    return parts


def _cuts(ends: List[int], total: int, min_part: int, size: int) -> List[int]:
    """Where each part ends: the first run end at least min_part on, unless
    that is more than `size` on (then `size` on: a long run is cut into
    parts of `size`, its owner's alone), moved back so that the rest of
    the run is not shorter than min_part (or on to the run's end when the
    part could not then be min_part long: under 2 * min_part in all)."""
    cuts, pos = [], 0
    while pos < total:
        k = bisect.bisect_left(ends, min(pos + min_part, total))
        e = ends[k]
        end = min(e, pos + size)
        if end < e and e - end < min_part:  # the run's rest would travel
            end = e - min_part if e - min_part >= pos + min_part else e
        cuts.append(end)
        pos = end
    return cuts

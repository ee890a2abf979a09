"""The data of bench/peers.py: 32 scenes of 4096 px in two codecs.

`cogfeed synth` makes --unique distinct scenes (4-band uint16 + a uint8
land-cover mask, DEFLATE with the horizontal predictor, 512 px tiles) and
`cogfeed convert` their LERC_ZSTD variant; each file is then placed
--scenes / --unique times side by side in the same UTM zone, as synth
itself lays scenes out, by copying it and rewriting the X of its
ModelTiepoint in place (the bytes of every tile and the COG layout stay
as GDAL wrote them).  Synthesising 32 scenes of 4096 px costs about 18
CPU minutes; 4 distinct ones 2.

Every reader of the benchmark reads every file on its own (no cache is
shared between files, the page cache holds each file apart), so repeated
content changes nothing they measure; TorchGeo gets the disjoint
footprints it needs to sample one scene per patch.
"""

import os
import shutil
import struct
import subprocess
import sys

SIZE = 4096
PIXEL_M = 10.0         # synth.PIXEL_M
X0 = 300000.0          # synth's first scene's left edge
TIEPOINT = 33922       # ModelTiepointTag: (I, J, K, X, Y, Z) doubles


def tiepoint_offset(path):
    """File offset of the ModelTiepoint doubles of the first IFD of a
    classic little-endian TIFF (what GDAL's COG driver writes below 4
    GB), or ValueError."""
    with open(path, "rb") as f:
        head = f.read(8)
        if head[:4] != b"II*\x00":
            raise ValueError("%s: not a classic little-endian TIFF" % path)
        (ifd,) = struct.unpack("<I", head[4:8])
        f.seek(ifd)
        (n,) = struct.unpack("<H", f.read(2))
        if n > 4096:
            raise ValueError("%s: %d tags in the first IFD" % (path, n))
        entries = f.read(12 * n)
    for k in range(n):
        tag, typ, count, value = struct.unpack(
            "<HHII", entries[12 * k:12 * k + 12])
        if tag == TIEPOINT:
            if typ != 12 or count < 6:
                raise ValueError("%s: ModelTiepoint is not 6 doubles" % path)
            return value
    raise ValueError("%s: no ModelTiepoint tag" % path)


def place(src, dst, index):
    """Copy src to dst with its left edge moved to scene `index`'s."""
    tmp = dst + ".part"
    shutil.copyfile(src, tmp)
    off = tiepoint_offset(tmp)
    with open(tmp, "r+b") as f:
        f.seek(off + 24)               # the 4th double: X
        f.write(struct.pack("<d", X0 + index * SIZE * PIXEL_M))
    os.replace(tmp, dst)


def cli(python, env, *args):
    subprocess.run([python, "-m", "cogfeed.cli"] + [str(a) for a in args],
                   check=True, env=env)


def complete(folder, n):
    """Whether a synth/convert output folder holds its n masks (the last
    files either command writes); a run stopped half-way left fewer, and
    the folder is made again."""
    masks = os.path.join(folder, "masks")
    return os.path.isdir(masks) and len(
        [f for f in os.listdir(masks) if f.endswith(".tif")]) >= n


def make(root, python, env, scenes=32, unique=4, size=SIZE):
    """root/{deflate_512,lerc_zstd_512}/{images,masks}/scene_NNN.tif;
    returns {codec: folder}.  Made once (kept when complete)."""
    global SIZE
    SIZE = size
    out = {"DEFLATE": os.path.join(root, "deflate_512"),
           "LERC_ZSTD": os.path.join(root, "lerc_zstd_512")}
    done = os.path.join(root, "done-%d-%d-%d" % (scenes, unique, size))
    if os.path.exists(done):
        return out
    raw = os.path.join(root, "raw")
    if not complete(raw, unique):
        cli(python, env, "synth", raw, "--scenes", unique, "--size", size,
            "--tile", 512)
    lz = os.path.join(root, "lerc_zstd_unique")
    if not complete(lz, unique):
        cli(python, env, "convert", raw, lz, "--compress", "lerc_zstd",
            "--tile", 512, "--quiet")
    for codec, src in (("DEFLATE", raw), ("LERC_ZSTD", lz)):
        for part in ("images", "masks"):
            os.makedirs(os.path.join(out[codec], part), exist_ok=True)
            names = sorted(os.listdir(os.path.join(src, part)))
            for i in range(scenes):
                place(os.path.join(src, part, names[i % len(names)]),
                      os.path.join(out[codec], part, "scene_%03d.tif" % i),
                      i)
    open(done, "w").close()
    sys.stderr.write("peers: data in %s\n" % root)
    return out

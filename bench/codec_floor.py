"""Library time vs our time, per codec of bench/peers.py's decode workload.

For each file of the decode workload (its folder, e.g.
/tmp/cf-peers-data/codecs-4096) and 1 thread, the best of --repeat rounds
(each round runs every variant in turn), MB of decoded bytes per CPU
second (CPU time: on a machine shared with other work it moves far less
than wall time):

  debian lib    bench/codec_floor.c: the bare library call with the C
                libraries cogfeed links (Debian 12's libdeflate 1.14, zstd
                1.5.4, lerc 4.0.0, libjpeg-turbo 2.1.5, libwebp 1.2.4), no
                predictor, no Python, no allocation
  ic lib        imagecodecs' own codec function (deflate_decode, ...) on
                the same bytes into one reused array (out=): its bundled,
                newer libraries (libdeflate 1.26, zstd 1.5.7, lerc 4.2.0,
                libjpeg-turbo 3.2.0, libwebp 1.6.0) plus a Python call
  cogfeed(out)  Cog.decode_tile(out=one reused array): Debian's library
                plus our code (Python call, checks, predictor)
  cogfeed       Cog.decode_tile, a fresh array per tile (as bench/peers.py
                times it): plus the allocation and its fresh pages
  imagecodecs   tifffile's page.decode, a fresh array per tile: imagecodecs
                plus tifffile's code (what bench/peers.py compares with)

  ic lib (C)    bench/codec_floor.c calling imagecodecs' bundled build of
                the library (imagecodecs.libs/libwebp-*.so, ...; dlmopen'd)
                in place of Debian's: the same harness, only the library
                differs (deflate, zstd, lerc, webp: the .so files that
                imagecodecs ships)

debian lib / ic lib (C) is the libraries' version difference alone, in
the same C harness; debian lib / ic lib the same with a Python call per
tile on imagecodecs' side (neither allocates); cogfeed(out) / debian lib
is what our code costs on top of the library (the predictor included,
which neither library column pays); cogfeed / cogfeed(out) what a fresh
output array costs.  Run with the peers'
venv and its build of the extension (bench/peers.py makes both):

    cc -O2 -o build/codec_floor bench/codec_floor.c -ldeflate -lzstd \\
       -lLerc -ljpeg -lwebp -ldl
    PYTHONPATH=build-peers/python bench/.venv-peers/bin/python \\
       bench/codec_floor.py --data /tmp/cf-peers-data/codecs-4096 \\
       --floor build/codec_floor [--json out.json]
"""
import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

IC = {"deflate": "deflate_decode", "deflate_f32": "deflate_decode",
      "lzw": "lzw_decode", "packbits": "packbits_decode",
      "zstd": "zstd_decode", "lerc": "lerc_decode",
      "lerc_deflate": "lerc_decode", "lerc_zstd": "lerc_decode",
      "jpeg": "jpeg8_decode", "webp": "webp_decode"}
FLOOR = {"deflate": "deflate", "deflate_f32": "deflate", "zstd": "zstd",
         "lerc": "lerc", "lerc_deflate": "lerc_deflate",
         "lerc_zstd": "lerc_zstd", "jpeg": "jpeg", "webp": "webp"}
# imagecodecs' bundled libraries, by the codec_floor codec that calls them
IC_SO = {"deflate": "libdeflate-*.so*", "zstd": "libzstd-*.so*",
         "lerc": "libLerc-*.so*", "webp": "libwebp-*.so*"}
LERC_TYPE = {"uint8": 1, "int16": 2, "uint16": 3, "int32": 4, "uint32": 5,
             "float32": 6, "float64": 7}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--floor", required=True, help="codec_floor binary")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    import cogfeed
    import imagecodecs
    import tifffile
    libs = os.path.join(os.path.dirname(os.path.dirname(imagecodecs.__file__)),
                        "imagecodecs.libs")
    rows = []
    for name in ("deflate", "lzw", "packbits", "zstd", "deflate_f32", "lerc",
                 "lerc_deflate", "lerc_zstd", "jpeg", "webp"):
        path = os.path.join(a.data, name + ".tif")
        if not os.path.exists(path):
            continue
        tf = tifffile.TiffFile(path)
        pg = tf.pages[0]
        with open(path, "rb") as f:
            raw = f.read()
        segs = [raw[o:o + c] for o, c in zip(pg.dataoffsets,
                                             pg.databytecounts)]
        cog = cogfeed.open(path)
        tw, th, spp = pg.tilewidth, pg.tilelength, pg.samplesperpixel
        isz = pg.dtype.itemsize
        nbytes = len(segs) * tw * th * spp * isz
        jt = pg.jpegtables or b""
        fn = getattr(imagecodecs, IC[name])
        kw = {"tables": jt} if name == "jpeg" and jt else {}
        # every variant but tifffile's decodes into one array, reused:
        # no allocation and no fresh pages, so that the columns differ by
        # the library and the code around it only
        if IC[name] in ("deflate_decode", "lzw_decode", "packbits_decode",
                        "zstd_decode"):
            kw["out"] = np.empty(tw * th * spp * isz, np.uint8)
        else:
            kw["out"] = np.empty((th, tw, spp) if spp > 1 else (th, tw),
                                 pg.dtype)
        mine = np.empty((th, tw, spp), pg.dtype)
        dump, floors = None, []
        if name in FLOOR:
            with tempfile.NamedTemporaryFile(delete=False) as f:
                f.write(struct.pack("<I", len(jt)) + jt +
                        struct.pack("<I", len(segs)))
                for s in segs:
                    f.write(struct.pack("<I", len(s)) + s)
                dump = f.name
            # the C harness with Debian's library, then with imagecodecs'
            # own build of it where imagecodecs ships one
            cmd = [a.floor, FLOOR[name], dump, str(tw), str(th), str(spp),
                   str(isz), "1", str(LERC_TYPE.get(str(pg.dtype), 0))]
            floors = [("debian_lib", cmd)]
            pattern = IC_SO.get(FLOOR[name])
            so = sorted(glob.glob(os.path.join(libs, pattern))) if pattern else []
            if so:
                floors.append(("ic_lib_c", cmd + so[:1]))
        ks = range(len(segs))
        variants = [
            ("cogfeed", lambda: [cog.decode_tile(segs[k], k) for k in ks]),
            ("cogfeed_out", lambda: [cog.decode_tile(segs[k], k, out=mine)
                                     for k in ks]),
            ("imagecodecs", lambda: [pg.decode(segs[k], k, jpegtables=jt or None)
                                     for k in ks]),
            ("ic_lib", lambda: [fn(segs[k], **kw) for k in ks])]
        best = {}
        for _ in range(a.repeat):
            for v, run in variants:
                t0 = time.thread_time()
                run()
                dt = time.thread_time() - t0
                best[v] = min(dt, best.get(v, dt))
            for col, c in floors:
                out = subprocess.run(c, check=True, capture_output=True,
                                     text=True).stdout
                dt = nbytes / float(out.strip()) / 1e6
                best[col] = min(dt, best.get(col, dt))
        if dump:
            os.unlink(dump)
        r = {"codec": name.upper(), "dtype": str(pg.dtype), "bands": spp,
             "predictor": pg.predictor, "load_avg": os.getloadavg()[0]}
        r.update({k: nbytes / t / 1e6 for k, t in best.items()})
        rows.append(r)
        cog.close()
        tf.close()
        sys.stderr.write(
            "%-13s debian lib %6s  ic lib (C) %6s  ic lib %6.0f  "
            "cogfeed(out) %6.0f  cogfeed %6.0f  imagecodecs %6.0f MB/CPU-s\n"
            % (r["codec"], "%.0f" % r["debian_lib"] if "debian_lib" in r
               else "-", "%.0f" % r["ic_lib_c"] if "ic_lib_c" in r else "-",
               r["ic_lib"], r["cogfeed_out"], r["cogfeed"], r["imagecodecs"]))
    res = {"imagecodecs": imagecodecs.__version__,
           "libraries": imagecodecs.version(), "rows": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

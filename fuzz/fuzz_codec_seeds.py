"""Write the fuzz seeds added for issue 19: the codec targets
fuzz/seeds/codec_{lzma,ccitt_rle,ccitt_g3,ccitt_g4,none}/, and whole small
files of the new variants for fuzz_open (fuzz/seeds/open/fmt_*).

Each codec seed is the 8-byte header of fuzz_codec.h (chunk shape and how
it is read) followed by a real chunk: streams written by GDAL (libtiff's
encoders), raw samples for the conversions.  A few hundred bytes each; the
files are 40x30 or smaller, made by format_fixtures.py's makers.

Usage: .venv/bin/python fuzz/fuzz_codec_seeds.py [NAME...]  (after ./run.sh
build; NAMEs: only those fmt_* files)
"""

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
import format_fixtures as F  # noqa: E402


def header(w, h, spp, bits_idx, b4=0, b5=0, b67=0):
    return bytes([w - 1, h - 1, spp - 1, bits_idx, b4, b5, b67 & 255, b67 >> 8])


def gdal_chunk(shape, dtype, opts, **kw):
    tmp = os.path.join(HERE, ".seed.tif")
    try:
        F.gdal_file(shape, dtype, opts, **kw)(tmp)
        return F.read_tiff(tmp)[1][0].chunks[0]
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def bilevel_chunk(w, h, codec):
    tmp = os.path.join(HERE, ".seed.tif")
    try:
        F.bilevel_file((1, h, w), ["COMPRESS=" + codec])(tmp)
        return F.read_tiff(tmp)[1][0].chunks[0]
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main():
    seeds = {
        "lzma": {
            "u16": header(24, 12, 1, 2) + gdal_chunk((1, 12, 24), "uint16", ["COMPRESS=LZMA"]),
            "f32_pred3": header(20, 8, 1, 3, b4=3, b5=4) + gdal_chunk(
                (1, 8, 20), "float32", ["COMPRESS=LZMA", "PREDICTOR=3"]),
        },
        "ccitt_rle": {"bilevel": header(64, 24, 1, 0) + bilevel_chunk(64, 24, "CCITTRLE")},
        "ccitt_g3": {"bilevel": header(64, 24, 1, 0) + bilevel_chunk(64, 24, "CCITTFAX3")},
        "ccitt_g4": {"bilevel": header(64, 24, 1, 0) + bilevel_chunk(64, 24, "CCITTFAX4")},
        "none": {
            "float16": header(8, 4, 1, 12, b5=4) +
            np.linspace(-3, 3, 32).astype(np.float16).tobytes(),
            "u12": header(8, 4, 1, 10) + bytes(range(48)),
            "cmyk": header(6, 4, 4, 1, b4=0x10) + bytes((i * 37) & 255 for i in range(96)),
            "cielab": header(6, 4, 3, 1, b4=0x20) + bytes((i * 53) & 255 for i in range(72)),
            "ycbcr22": header(6, 4, 3, 1, b4=0x30, b5=0x20) + bytes((i * 71) & 255
                                                                  for i in range(36)),
            "cint16_be": header(4, 4, 1, 3, b4=0x04, b5=1) + bytes(range(64)),
            "float24": header(4, 2, 1, 11, b5=4) + bytes(range(24)),
        },
    }
    t16 = F._tiled(16)
    files = {
        "fmt_lzma_u16_p2": F.gdal_file((1, 30, 40), "uint16",
                                       ["COMPRESS=LZMA", "PREDICTOR=2"] + t16),
        "fmt_g4": F.bilevel_file((1, 30, 40), ["COMPRESS=CCITTFAX4"] + t16),
        "fmt_g3_strips": F.bilevel_file((1, 30, 40), ["COMPRESS=CCITTFAX3", "BLOCKYSIZE=8"]),
        "fmt_cmyk": F.gdal_file((4, 20, 24), "uint8", ["PHOTOMETRIC=CMYK"] + t16),
        "fmt_cielab": F.gdal_file((3, 20, 24), "uint8", ["PHOTOMETRIC=CIELAB"]),
        "fmt_ycbcr22_lzw": F.ycbcr_file(21, 13, 2, 2, "LZW", rps=8),
        "fmt_float16_p3": F.gdal_file((1, 30, 40), "float32",
                                      ["NBITS=16", "COMPRESS=DEFLATE", "PREDICTOR=3"] + t16),
        "fmt_nbits12": F.nbits_file((2, 20, 24), "uint16", 12, ["COMPRESS=DEFLATE"]),
        "fmt_cint16_be": F.gdal_file((1, 20, 24), "cint16", ["ENDIANNESS=BIG"] + t16),
        "fmt_fillorder2": F.rewrite(F.gdal_file((1, 20, 24), "uint16", ["COMPRESS=LZW"]),
                                    F.fill_order_2),
        "fmt_subifds": F.rewrite(F.gdal_file((1, 30, 40), "uint8", ["COMPRESS=DEFLATE"] + t16,
                                                overviews=[2]),
                                 F.move_overviews_to_subifds),
        # old-style JPEG: the three places its JPEG header comes from
        "fmt_ojpeg_if_strips": F.ojpeg_file((3, 40, 24), "whole", rps=16),
        "fmt_ojpeg_header_jif": F.ojpeg_file((3, 30, 21), "header_jif", rps=16),
        "fmt_ojpeg_tables": F.ojpeg_file((3, 40, 24), "tables", rps=16),
    }
    only = sys.argv[1:]  # names to (re)write; all when none
    files = {k: v for k, v in files.items() if not only or k in only}
    seeds = {k: v for k, v in seeds.items() if not only}
    d = os.path.join(HERE, "seeds", "open")
    for name, make in files.items():
        make(os.path.join(d, name))
        print("%-12s %-18s %5d bytes" % ("open", name, os.path.getsize(os.path.join(d, name))))
    for target, files in seeds.items():
        d = os.path.join(HERE, "seeds", "codec_" + target)
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
            print("%-12s %-10s %5d bytes" % (target, name, len(data)))


if __name__ == "__main__":
    main()

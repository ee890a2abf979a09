#!/usr/bin/env python3
# test_codec_gdal_gen.py - fixture generator for test_codec_gdal.c (run by
# it as $CF_TEST_PYTHON test_codec_gdal_gen.py OUTDIR).  GDAL here is the
# one rasterio's wheel carries, but JPEG chunks are decoded by Debian's GDAL
# (libjpeg-turbo, as cogfeed): see docs/conformance.md.
# Writes GDAL GeoTIFFs for a matrix of codecs / types / byte orders / layouts
# and dumps, per chunk, the compressed bytes and GDAL's decoded pixels of
# the chunk's valid region, plus a manifest the C test walks.
import os, struct, sys
import numpy as np
import rasterio
from rasterio.errors import RasterioError
from rasterio.windows import Window

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'python'))
from conformance import debian_gdal_read  # noqa: E402
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
T = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 16: 8, 17: 8, 18: 8}

def ifd0(path):
    b = open(path, 'rb').read()
    be = b[:2] == b'MM'
    e = '>' if be else '<'
    magic = struct.unpack(e + 'H', b[2:4])[0]
    assert magic == 42, 'classic TIFF expected'
    off = struct.unpack(e + 'I', b[4:8])[0]
    n = struct.unpack(e + 'H', b[off:off + 2])[0]
    tags = {}
    for i in range(n):
        ent = b[off + 2 + 12 * i: off + 14 + 12 * i]
        tag, typ, cnt = struct.unpack(e + 'HHI', ent[:8])
        size = T[typ] * cnt
        data = ent[8:12] if size <= 4 else b[struct.unpack(e + 'I', ent[8:12])[0]:][:size]
        if typ in (1, 7, 2):
            tags[tag] = data[:size]
        else:
            f = {3: 'H', 4: 'I', 16: 'Q', 8: 'h', 9: 'i'}.get(typ)
            if f:
                tags[tag] = list(struct.unpack(e + f * cnt, data[:size]))
    return b, be, tags

DT = {'Byte': ('uint8', np.uint8), 'UInt16': ('uint16', np.uint16),
      'Int16': ('int16', np.int16), 'UInt32': ('uint32', np.uint32),
      'Int32': ('int32', np.int32), 'Float32': ('float32', np.float32),
      'Float64': ('float64', np.float64), 'Int64': ('int64', np.int64),
      'UInt64': ('uint64', np.uint64)}

def data(dt, bands, w, h, seed, nan=False, alpha=False, lowbit=False):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.empty((bands, h, w), dtype=DT[dt][1])
    for k in range(bands):
        base = (x * (k + 1) + y * 3) + rng.integers(0, 4, (h, w))
        if np.dtype(DT[dt][1]).kind == 'f':
            v = base * 0.37 - 20.5 + rng.random((h, w))
            if nan:
                v[(x + y) % 11 == 0] = np.nan
        else:
            v = base
            if DT[dt][1] in (np.int16, np.int32, np.int64):
                v = v - 150
            if DT[dt][1] in (np.uint32, np.uint64, np.int64):
                v = v * 1000003
        a[k] = v.astype(DT[dt][1]) if np.dtype(DT[dt][1]).kind == 'f' else np.asarray(v).astype(np.int64).astype(DT[dt][1])
    if lowbit:
        a = (a & 1).astype(np.uint8)
    if alpha:
        a[-1] = np.where((x + 2 * y) % 7 == 0, 0, 255)
    return a

cases = []
def add(name, comp, dt='Byte', bands=1, pred=None, big=False, tiled=True,
        planar=False, extra=(), w=260, h=140, **kw):
    cases.append((name, comp, dt, bands, pred, big, tiled, planar, list(extra), w, h, kw))

for comp in ['NONE', 'LZW', 'DEFLATE', 'ZSTD', 'PACKBITS']:
    for dt in ['Byte', 'UInt16', 'Int16', 'UInt32', 'Int32', 'Float32', 'Float64', 'Int64', 'UInt64']:
        preds = [None]
        if comp in ('LZW', 'DEFLATE', 'ZSTD'):
            preds += [2] if dt[0] != 'F' else [3]
        for pred in preds:
            for big in ([False, True] if dt != 'Byte' else [False]):
                add(f'{comp}_{dt}_p{pred}_{"be" if big else "le"}', comp, dt,
                    3 if dt in ('Byte', 'UInt16', 'Float32') else 1, pred, big)
    add(f'{comp}_strip', comp, 'UInt16', 2, 2 if comp in ('LZW', 'DEFLATE', 'ZSTD') else None,
        tiled=False)
    add(f'{comp}_planar', comp, 'Float32', 3, 3 if comp in ('LZW', 'DEFLATE', 'ZSTD') else None,
        big=True, planar=True)
    add(f'{comp}_1bit', comp, 'Byte', 1, None, extra=['NBITS=1'], lowbit=True)
add('LZW_big_strips', 'LZW', 'Byte', 1, 2, w=900, h=500, tiled=False)
add('ZSTD_pred2_wide', 'ZSTD', 'UInt16', 4, 2, w=700, h=300)
for sub in ['LERC', 'LERC_DEFLATE', 'LERC_ZSTD']:
    add(f'{sub}_f32_nan', sub, 'Float32', 1, nan=True)
    add(f'{sub}_f32x3_nan', sub, 'Float32', 3, nan=True)
    add(f'{sub}_f64', sub, 'Float64', 2)
    add(f'{sub}_u16_lossy', sub, 'UInt16', 1, extra=['MAX_Z_ERROR=2'])
    add(f'{sub}_i32', sub, 'Int32', 1)
    add(f'{sub}_rgba_alpha', sub, 'Byte', 4, extra=['ALPHA=YES'], alpha=True)
    add(f'{sub}_strip', sub, 'Byte', 3, tiled=False)
add('JPEG_gray', 'JPEG', 'Byte', 1)
add('JPEG_ycbcr', 'JPEG', 'Byte', 3, extra=['PHOTOMETRIC=YCBCR'])
add('JPEG_rgb', 'JPEG', 'Byte', 3)
add('JPEG_ycbcr_strip', 'JPEG', 'Byte', 3, tiled=False, extra=['PHOTOMETRIC=YCBCR'])
add('JPEG_ycbcr_q50', 'JPEG', 'Byte', 3, extra=['PHOTOMETRIC=YCBCR', 'JPEG_QUALITY=50'])
add('LERC_f64_nan', 'LERC', 'Float64', 1, nan=True)
add('LERC_f32_be', 'LERC', 'Float32', 1, big=True, nan=True)
add('LERC_DEFLATE_u16_be', 'LERC_DEFLATE', 'UInt16', 2, big=True)
add('ZSTD_f32_p2', 'ZSTD', 'Float32', 1, 2, big=True)
add('JPEG_rgba', 'JPEG', 'Byte', 4, alpha=True)
add('JPEG_planar', 'JPEG', 'Byte', 3, planar=True)
add('LERC_ZSTD_planar', 'LERC_ZSTD', 'Float32', 2, planar=True, nan=True)
add('WEBP_rgb_lossy', 'WEBP', 'Byte', 3)
add('WEBP_rgba_lossless', 'WEBP', 'Byte', 4, extra=['WEBP_LOSSLESS=YES'], alpha=True)
add('WEBP_rgba_lossy', 'WEBP', 'Byte', 4, alpha=True)

man = open(os.path.join(out, 'manifest.txt'), 'w')
COMP = {'NONE': 1, 'LZW': 5, 'DEFLATE': 8, 'ZSTD': 50000, 'PACKBITS': 32773,
        'LERC': 34887, 'LERC_DEFLATE': 34887, 'LERC_ZSTD': 34887, 'JPEG': 7, 'WEBP': 50001}
for ci, (name, comp, dt, bands, pred, big, tiled, planar, extra, w, h, kw) in enumerate(cases):
    path = os.path.join(out, f'{name}.tif')
    opts = [f'COMPRESS={comp}', f'ENDIANNESS={"BIG" if big else "LITTLE"}'] + extra
    opts += ['TILED=YES', 'BLOCKXSIZE=128', 'BLOCKYSIZE=128'] if tiled else ['BLOCKYSIZE=48']
    if pred: opts.append(f'PREDICTOR={pred}')
    if planar: opts.append('INTERLEAVE=BAND')
    arr = data(dt, bands, w, h, ci, nan=kw.get('nan', False), alpha=kw.get('alpha', False),
               lowbit=kw.get('lowbit', False))
    with rasterio.open(path, 'w', driver='GTiff', width=w, height=h, count=bands,
                       dtype=DT[dt][0],
                       **dict(o.split('=', 1) for o in opts)) as wds:
        wds.write(arr)
    ds = rasterio.open(path)
    full = debian_gdal_read(path) if comp == 'JPEG' else None
    raw, fbe, tags = ifd0(path)
    offs = tags.get(324, tags.get(273)); cnts = tags.get(325, tags.get(279))
    bits = tags[258][0]; sf = tags.get(339, [1])[0]; photo = tags[262][0]
    p = tags.get(317, [1])[0]; spp = tags[277][0]; pc = tags.get(284, [1])[0]
    cw = tags[322][0] if 322 in tags else w
    chh = tags[323][0] if 323 in tags else tags[278][0]
    lerc_sub = tags[50674][1] if 50674 in tags else 0
    ysub = tags.get(530, [2, 2])
    tabname = '-'
    if 347 in tags:
        tabname = f'{name}.tables'
        open(os.path.join(out, tabname), 'wb').write(tags[347])
    across = (w + cw - 1) // cw; down = (h + chh - 1) // chh
    per_plane = across * down
    cspp = 1 if pc == 2 else spp
    for k, (o, c) in enumerate(zip(offs, cnts)):
        plane = k // per_plane if pc == 2 else 0
        t = k % per_plane
        tx, ty = t % across, t // across
        x0, y0 = tx * cw, ty * chh
        vw, vh = min(cw, w - x0), min(chh, h - y0)
        rows = chh if tiled else vh
        blist = [plane + 1] if pc == 2 else list(range(1, bands + 1))
        cf = f'{name}.{k}.bin'; ef = f'{name}.{k}.exp'
        try:
            win = Window(x0, y0, vw, vh)
            if full is not None:  # pixel-interleaved, as the chunk holds them
                sel = full[[b - 1 for b in blist], y0:y0 + vh, x0:x0 + vw]
                exp = np.ascontiguousarray(sel.transpose(1, 2, 0)).tobytes()
            elif bits == 1:
                a = ds.read(1, window=win).astype(np.uint8)
                exp = np.packbits(a, axis=1).tobytes()
            else:  # pixel-interleaved, as the chunk holds them
                exp = np.ascontiguousarray(ds.read(blist, window=win).transpose(1, 2, 0)).tobytes()
            open(os.path.join(out, ef), 'wb').write(exp)
        except RasterioError:
            ef = '-'  # GDAL itself cannot read this chunk
        open(os.path.join(out, cf), 'wb').write(raw[o:o + c])
        man.write(f'{name} {cf} {ef} {tabname} {COMP[comp]} {lerc_sub} {p} {bits} {sf} {photo} '
                  f'{cw} {rows} {cspp} {int(fbe)} {vw} {vh} {ysub[0]} {ysub[1]}\n')
    ds.close()
    os.remove(path)
    if full is not None:
        os.remove(path + '.debian-l0.tif')
man.close()
print(len(cases), 'cases')

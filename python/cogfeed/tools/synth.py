"""cogfeed synth: a labelled Sentinel-2-like dataset made from nothing.

Each scene is a 4-band (B02, B03, B04, B08) uint16 surface-reflectance image
(scale 10000, as Sentinel-2 L2A) in a UTM zone at 10 m pixels, plus a uint8
land-cover mask.  Land cover comes from smooth spectral-synthesis (1/f)
noise fields, so regions have natural, fractal boundaries; each class has
its own spectral signature (water dark in NIR, vegetation bright in NIR,
bare soil bright in red...) plus within-class texture and sensor noise, so
that the images compress like real imagery (neither flat nor random) and a
segmentation model has something real to learn.

Everything derives from one numpy Generator seeded by (seed, scene index):
the same seed gives byte-identical files.
"""

import argparse
import os
import sys

import numpy as np

from .common import creation_kwargs, need

BANDS = ("B02", "B03", "B04", "B08")
CLASSES = ("water", "forest", "cropland", "grassland", "urban", "bare")

# Mean L2A reflectance x 10000 per class and band (B02 blue, B03 green,
# B04 red, B08 NIR), in the range of published Sentinel-2 spectra.
SIGNATURES = np.array([
    [620, 560, 380, 170],     # water: dark, NIR absorbed
    [260, 470, 280, 3100],    # forest: dark visible, high NIR (NDVI ~0.83)
    [480, 820, 560, 3900],    # cropland: brighter green, highest NIR
    [560, 880, 830, 2500],    # grassland: moderate NDVI (~0.5)
    [1250, 1300, 1380, 1750], # urban: flat, bright
    [1450, 1750, 2250, 2800], # bare soil: rising to the red
], dtype=np.float32)

# Relative within-class variation (texture amplitude) per class.
VARIATION = np.array([0.10, 0.12, 0.18, 0.14, 0.25, 0.12], dtype=np.float32)

class UsageError(ValueError):
    """A bad option value (reported without a traceback)."""


UTM_EPSG = 32633          # WGS 84 / UTM zone 33N
PIXEL_M = 10.0


def fractal_noise(rng, size, beta, lowcut=2.0):
    """Zero-mean, unit-variance field with a 1/f^beta power spectrum.

    beta ~ 3-4 gives smooth, landscape-like fields; ~2 gives fine texture.
    Frequencies below lowcut cycles per image are damped so one scene holds
    several regions instead of one gradient.
    """
    fy = np.fft.fftfreq(size)[:, None] * size
    fx = np.fft.rfftfreq(size)[None, :] * size
    f = np.sqrt(fx * fx + fy * fy)
    f[0, 0] = 1.0
    amp = f ** (-beta / 2.0)
    amp *= 1.0 - np.exp(-(f / lowcut) ** 2)
    amp[0, 0] = 0.0
    phase = rng.uniform(0, 2 * np.pi, size=amp.shape)
    spec = amp * np.exp(1j * phase)
    field = np.fft.irfft2(spec, s=(size, size))
    field -= field.mean()
    sd = field.std()
    return (field / sd if sd > 0 else field).astype(np.float32)


def _parcels(rng, size, cell):
    """Field parcels: a jittered grid of rectangles, one random value each.

    Cropland in real imagery is a patchwork of fields with sharp straight
    edges and different crop stages; this gives that structure.
    """
    n = size // cell + 2
    xs = np.cumsum(rng.integers(cell // 2, cell * 3 // 2, size=n))
    ys = np.cumsum(rng.integers(cell // 2, cell * 3 // 2, size=n))
    ix = np.searchsorted(xs, np.arange(size))
    iy = np.searchsorted(ys, np.arange(size))
    vals = rng.normal(0.0, 1.0, size=(n + 1, n + 1)).astype(np.float32)
    return vals[iy[:, None], ix[None, :]]


def land_cover(rng, size):
    """uint8 class map: water in the lowest terrain, the rest by argmax of
    per-class smooth fields (so boundaries follow the fields' contours)."""
    scale = max(size / 1024.0, 0.25)
    elev = fractal_noise(rng, size, 3.6, lowcut=2.0 * scale)
    fields = np.stack([fractal_noise(rng, size, 3.2, lowcut=3.0 * scale)
                       for _ in range(len(CLASSES) - 1)])
    # Urban and bare are rarer than vegetation in most Sentinel-2 scenes.
    bias = np.array([0.2, 0.3, 0.1, -0.25, -0.35], dtype=np.float32)
    fields += bias[:, None, None]
    # Forest likes high ground, cropland low ground.
    fields[0] += 0.4 * elev
    fields[1] -= 0.3 * elev
    cls = (np.argmax(fields, axis=0) + 1).astype(np.uint8)
    water_level = np.quantile(elev, rng.uniform(0.06, 0.16))
    cls[elev < water_level] = 0
    return cls


def render(rng, cls):
    """4-band uint16 reflectance for a class map."""
    size = cls.shape[0]
    sig = SIGNATURES[cls]                        # (H, W, 4)
    var = VARIATION[cls][..., None]
    # Texture shared by bands (brightness) and a band-specific part
    # (e.g. vegetation vigour changes NIR more than visible).
    bright = fractal_noise(rng, size, 2.4, lowcut=1.0)
    vigour = fractal_noise(rng, size, 2.8, lowcut=1.0)
    parcels = _parcels(rng, size, cell=max(size // 16, 8))
    is_crop = (cls == 2)[..., None]
    mod = np.broadcast_to(1.0 + var * (0.6 * bright[..., None]),
                          sig.shape).copy()
    nir_weight = np.array([0.2, 0.3, -0.3, 1.0], dtype=np.float32)
    mod += var * 0.5 * vigour[..., None] * nir_weight
    mod += is_crop * 0.25 * parcels[..., None] * nir_weight
    img = sig * np.clip(mod, 0.2, 3.0)
    # Sensor noise: a read-noise floor plus a signal-dependent part.
    img += rng.normal(0.0, 1.0, size=img.shape).astype(np.float32) * \
        (8.0 + 0.01 * img)
    img = np.clip(np.rint(img), 1, 10000).astype(np.uint16)
    return np.ascontiguousarray(img.transpose(2, 0, 1))   # (4, H, W)


def _write(path, arr, geotransform, names, creation):
    """arr (bands, H, W) as a COG through the GDAL of rasterio's wheel."""
    rasterio = need("rasterio")
    import rasterio.shutil
    from rasterio.io import MemoryFile
    from rasterio.transform import Affine
    bands, h, w = arr.shape
    prof = dict(driver="GTiff", width=w, height=h, count=bands,
                dtype=arr.dtype.name, crs="EPSG:%d" % UTM_EPSG,
                transform=Affine.from_gdal(*geotransform))
    tmp = path + ".part"
    with MemoryFile() as mf:
        with mf.open(**prof) as m:
            m.write(arr)
            for i in range(bands):
                m.set_band_description(i + 1, names[i])
        with mf.open() as m:
            rasterio.shutil.copy(m, tmp, driver="COG",
                                 **creation_kwargs(creation))
    os.replace(tmp, path)


def scene_paths(outdir, i):
    return (os.path.join(outdir, "images", "scene_%03d.tif" % i),
            os.path.join(outdir, "masks", "scene_%03d.tif" % i))


def make_scene(seed, i, size):
    """(image (4,H,W) uint16, mask (H,W) uint8, geotransform) for scene i."""
    rng = np.random.default_rng([seed, i])
    cls = land_cover(rng, size)
    img = render(rng, cls)
    # Scenes sit side by side in one UTM zone, like adjacent tiles.
    x0 = 300000.0 + i * size * PIXEL_M
    y0 = 5100000.0
    gt = (x0, PIXEL_M, 0.0, y0, 0.0, -PIXEL_M)
    return img, cls, gt


def synth(outdir, scenes=4, size=1024, seed=0, tile=512, progress=True):
    """Write scenes to OUTDIR/images and OUTDIR/masks; return the paths."""
    if size < 64 or size > 16384:
        raise UsageError("synth: --size must be in 64..16384, got %d" % size)
    if scenes < 1:
        raise UsageError("synth: --scenes must be >= 1")
    os.makedirs(os.path.join(outdir, "images"), exist_ok=True)
    os.makedirs(os.path.join(outdir, "masks"), exist_ok=True)
    blk = str(min(tile, max(128, 1 << (size.bit_length() - 1))))
    # Lossless, predictor on: the dataset's own encoding; convert makes the
    # variants.  No overviews: training reads level 0.
    img_co = ["COMPRESS=DEFLATE", "PREDICTOR=YES", "LEVEL=6",
              "BLOCKSIZE=" + blk, "OVERVIEWS=NONE"]
    msk_co = ["COMPRESS=DEFLATE", "LEVEL=6", "BLOCKSIZE=" + blk,
              "OVERVIEWS=NONE"]
    out = []
    for i in range(scenes):
        img, cls, gt = make_scene(seed, i, size)
        ip, mp = scene_paths(outdir, i)
        _write(ip, img, gt, BANDS, img_co)
        _write(mp, cls[None], gt, ("landcover",), msk_co)
        out.append((ip, mp))
        if progress and sys.stderr.isatty():
            sys.stderr.write("synth: scene %d/%d %s\n" % (i + 1, scenes, ip))
    return out


def main(argv):
    p = argparse.ArgumentParser(
        prog="cogfeed synth",
        description="Generate a labelled Sentinel-2-like dataset "
                    "(4-band uint16 images + uint8 land-cover masks).")
    p.add_argument("outdir", help="folder to write (created if missing)")
    p.add_argument("--layout", choices=("scenes", "s2"), default="scenes",
                   help="scenes: 4-band images + masks (default); s2: one "
                        "Sentinel-2-like tile, a COG per band at 10/20/60 m, "
                        "SCL, a DEM in EPSG:4326 and labels on another grid")
    p.add_argument("--scenes", type=int, default=4,
                   help="number of scenes (default 4; scenes layout only)")
    p.add_argument("--size", type=int, default=None,
                   help="scene width and height in pixels (default 1024; s2: "
                        "the 10 m bands', a multiple of 6, default 1098)")
    p.add_argument("--seed", type=int, default=0,
                   help="random seed: the same seed writes the same files "
                        "(default 0)")
    p.add_argument("--tile", type=int, default=512,
                   help="internal tile size of the written COGs (default "
                        "512, both layouts)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr")
    a = p.parse_args(argv)
    if a.layout == "s2":
        from . import synth_s2
        try:
            paths = synth_s2.synth_s2(a.outdir, a.size or 1098, a.seed, a.tile, not a.quiet)
        except UsageError as e:
            sys.stderr.write("cogfeed %s\n" % e)
            return 2
        print("wrote a Sentinel-2-like tile (%d files) to %s" % (
            len(paths), os.path.dirname(paths["B02"])))
        return 0
    a.size = a.size or 1024
    try:
        synth(a.outdir, a.scenes, a.size, a.seed, a.tile, not a.quiet)
    except UsageError as e:
        sys.stderr.write("cogfeed %s\n" % e)
        return 2
    print("wrote %d scenes (%dx%d, bands %s, classes %s) to %s" % (
        a.scenes, a.size, a.size, ",".join(BANDS), ",".join(CLASSES),
        a.outdir))
    return 0

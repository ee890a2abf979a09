"""The paper-style baseline loader, kept to compare cogfeed against.

This is what "Optimizing Cloud-to-GPU Throughput for Deep Learning With
Earth Observation Data" starts from (and what TorchGeo-style pipelines do):
a torch DataLoader with N worker processes; every patch is read by
rasterio (GDAL), which opens the file anew for each patch (paying the
header read each time, softened only by GDAL's per-process /vsicurl/
cache), reads one window of the image and of the mask, and returns
tensors that the default collate stacks into a batch.  Remote files are
read through /vsicurl/.

Windows are a pure function of (seed, index), so every worker agrees on
them without sharing state, and a run is reproducible.
"""

import os

import numpy as np

SAMPLERS = ("random", "blocked", "grid")

# What GDAL gets in each worker.  EMPTY_DIR stops /vsicurl/ from listing
# the server's directory on every open (which an HTTP server without
# autoindex answers with 404s); the paper's tuned runs set it too.
GDAL_ENV = {
    "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
    "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif,.tiff",
}


def gdal_path(url):
    """rasterio/GDAL path for a local path or an http(s) URL."""
    if url.startswith(("http://", "https://")):
        return "/vsicurl/" + url
    if url.startswith("file://"):
        return url[len("file://"):]
    return url


def _proc_io():
    """(rchar, syscr) of this process: bytes and read calls so far."""
    rchar = syscr = 0
    try:
        with open("/proc/self/io") as f:
            for line in f:
                k, v = line.split(":")
                if k == "rchar":
                    rchar = int(v)
                elif k == "syscr":
                    syscr = int(v)
    except OSError:
        pass
    return rchar, syscr


class Scene:
    """What the main process learns about a file once (TorchGeo builds the
    same index up front)."""

    def __init__(self, url):
        import rasterio
        with rasterio.Env(**GDAL_ENV):
            with rasterio.open(gdal_path(url)) as ds:
                self.url = url
                self.width = ds.width
                self.height = ds.height
                self.count = ds.count
                self.dtype = np.dtype(ds.dtypes[0])
                bh, bw = ds.block_shapes[0]
                self.tile_w, self.tile_h = bw, bh
        _drop_curl_state()


def _drop_curl_state():
    """Forget GDAL's /vsicurl/ connections and cached regions.

    Worker processes are forked from the main process: a curl connection
    opened there and inherited by several workers is one socket read by
    many processes, which corrupts responses (GDAL then reports
    TIFFReadEncodedTile() failed).  The main process drops its state after
    indexing, and each worker again when it starts.  The GDAL cleared is
    rasterio's own (a PyPI wheel carries its own GDAL): rasterio >= 1.5
    has rasterio.cache for it; for older ones its libgdal is called
    through ctypes.
    """
    try:
        import rasterio.cache
    except ImportError:
        gdal = _libgdal()
        if gdal is not None:
            gdal.VSICurlClearCache()
    else:
        rasterio.cache.invalidate_all()


def _libgdal():
    """The libgdal that rasterio loaded (ctypes): rasterio < 1.5 has no
    Python call for VSICurlClearCache.  None if it cannot be found."""
    import ctypes
    import rasterio  # noqa: F401  (loads its libgdal)
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "/libgdal" in path and ".so" in path:
                return ctypes.CDLL(path)
    return None


def window_for(scenes, patch, sampler, seed, index):
    """(scene index, x, y) of patch number `index`."""
    if sampler == "grid":
        # Row-major sweep of non-overlapping patches, scene after scene.
        counts = [(s.width // patch) * (s.height // patch) for s in scenes]
        total = sum(counts)
        k = index % total
        for si, c in enumerate(counts):
            if k < c:
                per_row = scenes[si].width // patch
                return si, (k % per_row) * patch, (k // per_row) * patch
            k -= c
    rng = np.random.default_rng([seed, index])
    si = int(rng.integers(len(scenes)))
    s = scenes[si]
    if sampler == "random":
        x = int(rng.integers(0, s.width - patch + 1))
        y = int(rng.integers(0, s.height - patch + 1))
        return si, x, y
    # blocked: the paper's tile-aligned sampler.  A patch no larger than a
    # tile lies inside one tile; a larger one starts on a tile corner.
    tx = max(1, (s.width - patch) // s.tile_w + 1)
    ty = max(1, (s.height - patch) // s.tile_h + 1)
    ox = int(rng.integers(tx)) * s.tile_w
    oy = int(rng.integers(ty)) * s.tile_h
    if patch < s.tile_w:
        ox += int(rng.integers(0, s.tile_w - patch + 1))
    if patch < s.tile_h:
        oy += int(rng.integers(0, s.tile_h - patch + 1))
    return si, min(ox, s.width - patch), min(oy, s.height - patch)


class PatchDataset:
    """Map-style dataset: item i = the patch window_for(..., i)."""

    def __init__(self, images, masks, patch, sampler, seed, length,
                 mean=None, std=None, dtype="raw"):
        import torch  # noqa: F401  (fail here, not in a worker)
        if sampler not in SAMPLERS:
            raise ValueError("baseline loader: sampler %r not supported "
                             "(one of %s)" % (sampler, ", ".join(SAMPLERS)))
        self.scenes = [Scene(u) for u in images]
        for s in self.scenes:
            if s.width < patch or s.height < patch:
                raise ValueError("baseline loader: %s is %dx%d, smaller "
                                 "than patch %d" % (s.url, s.width,
                                                    s.height, patch))
        self.masks = list(masks) if masks else None
        self.patch = patch
        self.sampler = sampler
        self.seed = seed
        self.length = length
        self.dtype = dtype
        self.mean = None if mean is None else \
            np.asarray(mean, np.float32)[:, None, None]
        self.std = None if std is None else \
            np.asarray(std, np.float32)[:, None, None]

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        import rasterio
        from rasterio.windows import Window
        import torch
        r0, c0 = _proc_io()
        si, x, y = window_for(self.scenes, self.patch, self.sampler,
                              self.seed, i)
        w = Window(x, y, self.patch, self.patch)
        with rasterio.Env(**GDAL_ENV):
            with rasterio.open(gdal_path(self.scenes[si].url)) as ds:
                img = ds.read(window=w)
            m = None
            if self.masks:
                with rasterio.open(gdal_path(self.masks[si])) as ds:
                    m = ds.read(1, window=w)
        r1, c1 = _proc_io()
        if self.dtype == "float32" or img.dtype == np.uint16:
            # torch 1.13 has no uint16 tensor; TorchGeo does .float() too.
            img = img.astype(np.float32)
            if self.mean is not None:
                img -= self.mean
            if self.std is not None:
                img /= self.std
        out = {"image": torch.from_numpy(img),
               "window": torch.tensor([si, x, y, self.patch, self.patch]),
               "io": torch.tensor([r1 - r0, c1 - c0], dtype=torch.int64)}
        if m is not None:
            out["mask"] = torch.from_numpy(m[None].astype(np.int64))
        return out


def _worker_init(_):
    # One GDAL thread per worker, as in the paper's default; rasterio.Env
    # in __getitem__ supplies the rest of the configuration.
    os.environ.setdefault("GDAL_NUM_THREADS", "1")
    _drop_curl_state()
    import torch
    torch.set_num_threads(1)


class BaselineLoader:
    """Iterate batches {"image", "mask", "windows"} the paper's way."""

    def __init__(self, images, masks=None, patch_size=256, batch_size=32,
                 sampler="random", seed=0, workers=4, prefetch_factor=2,
                 length=10 ** 9, mean=None, std=None, dtype="raw"):
        from torch.utils.data import DataLoader
        self.dataset = PatchDataset(images, masks, patch_size, sampler,
                                    seed, length, mean, std, dtype)
        self.workers = workers
        kw = {}
        if workers > 0:
            kw = {"prefetch_factor": prefetch_factor,
                  "persistent_workers": True,
                  "worker_init_fn": _worker_init}
        self.dl = DataLoader(self.dataset, batch_size=batch_size,
                             shuffle=False, num_workers=workers, **kw)
        self._it = None
        self.io_bytes = 0
        self.io_calls = 0
        self.patches = 0
        self.src_itemsize = self.dataset.scenes[0].dtype.itemsize

    def __iter__(self):
        self._it = iter(self.dl)
        for b in self._it:
            io = b.pop("io")
            self.io_bytes += int(io[:, 0].sum())
            self.io_calls += int(io[:, 1].sum())
            self.patches += b["image"].shape[0]
            b["windows"] = b.pop("window")
            yield b

    def worker_pids(self):
        """pids of the live worker processes (for CPU and RSS accounting)."""
        it = self._it
        ws = getattr(it, "_workers", None) or []
        return [w.pid for w in ws if w.pid]

    def stats(self):
        return {"patches": self.patches, "local_read_bytes": self.io_bytes,
                "local_read_calls": self.io_calls}

    def close(self):
        it, self._it = self._it, None
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()

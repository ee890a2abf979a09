"""Helpers the research commands share: finding a dataset's files, serving
them over HTTP with latency, building either loader, and measuring a
process tree's CPU time, memory and traffic."""

import contextlib
import glob
import json
import os
import re

# Loader keyword names a config (best.json) may carry, with the bench
# defaults.  None means "the loader's own default" (for concurrency:
# adaptive).
LOADER_KEYS = {
    "patch_size": 256,
    "batch_size": 32,
    "sampler": "random",
    "seed": 0,
    "prefetch": None,
    "concurrency": None,
    "decode_threads": None,
    "cache_bytes": None,
    "dtype": "raw",
}


def _tifs(pattern):
    if os.path.isdir(pattern):
        return sorted(glob.glob(os.path.join(pattern, "*.tif")) +
                      glob.glob(os.path.join(pattern, "*.tiff")))
    if any(c in pattern for c in "*?["):
        return sorted(glob.glob(pattern))
    return [pattern]


def resolve(images, masks=None):
    """(image paths, mask paths or None) from a file, folder or glob.

    A dataset folder holding images/ and masks/ (what synth and convert
    write) gives both.  Masks pair with images by sorted order.
    """
    if masks is None and os.path.isdir(images) and \
            os.path.isdir(os.path.join(images, "images")):
        root = images
        images = os.path.join(root, "images")
        if os.path.isdir(os.path.join(root, "masks")):
            masks = os.path.join(root, "masks")
    imgs = _tifs(images)
    if not imgs:
        raise FileNotFoundError("no GeoTIFFs match %s" % images)
    msks = _tifs(masks) if masks else None
    if msks is not None and len(msks) != len(imgs):
        raise ValueError("%d images but %d masks (%s, %s)" % (
            len(imgs), len(msks), images, masks))
    return imgs, msks


def load_config(path):
    """A config JSON (e.g. tune's best.json) as a dict."""
    with open(path) as f:
        cfg = json.load(f)
    if not isinstance(cfg, dict):
        raise ValueError("%s: a config is a JSON object" % path)
    return cfg


@contextlib.contextmanager
def served(paths, latency_ms, server="auto"):
    """Serve the common folder of `paths` on 127.0.0.1 at latency_ms
    first-byte latency; yields (server, url-of(path) function).  server:
    "nginx" (with the lua module), "python" (cogfeed's own range server)
    or "auto" (nginx when installed, else the Python one; the server's
    describe() and fallback say which and why)."""
    from . import servers
    root = os.path.commonpath([os.path.dirname(os.path.abspath(p))
                               for p in paths])
    # The access log is what tells bench how many requests and bytes a
    # loader really cost over http.
    # Object storage is many servers: one nginx worker per 4 cores keeps
    # the server from being the bottleneck on big machines (1 on 2 cores).
    srv = servers.server(root, latency_ms, server, access_log=True,
                         workers=max(1, (os.cpu_count() or 1) // 4))
    with srv as s:
        def url(p):
            return s.url(os.path.relpath(os.path.abspath(p), root))
        yield s, url


def server_note(srv):
    """One line saying which server served the files, and why."""
    text = srv.describe()
    if getattr(srv, "fallback", None):
        text += " (%s)" % srv.fallback
    return text


def access_log(server):
    """Path of the server's access log (Nginx(access_log=True) writes
    combined-format lines to TMP/access.log), or None."""
    tmp = getattr(server, "tmp", None)
    if getattr(server, "access_log", False) and tmp:
        p = os.path.join(tmp, "access.log")
        if not os.path.exists(p):
            open(p, "a").close()
        return p
    return None


_LOG_RE = re.compile(r'" (\d{3}) (\d+)')


class LogCounter:
    """Requests and body bytes an nginx access log gained between two
    points (combined log format: ... "GET ..." status bytes ...)."""

    def __init__(self, path):
        self.path = path
        self.off = os.path.getsize(path) if path else 0

    def take(self):
        if not self.path:
            return None, None
        n = b = 0
        with open(self.path, "rb") as f:
            f.seek(self.off)
            data = f.read()
        self.off += len(data)
        for line in data.decode("latin-1").splitlines():
            m = _LOG_RE.search(line)
            if m:
                n += 1
                b += int(m.group(2))
        return n, b


def _status_kb(pid, key):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def proc_stat(path):
    """(name, fields after the name) of a /proc/<pid>[/task/<tid>]/stat
    file, or None when it is gone; fields[1] is the parent pid, fields[11]
    and fields[12] the user and system CPU ticks."""
    try:
        with open(path) as f:
            line = f.read()
    except OSError:
        return None
    i, j = line.find("("), line.rfind(")")
    if i < 0 or j < i:
        return None
    return line[i + 1:j], line[j + 1:].split()


def _cpu_s(fields):
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _user_sys_s(fields):
    hz = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / hz, int(fields[12]) / hz


def cpu_by_thread(pids, split=False):
    """{thread name: user + system CPU seconds} over the processes' live
    threads (cogfeed names its own: cf-reader, cf-io, cf-decode), for
    telling where a loader's CPU goes; {} where /proc has no tasks.  With
    split, each value is (user, system) seconds."""
    out = {}
    for pid in pids:
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            st = proc_stat("/proc/%d/task/%s/stat" % (pid, tid))
            if not st:
                continue
            if split:
                u, s = _user_sys_s(st[1])
                u0, s0 = out.get(st[0], (0.0, 0.0))
                out[st[0]] = (u0 + u, s0 + s)
            else:
                out[st[0]] = out.get(st[0], 0.0) + _cpu_s(st[1])
    return out


def descendants(pid):
    """pid and every process below it (children, their children, ...)."""
    children = {}
    for d in os.listdir("/proc"):
        st = proc_stat("/proc/%s/stat" % d) if d.isdigit() else None
        if st:
            children.setdefault(int(st[1][1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def machine_ticks():
    """The whole machine's clock ticks from /proc/stat: (busy, all,
    softirq), busy being all but idle and iowait."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4], sum(v), v[6]


def cpu_seconds(pids):
    """user + system CPU seconds of the processes (all their threads)."""
    t = 0.0
    for pid in pids:
        st = proc_stat("/proc/%d/stat" % pid)
        if st:
            t += _cpu_s(st[1])
    return t


def peak_rss_mb(pids):
    """Sum of peak resident sets (VmHWM) of the processes, MB."""
    return sum(_status_kb(p, "VmHWM") for p in pids) / 1024.0


def need(module, extra="experiments"):
    """Import an optional dependency, or say which extra brings it."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise RuntimeError(
            "%s is not installed (%s): pip install 'cogfeed[%s]'"
            % (module.split(".")[0], e, extra))


def creation_kwargs(options):
    """GDAL creation options ["KEY=VALUE", ...] as rasterio keywords."""
    return dict(o.split("=", 1) for o in options)


def import_cogfeed():
    """The cogfeed extension package, or a clear error saying how to get it."""
    try:
        import cogfeed
        cogfeed.Loader
    except (ImportError, AttributeError) as e:
        raise RuntimeError(
            "cogfeed's Python extension is not importable (%s); build it "
            "(cmake --build BUILD) and set PYTHONPATH=BUILD/python" % e)
    return cogfeed


def cog_shape(path):
    """(width, height, bands, bytes per sample) of a COG, read with
    cogfeed."""
    with import_cogfeed().open(path) as c:
        return c.width, c.height, c.count, c.dtype.itemsize


def make_loader(kind, images, masks, settings, baseline_workers=4,
                baseline_prefetch=2, mean=None, std=None, **cogfeed_extra):
    """A loader of either kind from Loader keyword settings
    (cogfeed_extra: more cf.Loader arguments, e.g. epoch_length)."""
    s = {k: v for k, v in settings.items() if v is not None}
    if kind == "baseline":
        return _Baseline(images, masks, s, baseline_workers,
                         baseline_prefetch, mean, std)
    if kind != "cogfeed":
        raise ValueError("unknown loader %r (cogfeed or baseline)" % kind)
    cf = import_cogfeed()
    kw = {k: s[k] for k in LOADER_KEYS if k in s}
    if mean is not None:
        kw["mean"] = mean
    if std is not None:
        kw["std"] = std
    kw.update(cogfeed_extra)
    return _Cogfeed(cf.Loader(images, masks=masks, **kw))


class _Stream:
    """Both loaders stop at the end of each epoch and go on with the next;
    benchmarks and training runs stream across epochs."""

    def __iter__(self):
        while True:
            got = False
            for b in self.loader:
                got = True
                yield b
            if not got:
                raise RuntimeError("%s loader: an epoch with no batch" % self.kind)


class _Cogfeed(_Stream):
    kind = "cogfeed"

    def __init__(self, loader):
        self.loader = loader

    def pids(self):
        return [os.getpid()]

    def stats(self):
        return dict(self.loader.stats())

    def close(self):
        c = getattr(self.loader, "close", None)
        if c:
            c()


class _Baseline(_Stream):
    kind = "baseline"

    def __init__(self, images, masks, s, workers, prefetch, mean, std):
        from .baseline import BaselineLoader
        self.loader = BaselineLoader(
            images, masks, patch_size=s.get("patch_size", 256),
            batch_size=s.get("batch_size", 32),
            sampler=s.get("sampler", "random"), seed=s.get("seed", 0),
            workers=workers, prefetch_factor=prefetch, mean=mean, std=std,
            dtype=s.get("dtype", "raw"))

    def pids(self):
        return [os.getpid()] + self.loader.worker_pids()

    def stats(self):
        return self.loader.stats()

    def close(self):
        self.loader.close()


def batch_arrays(batch):
    """(image, mask or None) of a batch dict, tuple or tensor."""
    if isinstance(batch, dict):
        return batch["image"], batch.get("mask")
    if isinstance(batch, (tuple, list)):
        return batch[0], (batch[1] if len(batch) > 1 else None)
    return batch, None


def nelem(a):
    n = 1
    for d in a.shape:
        n *= int(d)
    return n


def save_fig(fig, out, name):
    """Lay out, write out/name (80 dpi) and close a matplotlib figure;
    returns the path."""
    import matplotlib.pyplot as plt
    fig.tight_layout()
    path = os.path.join(out, name)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path

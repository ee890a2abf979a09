"""The demo as a pip user gets it: the wheel installed with its
`[experiments]` extra into a fresh virtual environment, `cogfeed demo
--quick` and `cogfeed bench --serve-latency-ms 50` run from a folder
outside the source tree (with --train --budget 1: a second of training
per set-up, then the prediction of the held-out scene written as a COG),
with nothing of the checkout reachable (no
PYTHONPATH, no CF_SOURCE_DIR, no build tree): whatever they serve the
files with must come with the wheel.

The extra's dependencies (torch CPU, optuna, matplotlib, rasterio) are not
downloaded again: a .pth file names the project venv's site-packages (as
run.sh's test_env does; it never holds cogfeed), so pip finds them
installed, and pip runs with --no-index, so an extra that forced another
download (a CUDA torch) fails here instead of fetching gigabytes.

$CF_WHEEL is the repaired wheel (run.sh test); without it (a build tree's
run) the test is skipped: the build tree is not a wheel.
"""
import json
import os
import subprocess
import sys
import sysconfig

import pytest

WHEEL = os.environ.get("CF_WHEEL")
pytestmark = pytest.mark.skipif(
    not WHEEL, reason="no wheel given (CF_WHEEL; ./run.sh test builds one)")

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
# What could lead an installed cogfeed back to a checkout or a build tree.
LEAKS = ("PYTHONPATH", "CF_SOURCE_DIR", "CF_BUILD_DIR", "CF_TOOLS_DIR",
         "COGFEED_BIN", "CF_TEST_DATA")


def sh(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       timeout=600, **kw)
    assert r.returncode == 0, "%s failed (%d):\n%s\n%s" % (
        " ".join(map(str, cmd)), r.returncode, r.stdout[-4000:],
        r.stderr[-4000:])
    return r


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A fresh venv with the wheel and its [experiments] extra."""
    d = tmp_path_factory.mktemp("demoenv") / "venv"
    # No pip or setuptools of its own (Debian's venv would bring an older
    # setuptools than torch requires, shadowing the borrowed one): the
    # running interpreter's pip installs into it, as run.sh's test_env.
    sh(["/usr/bin/python3", "-m", "venv", "--without-pip", d])
    py = d / "bin" / "python"
    tsite = sh([py, "-c", "import sysconfig; "
                "print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    # This interpreter's site-packages: the project venv's (or, under
    # run.sh test, the test venv's, which reaches it through its own .pth).
    here = sysconfig.get_paths()["purelib"]
    sites = [here]
    for f in os.listdir(here):
        if f.endswith(".pth") and f.startswith("cf_"):
            with open(os.path.join(here, f)) as fh:
                sites += [ln.strip() for ln in fh if ln.strip()]
    sites = [s for s in sites
             if not os.path.exists(os.path.join(s, "cogfeed"))]
    assert sites, "no site-packages without cogfeed to borrow from"
    with open(os.path.join(tsite, "cf_dev_tools.pth"), "w") as f:
        f.write("\n".join(sites) + "\n")
    r = sh([sys.executable, "-m", "pip", "--python", py, "install",
            "--no-index", "--find-links",
            os.path.dirname(WHEEL), WHEEL + "[experiments]"],
           env=dict(clean_env(), PIP_DISABLE_PIP_VERSION_CHECK="1"))
    # Only cogfeed was installed: the CPU torch already there satisfied
    # the extra (pip does not replace it).
    done = [ln for ln in r.stdout.splitlines()
            if ln.startswith("Successfully installed")]
    assert done and done[0].split()[2:] and all(
        n.startswith("cogfeed-") for n in done[0].split()[2:]), r.stdout
    return d


def clean_env():
    e = {k: v for k, v in os.environ.items() if k not in LEAKS}
    e["PYTHONWARNINGS"] = "ignore"
    return e


def test_installed_from_the_wheel_only(env, tmp_path):
    py = env / "bin" / "python"
    out = sh([py, "-c", "import cogfeed.tools.servers as s, os; "
              "print(s.__file__); print(s.HERE); "
              "print(os.path.isfile(os.path.join(os.path.dirname(s.__file__),"
              " 'nginx', 'nginx.conf.in')))"],
             cwd=tmp_path, env=clean_env()).stdout.split()
    assert out[0].startswith(str(env)) and not out[0].startswith(SOURCE)
    assert out[2] == "True"  # the nginx configuration is package data


def test_demo_quick_and_bench_outside_the_source_tree(env, tmp_path):
    exe = env / "bin" / "cogfeed"
    cwd = tmp_path / "run"
    cwd.mkdir()
    assert not str(cwd).startswith(SOURCE)
    r = sh([exe, "demo", "--quick", "--train", "--budget", 1, "--out",
            "demo"], cwd=cwd, env=clean_env())
    text = r.stdout
    for name in ("baseline-local", "cogfeed-local", "baseline-remote",
                 "cogfeed-remote"):
        assert name in text, text
    lines = text.splitlines()
    # the streaming table (the training table below names the set-ups too)
    lines = lines[:[j for j, ln in enumerate(lines)
                    if ln.startswith("training ")][0]]
    for name in ("baseline-local", "cogfeed-local", "baseline-remote",
                 "cogfeed-remote"):
        i = [j for j, ln in enumerate(lines) if ln.startswith(name + " ")]
        assert len(i) == 1 and " 1 (cold) " in lines[i[0]], text
        assert " 2+ (warm) " in lines[i[0] + 1], text
    assert "cache_bytes=0" in text, text
    assert "remote: nginx with the lua latency module" in text or \
        "remote: cogfeed's pure-Python range server" in text, text
    rows = json.loads((cwd / "demo" / "bench.json").read_text())
    assert len(rows) == 4
    for row in rows:
        cold, warm = row["passes"]["cold"], row["passes"]["warm"]
        assert cold["complete"] and warm and warm["patches"] > 0, row["name"]
        assert cold["requests"] > 0, row["name"]
        if row["loader"] == "cogfeed":
            # streaming: no cache, every pass fetched and decoded
            assert row["settings"]["cache_bytes"] == 0
            assert warm["requests"] > 0 and warm["bytes_fetched"] > 0
            assert warm["cache_hits"] == 0 and warm["cache_misses"] == 0
    check_prediction(cwd / "demo", text)
    data = cwd / "demo" / "data" / "lerc_zstd_512"
    for server in ("auto", "python"):
        out = sh([exe, "bench", "--images", data, "--serve-latency-ms", 50,
                  "--server", server, "--batches", 8, "--json"], cwd=cwd,
                 env=clean_env()).stdout
        b = json.loads(out)
        assert b["transport"] == "http" and b["latency_ms"] == 50
        assert b["requests"] is not None and b["passes"]["cold"]["requests"] > 0
        assert b["server"], b
        if server == "python":
            assert b["server"].startswith("cogfeed's pure-Python range server")


def check_prediction(out, text):
    """The demo's last step: predictions.tif, written by cogfeed's writer,
    is a valid COG on the held-out scene's grid (the last scene, which the
    experiment does not train on) holding only the label's classes; the
    PNG beside it; the whole-scene mIoU in the summary."""
    import numpy as np
    import rasterio
    from rio_cogeo.cogeo import cog_validate
    pred = out / "predictions.tif"
    ok, errors, warnings = cog_validate(str(pred), quiet=True)
    assert ok and not errors, (errors, warnings)
    label = sorted((out / "data" / "lerc_zstd_512" / "masks").glob("*.tif"))[-1]
    with rasterio.open(pred) as p, rasterio.open(label) as m:
        assert (p.width, p.height, p.count) == (m.width, m.height, 1)
        assert p.crs == m.crs and p.transform == m.transform
        assert p.dtypes[0] == "uint8"
        got, truth = p.read(1), m.read(1)
    classes = 6  # synth.CLASSES
    assert truth.min() >= 0 and truth.max() < classes
    # every pixel predicted (no 255), and only the label's classes
    assert got.max() < classes, np.unique(got)
    assert label.name in text, text
    line = [ln for ln in text.splitlines()
            if ln.startswith("whole-scene mIoU against the ground truth: ")]
    assert len(line) == 1, text
    miou = float(line[0].split(": ")[1].split()[0])
    # the summary's mIoU is the file's against the label
    ious = [np.sum((got == k) & (truth == k)) / np.sum((got == k) | (truth == k))
            for k in range(classes) if np.any((got == k) | (truth == k))]
    assert abs(miou - float(np.mean(ious))) < 6e-4, (miou, ious)
    png = out / "prediction.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert str(png) in text or "prediction.png" in text, text

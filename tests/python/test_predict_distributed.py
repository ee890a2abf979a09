"""cogfeed.predict under torchrun: 2 processes (gloo, CPU) write one
region; the COG equals, byte for byte, the one-process result (rank 0
writes it from the ranks' shares of rows of tiles: docs/inference.md,
"Several processes or machines").  A rank that fails makes every rank
end with an error and leaves no output."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cogfeed  # noqa: E402

torch = pytest.importorskip("torch")
from predict_ddp_worker import model_for  # noqa: E402

W, H = 700, 1250  # 3 rows of 512 px output tiles: shares [0, 1), [1, 3)


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    d = tmp_path_factory.mktemp("ddp")
    rng = np.random.default_rng(3)
    yy, xx = np.mgrid[0:H, 0:W]
    a = np.stack([(xx * (b + 1) + yy * 2 + rng.integers(0, 40, (H, W))) % 256
                  for b in range(3)]).astype(np.uint8)
    g = cogfeed.Grid(32633, width=W, height=H,
                     geotransform=(500000.0, 10.0, 0.0, 5000000.0, 0.0, -10.0))
    path = str(d / "scene.tif")
    cogfeed.write(path, a, grid=g, tile_size=256)
    return path


def torchrun(*args, nproc=2):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [HERE] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc_per_node=%d" % nproc, os.path.join(HERE, "predict_ddp_worker.py")]
    return subprocess.run(cmd + [str(a) for a in args], env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("output", ["classes", "probabilities"])
def test_two_ranks_equal_one_process(scene, tmp_path, output):
    one = str(tmp_path / "one.tif")
    cogfeed.predict(model_for(0, -1), scene, one, patch_size=256, overlap=48,
                    batch_size=4, output=output, progress=False)
    two = str(tmp_path / "two.tif")
    r = torchrun(scene, two, output)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(one, "rb") as f1, open(two, "rb") as f2:
        assert f1.read() == f2.read(), "the 2-rank COG differs from the 1-process one"
    # the work was split: each rank ran only the windows over its share
    total = len(cogfeed.grid_windows(W, H, 256, 48))
    ran = [int(m) for m in re.findall(r"rank \d ran (\d+) patches", r.stdout)]
    assert len(ran) == 2 and all(0 < n < total for n in ran), (ran, total)
    assert sum(ran) < 2 * total
    # and it is a real prediction, not two empty files
    with cogfeed.open(two) as c:
        a = c.read()
    assert a.shape[1:] == (H, W)
    if output == "classes":
        assert not (a == 255).any() and len(np.unique(a)) > 1
    else:
        assert np.isfinite(a).all()
    assert not [p for p in os.listdir(tmp_path) if "cogfeed" in p]


@pytest.mark.parametrize("output,compression", [("probabilities", "lerc_zstd"),
                                                ("probabilities", "zstd"),
                                                ("classes", "jpeg")])
def test_two_ranks_copy_each_codecs_tiles(scene, tmp_path, output, compression):
    """Rank 0 copies the ranks' encoded tiles (Writer.write_encoded_tile)
    instead of encoding their pixels: with each codec, lossy ones too, the
    COG equals the one-process result byte for byte."""
    one, two = str(tmp_path / "one.tif"), str(tmp_path / "two.tif")
    cogfeed.predict(model_for(0, -1), scene, one, patch_size=256, overlap=48,
                    batch_size=4, output=output, progress=False,
                    compression=compression)
    r = torchrun(scene, two, output, -1, 256, 0, compression)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(one, "rb") as f1, open(two, "rb") as f2:
        assert f1.read() == f2.read()
    with cogfeed.open(two) as c:
        assert c.compression == compression.upper()


@pytest.mark.parametrize("output", ["classes", "probabilities"])
def test_two_ranks_with_a_mask_equal_one_process(tmp_path, output):
    """predict(mask=True) under torchrun: the ranks' masks travel with
    their rows; the COG (pixels and internal mask) equals the one-process
    result byte for byte, and its mask is the input's nodata."""
    rng = np.random.default_rng(4)
    yy, xx = np.mgrid[0:H, 0:W]
    a = np.stack([(xx * (b + 1) + yy * 2 + rng.integers(1, 40, (H, W))) % 250 + 1
                  for b in range(3)]).astype(np.uint8)
    hole = ((xx - 350) ** 2 + (yy - 600) ** 2 < 180 ** 2) | (yy > 1150)
    a[:, hole] = 0
    src = str(tmp_path / "holes.tif")
    cogfeed.write(src, a, tile_size=256, nodata=0, grid=cogfeed.Grid(
        32633, width=W, height=H, geotransform=(500000.0, 10.0, 0.0, 5000000.0, 0.0, -10.0)))
    one = str(tmp_path / "one.tif")
    cogfeed.predict(model_for(0, -1), src, one, patch_size=256, overlap=48,
                    batch_size=4, output=output, progress=False, mask=True)
    two = str(tmp_path / "two.tif")
    r = torchrun(src, two, output, -1, 256, 1)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(one, "rb") as f1, open(two, "rb") as f2:
        assert f1.read() == f2.read(), "the 2-rank COG differs from the 1-process one"
    with cogfeed.open(two) as c:
        np.testing.assert_array_equal(c.read_mask(), np.where(hole, 0, 255))


def test_three_ranks_more_ranks_than_some_shares(scene, tmp_path):
    """3 ranks over 3 rows of tiles: one row each."""
    one = str(tmp_path / "one.tif")
    cogfeed.predict(model_for(0, -1), scene, one, patch_size=256, overlap=48,
                    batch_size=4, progress=False)
    three = str(tmp_path / "three.tif")
    r = torchrun(scene, three, "classes", nproc=3)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert open(one, "rb").read() == open(three, "rb").read()


def test_more_ranks_than_rows_of_tiles(tmp_path):
    """2 ranks over one row of 512 px tiles: rank 0's share is empty (no
    spool: it opened one that was never made, and every rank failed);
    the COG equals the one-process result, with a mask too."""
    rng = np.random.default_rng(6)
    a = rng.integers(1, 250, (3, 400, 700)).astype(np.uint8)
    a[:, :50, :80] = 0
    src = str(tmp_path / "short.tif")
    cogfeed.write(src, a, tile_size=256, nodata=0, grid=cogfeed.Grid(
        32633, width=700, height=400, geotransform=(500000.0, 10.0, 0.0, 5000000.0, 0.0, -10.0)))
    for mask in (0, 1):
        one, two = str(tmp_path / ("one%d.tif" % mask)), str(tmp_path / ("two%d.tif" % mask))
        cogfeed.predict(model_for(0, -1), src, one, patch_size=256, overlap=48,
                        batch_size=4, progress=False, mask=bool(mask))
        r = torchrun(src, two, "classes", -1, 256, mask)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert open(one, "rb").read() == open(two, "rb").read()


@pytest.mark.parametrize("fail_rank", [0, 1])
def test_a_failing_rank_ends_every_rank_and_writes_nothing(scene, tmp_path, fail_rank):
    out = str(tmp_path / "fail.tif")
    r = torchrun(scene, out, "classes", fail_rank)
    assert r.returncode != 0
    assert "model failed on rank %d" % fail_rank in r.stdout + r.stderr
    assert not os.path.exists(out)
    assert not [p for p in os.listdir(tmp_path) if p.startswith("fail.tif")]


def test_image_smaller_than_a_patch(tmp_path):
    """An image narrower than the patch: the Loader reports its windows
    unclipped, grid_windows clipped; they must still be matched (every
    batch was dropped, and the ranks failed)."""
    rng = np.random.default_rng(4)
    a = rng.integers(0, 256, (3, 1300, 300)).astype(np.uint8)
    g = cogfeed.Grid(32633, width=300, height=1300,
                     geotransform=(500000.0, 10.0, 0.0, 5000000.0, 0.0, -10.0))
    src = str(tmp_path / "narrow.tif")
    cogfeed.write(src, a, grid=g, tile_size=256)
    one = str(tmp_path / "one.tif")
    cogfeed.predict(model_for(0, -1), src, one, patch_size=512, overlap=48,
                    batch_size=4, progress=False)
    two = str(tmp_path / "two.tif")
    r = torchrun(src, two, "classes", -1, 512)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert open(one, "rb").read() == open(two, "rb").read()


def test_distributed_needs_an_initialised_group(scene, tmp_path):
    with pytest.raises(ValueError, match="distributed=True needs torch.distributed"):
        cogfeed.predict(model_for(0, -1), scene, str(tmp_path / "x.tif"),
                        distributed=True, progress=False)

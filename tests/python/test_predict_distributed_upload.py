"""cogfeed.predict(distributed=True) to object storage under torchrun:
each rank uploads its own tiles as parts of one S3 multipart upload
(moto, SigV4 enforced) or one Azure block blob (Azurite), through the
fault proxy; rank 0 lays out the header and completes the object
(docs/inference.md, "Several processes or machines").

Checked: the object is byte for byte the one-process local file (2
ranks; 3 ranks with a mask); rank 1 put parts of its own and most of its bytes went up from it (its log
line); a failed part of a rank's that no retry saves, and a rank whose
model fails, end every rank with an error and leave nothing (no object, no
open upload, no committed block list)."""

import os
import re
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "servers"))

import cogfeed  # noqa: E402

torch = pytest.importorskip("torch")
from predict_ddp_worker import model_for  # noqa: E402
from test_predict_distributed import torchrun  # noqa: E402
from test_writer_remote import (  # noqa: E402,F401  (fixtures)
    clean_env, moto, azurite, s3proxy, azproxy, to_store, fetched, assert_nothing_left)

# 3 rows of 512 px output tiles: rank 0 has 1 row, rank 1 two; 4 float32
# probabilities uncompressed: 31 MB, so each rank holds parts of its own
W, H = 1400, 1400


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    d = tmp_path_factory.mktemp("ddp-up")
    rng = np.random.default_rng(8)
    yy, xx = np.mgrid[0:H, 0:W]
    a = np.stack([(xx * (b + 2) + yy + rng.integers(0, 30, (H, W))) % 256
                  for b in range(3)]).astype(np.uint8)
    g = cogfeed.Grid(32633, width=W, height=H,
                     geotransform=(500000.0, 10.0, 0.0, 5000000.0, 0.0, -10.0))
    path = str(d / "scene.tif")
    cogfeed.write(path, a, grid=g, tile_size=256)
    one = str(d / "one.tif")
    cogfeed.predict(model_for(0, -1), path, one, patch_size=256, overlap=48,
                    batch_size=4, output="probabilities", progress=False,
                    compression="none")
    with open(one, "rb") as f:
        return path, f.read()


def put_lines(stdout):
    """{rank: (parts put, bytes, bytes from other ranks)} from the log."""
    return {int(m[0]): (int(m[1]), int(m[3]), int(m[4])) for m in re.findall(
        r"rank (\d) put (\d+) of the (\d+) parts of \S+ \((\d+) bytes, (\d+) of them", stdout)}


@pytest.mark.parametrize("store", ["s3", "azure"])
def test_each_rank_uploads_its_own_parts(scene, store, moto, s3proxy, azurite, azproxy,
                                         monkeypatch):
    src, ref = scene
    url, proxy = to_store(store, monkeypatch, moto, s3proxy, azproxy, "ddp.tif")
    r = torchrun(src, url, "probabilities", -1, 256, 0, "none")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert fetched(store, moto, azurite, "ddp.tif") == ref
    put = put_lines(r.stdout)
    assert set(put) == {0, 1}, r.stdout[-2000:]
    # rank 1 holds two thirds of the pixels and put them up itself: its
    # parts hold more than half the object, few of their bytes came from
    # rank 0; rank 0 did not carry the output
    assert put[1][0] >= 2 and put[1][1] > len(ref) // 2, put
    assert put[0][1] < len(ref) // 2 and put[0][2] + put[1][2] <= 2 * (5 << 20), put
    sel = ("PUT", "partNumber") if store == "s3" else ("PUT", "comp=block")
    assert len([q for q in proxy.requests(*sel) if q["status"] in (200, 201)]) \
        == put[0][0] + put[1][0]


def test_three_ranks_with_a_mask(scene, moto, s3proxy, azurite, azproxy, monkeypatch,
                                 tmp_path):
    """3 ranks (one row of tiles each), mask tiles after their image tiles
    at every level: the object is still the one-process file."""
    src, _ = scene
    one = str(tmp_path / "one.tif")
    cogfeed.predict(model_for(0, -1), src, one, patch_size=256, overlap=48,
                    batch_size=4, output="probabilities", progress=False,
                    compression="zstd", mask=True)
    url, _ = to_store("s3", monkeypatch, moto, s3proxy, azproxy, "ddp3.tif")
    r = torchrun(src, url, "probabilities", -1, 256, 1, "zstd", nproc=3)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(one, "rb") as f:
        assert fetched("s3", moto, azurite, "ddp3.tif") == f.read()
    assert set(put_lines(r.stdout)) == {0, 1, 2}


@pytest.mark.parametrize("store", ["s3", "azure"])
def test_a_part_no_retry_saves_leaves_nothing(scene, store, moto, s3proxy, azurite,
                                              azproxy, monkeypatch):
    src, _ = scene
    key = "ddp-fail.tif"
    url, proxy = to_store(store, monkeypatch, moto, s3proxy, azproxy, key)
    # S3: every try of part 3; Azure: the third block put and all after
    proxy.set_faults([("PUT?partNumber=3", 1, "503-always") if store == "s3"
                      else ("PUT?comp=block", 3, "503-always")])
    r = torchrun(src, url, "probabilities", -1, 256, 0, "none")
    assert r.returncode != 0
    text = r.stdout + r.stderr
    assert "503" in text or "HTTP" in text, text[-3000:]
    msg = next(line for line in text.splitlines() if url in line and "Error" in line)
    assert_nothing_left(store, msg, url, moto, s3proxy, azurite, azproxy, key)


def test_a_failing_rank_leaves_no_object(scene, moto, s3proxy, azurite, azproxy,
                                         monkeypatch):
    src, _ = scene
    url, proxy = to_store("s3", monkeypatch, moto, s3proxy, azproxy, "ddp-model.tif")
    r = torchrun(src, url, "probabilities", 1, 256, 0, "none")
    assert r.returncode != 0
    assert "model failed on rank 1" in r.stdout + r.stderr
    from test_writer_remote import s3_get, s3_open_uploads
    assert s3_get(moto, "ddp-model.tif") is None and s3_open_uploads(moto) == []

"""cogfeed.Stitcher (cf_stitcher) and cogfeed.predict: predictions of
overlapping patches blended as a whole-scene numpy reference blends them,
for each blend mode, patches in any order, a scene that is not a multiple
of the patch; the class map is the reference's argmax; predict() with a
pointwise model gives the model's output on the whole image."""

import os

import numpy as np
import pytest

import cogfeed

rasterio = pytest.importorskip("rasterio")

W, H, P, OV, C = 700, 500, 128, 32, 3


def grid(w=W, h=H):
    return cogfeed.Grid(32633, width=w, height=h,
                        geotransform=(500000.0, 10.0, 0.0, 4100000.0, 0.0, -10.0))


def window_weights(blend, n, overlap):
    i = np.arange(n, dtype=np.float64)
    if blend == "mean":
        return np.ones(n)
    if blend == "linear":
        if overlap == 0:
            return np.ones(n)
        d = np.minimum(i, n - 1 - i) + 0.5
        return np.minimum(1.0, d / overlap)
    return np.sin(np.pi * (i + 0.5) / n) ** 2


def reference(windows, preds, blend, overlap, w=W, h=H):
    s = np.zeros((C, h, w))
    ws = np.zeros((h, w))
    for (x, y, pw, ph), p in zip(windows, preds):
        wt = np.outer(window_weights(blend, ph, overlap), window_weights(blend, pw, overlap))
        s[:, y:y + ph, x:x + pw] += wt * p
        ws[y:y + ph, x:x + pw] += wt
    with np.errstate(invalid="ignore"):
        return s / ws


def test_grid_windows_are_the_loaders(tmp_path):
    """grid_windows lists exactly the windows the Loader's grid sampler
    reads (the stitcher must know every patch in advance)."""
    p = tmp_path / "img.tif"
    cogfeed.write(p, np.zeros((1, H, W), np.uint8), grid=grid())
    with cogfeed.Loader([str(p)], patch_size=P, sampler="grid", stride=P - OV,
                        batch_size=7) as ld:
        got = sorted(tuple(w[1:]) for b in ld for w in b["windows"])
    assert got == sorted(cogfeed.grid_windows(W, H, P, OV))
    assert cogfeed.grid_windows(50, 40, 128, 32) == [(0, 0, 50, 40)]


@pytest.mark.parametrize("blend", ["mean", "linear", "hann"])
def test_blend_equals_numpy_reference_in_any_order(tmp_path, blend):
    windows = cogfeed.grid_windows(W, H, P, OV)
    rng = np.random.default_rng(7)
    preds = [rng.random((C, P, P)).astype(np.float32) for _ in windows]
    ref = reference(windows, preds, blend, OV)
    order = rng.permutation(len(windows))
    probs, classes = tmp_path / "p.tif", tmp_path / "c.tif"
    with cogfeed.Stitcher(probs, windows, C, grid=grid(), blend=blend,
                          overlap=OV, tile_size=128) as st:
        for i in order:
            st.add(preds[i], windows[i])
    with cogfeed.Stitcher(classes, windows, C, grid=grid(), blend=blend,
                          overlap=OV, output="classes", tile_size=128) as st:
        # in batches, as a Loader's (file, x, y, w, h) windows
        for k in range(0, len(order), 5):
            idx = order[k:k + 5]
            st.add_batch(np.stack([preds[i] for i in idx]),
                         [(0,) + windows[i] for i in idx])
    with rasterio.open(probs) as r:
        got = r.read()
        assert r.dtypes[0] == "float32" and r.crs.to_epsg() == 32633
    np.testing.assert_allclose(got, ref.astype(np.float32), rtol=1e-6, atol=1e-7)
    with rasterio.open(classes) as r:
        cls = r.read(1)
        assert r.nodata == 255
    np.testing.assert_array_equal(cls, np.argmax(ref, axis=0))


def test_uncovered_pixels_and_errors(tmp_path):
    """Pixels no patch covers are nodata; a patch over a finished row of
    tiles, or outside the image, is refused; a failure leaves nothing."""
    windows = [(0, 0, 64, 64), (64, 0, 64, 64)]
    p = tmp_path / "s.tif"
    one = np.ones((C, 64, 64), np.float32)
    with cogfeed.Stitcher(p, windows, C, width=200, height=100, tile_size=64,
                          output="classes") as st:
        st.add(one, windows[0])
        st.add(one, windows[1])
        with pytest.raises(cogfeed.ArgumentError, match="already"):
            st.add(one, windows[0])
        with pytest.raises(cogfeed.ArgumentError, match="not inside"):
            st.add(one, (250, 0, 64, 64))
    with rasterio.open(p) as r:
        a = r.read(1)
    assert (a[:64, :128] == 0).all() and (a[:, 128:] == 255).all() and (a[64:] == 255).all()
    q = tmp_path / "gone.tif"
    with pytest.raises(RuntimeError):
        with cogfeed.Stitcher(q, windows, C, width=200, height=100) as st:
            st.add(one, windows[0])
            raise RuntimeError("model failed")
    assert not os.path.exists(q) and sorted(os.listdir(tmp_path)) == ["s.tif"]
    with pytest.raises(cogfeed.ArgumentError, match="not inside"):
        cogfeed.Stitcher(q, [(150, 0, 64, 64)], C, width=200, height=100)
    # x + w past INT64_MAX: refused, not wrapped around into the buffers
    with pytest.raises(cogfeed.ArgumentError, match="not inside"):
        cogfeed.Stitcher(q, [(2 ** 63 - 11, 0, 100, 16)], C, width=200, height=100)
    with cogfeed.Stitcher(q, windows, C, width=200, height=100) as st:
        with pytest.raises(cogfeed.ArgumentError, match="not inside"):
            st.add(np.zeros((C, 16, 100), np.float32), (2 ** 63 - 11, 0, 100, 16))
        with pytest.raises(cogfeed.ArgumentError, match="not one of the listed"):
            st.add(one, (8, 0, 64, 64))
        st.abort()
    assert not os.path.exists(q)


def test_threads_give_the_same_bytes(tmp_path):
    """Stitcher(threads=) bounds the threads that blend and encode a row's
    tiles and make the overviews (cogfeed.Writer's): one thread or the
    default, the same file; below 1 refused, and the extension passes the
    count to C, which checks it too."""
    rng = np.random.default_rng(3)
    windows = cogfeed.grid_windows(W, H, P, OV)
    preds = [rng.random((C, h, w), dtype=np.float32) for (_, _, w, h) in windows]
    out = []
    for t in (1, None):
        p = tmp_path / ("s%s.tif" % t)
        with cogfeed.Stitcher(p, windows, C, grid=grid(), tile_size=128, overlap=OV,
                              threads=t) as st:
            for win, pr in zip(windows, preds):
                st.add(pr, win)
        out.append(p.read_bytes())
    assert out[0] == out[1]
    with pytest.raises(ValueError, match="threads"):
        cogfeed.Stitcher(tmp_path / "x.tif", windows, C, grid=grid(), threads=0)
    from cogfeed._cogfeed import _Stitcher
    with pytest.raises(cogfeed.ArgumentError, match="threads -1"):
        _Stitcher(str(tmp_path / "x.tif"), W, H, 512, 8, 0, -1, None, C, 0, 0, False,
                  np.array(windows, np.int64).reshape(-1), threads=-1)
    assert not os.path.exists(tmp_path / "x.tif")


def test_predict_pointwise_model_gives_the_model_on_the_whole_image(tmp_path):
    """A 1 x 1 convolution sees no neighbours, so every overlapping patch
    predicts the same value at a pixel and any blend of them is that value:
    predict()'s output is the model run on the whole image, and its class
    map that output's argmax."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    img = rng.integers(0, 1000, size=(2, 300, 410)).astype(np.uint16)
    src = tmp_path / "scene.tif"
    cogfeed.write(src, img, grid=grid(410, 300), tile_size=128)
    model = torch.nn.Conv2d(2, 4, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor(rng.normal(size=(4, 2, 1, 1)), dtype=torch.float32))
        model.bias.zero_()
    with torch.no_grad():
        whole = model(torch.from_numpy(img.astype(np.float32))[None])[0].numpy()
    probs, classes = tmp_path / "probs.tif", tmp_path / "classes.tif"
    cogfeed.predict(model, src, probs, patch_size=128, overlap=32,
                    batch_size=4, output="probabilities", progress=False)
    cogfeed.predict(model, src, classes, patch_size=128, overlap=32,
                    blend="linear", batch_size=3, progress=False)
    with rasterio.open(probs) as r:
        got = r.read()
        assert r.transform.to_gdal() == (500000.0, 10.0, 0.0, 4100000.0, 0.0, -10.0)
    np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-3)
    with rasterio.open(classes) as r:
        cls = r.read(1)
    agree = (cls == np.argmax(whole, axis=0)).mean()
    assert agree > 0.999, agree   # near-ties may round either way
    # what would change the windows read is refused
    with pytest.raises(ValueError, match="skip_empty, stride"):
        cogfeed.predict(model, src, probs, stride=10, skip_empty=True,
                        progress=False)
    # the writer's threads: the same file on one
    one = tmp_path / "one.tif"
    cogfeed.predict(model, src, one, patch_size=128, overlap=32,
                    batch_size=4, output="probabilities", progress=False, threads=1)
    assert one.read_bytes() == probs.read_bytes()
    with pytest.raises(ValueError, match="threads"):
        cogfeed.predict(model, src, one, threads=0, progress=False)


def test_predict_failure_in_the_writer_thread_stops_and_leaves_nothing(tmp_path):
    """The blend runs on its own thread: its failure (here a model whose
    channel count changes after the first batch) stops predict() with that
    error, and neither the output nor the spool is left."""
    torch = pytest.importorskip("torch")
    src = tmp_path / "scene.tif"
    cogfeed.write(src, np.zeros((1, 256, 256), np.uint8), grid=grid(256, 256))
    calls = []

    def model(x):
        calls.append(1)
        return torch.zeros((x.shape[0], 4 if len(calls) == 1 else 3) + tuple(x.shape[2:]))

    out = tmp_path / "out.tif"
    with pytest.raises(ValueError, match="prediction"):
        cogfeed.predict(model, src, out, patch_size=64, overlap=0,
                        batch_size=2, progress=False)
    assert sorted(os.listdir(tmp_path)) == ["scene.tif"]


@pytest.mark.parametrize("output", ["probabilities", "classes"])
def test_input_validity_leaves_pixels_out_and_masks_them(tmp_path, output):
    """add(..., valid=): predictions where a patch's input had no data are
    left out of the blend; those pixels are written as no patch came, and
    with mask=True the output's internal mask is valid exactly where the
    input was.  Elsewhere the blend is the reference's."""
    windows = cogfeed.grid_windows(W, H, P, OV)
    rng = np.random.default_rng(9)
    preds = [rng.random((C, P, P)).astype(np.float32) for _ in windows]
    yy, xx = np.mgrid[0:H, 0:W]
    valid = ((xx - 300) ** 2 + (yy - 250) ** 2 < 200 ** 2) | (xx > 600)
    ref = reference(windows, preds, "hann", OV)
    p = tmp_path / "v.tif"
    with cogfeed.Stitcher(p, windows, C, grid=grid(), overlap=OV, tile_size=128,
                          output=output, mask=True) as st:
        for i in rng.permutation(len(windows)):
            x, y, w, h = windows[i]
            st.add(preds[i], windows[i], valid=valid[y:y + h, x:x + w])
    with rasterio.open(p) as r:
        got, m = r.read(), r.read_masks(1)
    np.testing.assert_array_equal(m, np.where(valid, 255, 0))
    if output == "classes":
        np.testing.assert_array_equal(got[0][valid], np.argmax(ref, axis=0)[valid])
        assert (got[0][~valid] == 255).all()
    else:
        np.testing.assert_allclose(got[:, valid], ref[:, valid].astype(np.float32),
                                   rtol=1e-6, atol=1e-7)
        assert np.isnan(got[:, ~valid]).all()


def test_add_batch_refuses_lists_that_do_not_match(tmp_path):
    """A validity list (or windows) shorter or longer than the batch would
    pair predictions with the wrong windows or drop patches: refused."""
    windows = cogfeed.grid_windows(256, 128, 128, 0)
    preds = np.zeros((2, C, 128, 128), np.float32)
    with cogfeed.Stitcher(tmp_path / "b.tif", windows, C, width=256, height=128,
                          tile_size=128, mask=True) as st:
        with pytest.raises(ValueError, match="2 predictions, 2 windows, 1 validity"):
            st.add_batch(preds, windows, np.ones((1, 128, 128), np.uint8))
        with pytest.raises(ValueError, match="2 predictions, 1 windows"):
            st.add_batch(preds, windows[:1])
        st.add_batch(preds, windows, np.ones((2, 128, 128), np.uint8))


def test_predict_with_mask_follows_the_inputs_nodata(tmp_path):
    """predict(mask=True): the Loader's validity (here the input's nodata)
    becomes the output's mask, pixels without data are NaN, the rest the
    model's output as without mask."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(12)
    img = rng.integers(1, 1000, size=(2, 300, 410)).astype(np.uint16)
    yy, xx = np.mgrid[0:300, 0:410]
    hole = (xx + yy < 150) | ((xx - 300) ** 2 + (yy - 200) ** 2 < 40 ** 2)
    img[:, hole] = 0
    src = tmp_path / "scene.tif"
    cogfeed.write(src, img, grid=grid(410, 300), tile_size=128, nodata=0)
    model = torch.nn.Conv2d(2, 3, 1)
    plain, masked = tmp_path / "plain.tif", tmp_path / "masked.tif"
    for out, mask in ((plain, False), (masked, True)):
        cogfeed.predict(model, src, out, patch_size=128, overlap=32, batch_size=4,
                        output="probabilities", progress=False, mask=mask)
    with rasterio.open(plain) as a, rasterio.open(masked) as b:
        pa, pb, mb = a.read(), b.read(), b.read_masks(1)
        assert all([f.name for f in x] == ["per_dataset"] for x in b.mask_flag_enums)
    np.testing.assert_array_equal(mb, np.where(hole, 0, 255))
    assert np.isnan(pb[:, hole]).all()
    np.testing.assert_array_equal(pb[:, ~hole], pa[:, ~hole])

"""Valid-pixel masks (issue 27): Loader(valid_mask=True) gives each sample
batch["valid"], 1 where every scene and layer has data.  Checked against
a numpy reference for inputs read as they lie (outside the file, nodata
in any band, an internal mask) and against gdalwarp -dstalpha for
resampled ones (alpha > 0 and no band at the nodata), in raw and float32
output, with augmentation, and through CogDataset."""

import os
import sys

import numpy as np
import pytest

import cogfeed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import geo_fixtures as F  # noqa: E402

W, H = 300, 260          # not multiples of the patch
PAD = 40                 # the target grid reaches this far past the image
GT = (500000.0, 10.0, 0.0, 4000000.0, 0.0, -10.0)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("valid")
    rng = np.random.default_rng(3)
    img = rng.integers(1, 4000, size=(3, H, W), dtype=np.uint16)
    img[1, rng.random((H, W)) < 0.05] = 0         # nodata in one band only
    img[:, 100:140, 30:90] = 0                    # a hole in every band
    dem = rng.normal(300, 50, size=(1, 140, 160)).astype(np.float32)
    dem[0, 20:60, 40:100] = -9999                 # DEM voids
    dem[0, rng.random((140, 160)) < 0.03] = -9999
    # 20 m, offset by half a 20 m pixel: resampled onto the 10 m grid.
    dgt = (500000.0 - 130.0, 20.0, 0.0, 4000000.0 + 50.0, 0.0, -20.0)
    # An internal mask (no nodata): band 2 of the VRT becomes the mask.
    mval = rng.integers(1, 255, size=(1, H, W), dtype=np.uint8)
    mask = np.full((H, W), 255, np.uint8)
    mask[10:50, 200:280] = 0
    mask[rng.random((H, W)) < 0.02] = 0
    vrt = F.write_vrt(str(d / "m.vrt"), np.concatenate([mval, mask[None]]), GT, "EPSG:32633")
    masked = str(d / "masked.tif")
    F.run(["gdal_translate", "-q", "-of", "COG", "-co", "BLOCKSIZE=128", "-b", "1",
           "-mask", "2", vrt, masked])
    return {
        "img": F.write_cog(str(d / "img.tif"), img, GT, nodata=0, blocksize=128),
        "dem": F.write_cog(str(d / "dem.tif"), dem, dgt, nodata=-9999, blocksize=128),
        "masked": masked,
        "img_arr": img, "mask_arr": mask, "dir": str(d),
    }


def padded_grid():
    return {"crs": 32633, "res": 10.0,
            "bounds": (GT[0] - PAD * 10, GT[3] - (H + PAD) * 10,
                       GT[0] + (W + PAD) * 10, GT[3] + PAD * 10)}


def reference(valid_in_file):
    """The valid plane of the padded target grid: outside the file is
    invalid."""
    ref = np.zeros((H + 2 * PAD, W + 2 * PAD), np.uint8)
    ref[PAD:PAD + H, PAD:PAD + W] = valid_in_file
    return ref


def unaugment_expected(ref, a):
    """ref as the loader augments a sample with code a."""
    out = np.rot90(ref, a & 3)
    return np.flip(out, -1) if a & 4 else out


def batches(ld):
    for b in ld:
        yield b


def test_off_by_default(files):
    with cogfeed.Loader(files["img"], patch_size=64, batch_size=4) as ld:
        assert ld.layout["valid_bytes"] == 0 and not ld.layout["has_valid"]
        assert "valid" not in next(iter(ld))


def test_read_as_it_lies_outside_nodata_any_band(files):
    ref = reference((files["img_arr"] != 0).all(axis=0))
    n = 0
    with cogfeed.Loader(files["img"], patch_size=96, batch_size=5, sampler="grid",
                        grid=padded_grid(), valid_mask=True) as ld:
        assert ld.layout["valid_bytes"] == 5 * 96 * 96
        for b in batches(ld):
            v = b["valid"]
            assert v.dtype == np.uint8 and v.shape == (len(b["windows"]), 1, 96, 96)
            for i, (f, x, y, w, h) in enumerate(b["windows"]):
                np.testing.assert_array_equal(v[i, 0], ref[y:y + h, x:x + w],
                                              err_msg="window %s" % ((x, y),))
                # Where it says valid, no band holds the nodata.
                assert (b["image"][i][:, v[i, 0] == 1] != 0).all()
            n += len(b["windows"])
    assert n > 0


def test_internal_mask_is_validity(files):
    ref = reference(files["mask_arr"] != 0)
    with cogfeed.Loader(files["masked"], patch_size=100, batch_size=4, sampler="grid",
                        grid=padded_grid(), valid_mask=True) as ld:
        for b in batches(ld):
            for i, (f, x, y, w, h) in enumerate(b["windows"]):
                np.testing.assert_array_equal(b["valid"][i, 0], ref[y:y + h, x:x + w])


def gdal_valid(src, dst, grid, rs, nodata, extra=()):
    """gdalwarp -dstalpha onto grid: alpha > 0, and no band at nodata."""
    out = F.gdalwarp(src, dst, grid, {"nearest": "near"}.get(rs, rs),
                     extra=("-dstalpha",) + tuple(extra))
    ok = out[-1] > 0
    if nodata is not None:
        ok &= (out[:-1] != nodata).all(axis=0)
    return ok.astype(np.uint8)


@pytest.mark.parametrize("rs", ["nearest", "bilinear", "cubic", "average"])
def test_resampled_layer_matches_gdalwarp_dstalpha(files, tmp_path, rs):
    """A float32 stack of a uint16 image (0 nodata) and a 20 m float32 DEM
    (-9999 nodata) resampled onto it: valid is the image's AND the DEM's,
    the DEM's as gdalwarp -dstalpha says it."""
    img_ok = (files["img_arr"] != 0).all(axis=0)
    with cogfeed.Loader(files["img"], layers=[[files["dem"]]], patch_size=80, batch_size=3,
                        sampler="grid", dtype="float32", scale_offset=False,
                        resampling={"image": "nearest", "layers": rs},
                        valid_mask=True) as ld:
        b = next(iter(ld))
        seen = 0
        for i, g in enumerate(b["grid"]):
            f, x, y, w, h = b["windows"][i]
            exp = gdal_valid(files["dem"], str(tmp_path / "d.tif"), g, rs, -9999)
            exp &= img_ok[y:y + h, x:x + w]
            v = b["valid"][i, 0]
            np.testing.assert_array_equal(v, exp, err_msg="%s at %s" % (rs, g))
            # The normalised values under valid hold neither fill.
            assert (b["image"][i, 3][v == 1] != -9999).all()
            seen += int((v == 0).sum() > 0)
        assert seen, "the patches read should meet some nodata"


@pytest.mark.parametrize("crs", [32633, 32632])
@pytest.mark.parametrize("rs", ["nearest", "bilinear", "cubic", "average"])
def test_warped_internal_mask_matches_gdalwarp(files, tmp_path, crs, rs):
    """A file with an internal mask and no nodata, resampled (and
    reprojected): what the warp finds no valid source for is invalid, as
    gdalwarp's alpha.  Exact PROJ on both sides: with the approximate
    transformer (-et 0.125) cogfeed's source positions differ from
    gdalwarp's in the last bits, which next to scattered masked pixels
    flips about one pixel in 16,000 (the values too; docs/conformance.md)."""
    grid = {"crs": crs, "res": 12.0}
    with cogfeed.Loader(files["masked"], patch_size=64, batch_size=4, sampler="grid",
                        grid=grid, resampling=rs, error_threshold=0,
                        valid_mask=True) as ld:
        b = next(iter(ld))
    for i, g in enumerate(b["grid"]):
        exp = gdal_valid(files["masked"], str(tmp_path / "m.tif"), g, rs, None,
                         extra=("-et", "0"))
        np.testing.assert_array_equal(b["valid"][i, 0], exp, err_msg=str(g))
        # Valid exactly where the warp wrote a value (the fill is 0).
        with cogfeed.open(files["masked"]) as c:
            data = c.read(grid=g, resampling=rs, error_threshold=0)[0]
        assert (data[b["valid"][i, 0] == 0] == 0).all()


def test_valid_is_augmented_with_the_image(files):
    ref = reference((files["img_arr"] != 0).all(axis=0))
    kinds = set()
    with cogfeed.Loader(files["img"], patch_size=64, batch_size=16, sampler="random",
                        grid=padded_grid(), flip=True, rot90=True, seed=7,
                        valid_mask=True) as ld:
        for _, b in zip(range(4), batches(ld)):
            for i, (f, x, y, w, h) in enumerate(b["windows"]):
                a = b["augment"][i]
                kinds.add(a)
                np.testing.assert_array_equal(
                    b["valid"][i, 0], unaugment_expected(ref[y:y + h, x:x + w], a))
    assert len(kinds) > 2


def test_skipped_samples_keep_valid_in_step(files, tmp_path):
    """skip_errors drops a failed sample; the valid planes of the others
    move with their images."""
    broken = str(tmp_path / "broken.tif")
    with open(files["img"], "rb") as f:
        data = f.read()
    with open(broken, "wb") as f:
        f.write(data[:len(data) * 2 // 3])   # its last tiles cut off
    ref = reference((files["img_arr"] != 0).all(axis=0))
    with cogfeed.Loader([files["img"], broken], patch_size=64, batch_size=8,
                        sampler="grid", grid=padded_grid(), skip_errors=True,
                        skip_limit=1.0, valid_mask=True) as ld:
        for b in batches(ld):
            for i, (f, x, y, w, h) in enumerate(b["windows"]):
                np.testing.assert_array_equal(b["valid"][i, 0], ref[y:y + h, x:x + w])
        assert ld.stats()["skipped"] > 0


def test_torch_batches_carry_valid(files):
    torch = pytest.importorskip("torch")
    from cogfeed.torch import CogDataset
    ds = CogDataset(files["img"], patch_size=64, batch_size=4, sampler="grid",
                    grid=padded_grid(), valid_mask=True)
    b = next(iter(torch.utils.data.DataLoader(ds, batch_size=None)))
    assert b["valid"].dtype == torch.uint8 and tuple(b["valid"].shape) == (4, 1, 64, 64)
    ref = reference((files["img_arr"] != 0).all(axis=0))
    f, x, y, w, h = b["windows"][0]
    np.testing.assert_array_equal(b["valid"][0, 0].numpy(), ref[y:y + h, x:x + w])

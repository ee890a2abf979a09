"""TorchGeo datasets of bench/peers.py: the images and the masks of the
synthetic scenes, as a TorchGeo user declares them.  A module of their
own so that DataLoader workers started by a fork server can unpickle
them (classes local to a function cannot be)."""

from torchgeo.datasets import RasterDataset


class Images(RasterDataset):
    filename_glob = "scene_*.tif"
    is_image = True


class Masks(RasterDataset):
    filename_glob = "scene_*.tif"
    is_image = False


class SeriesScenes(RasterDataset):
    """bench/series_bench.py's scenes: tile_<A|B>_<YYYYMMDD>.tif, the date
    from the file name (TorchGeo's filename_regex / date_format)."""
    filename_glob = "tile_*.tif"
    filename_regex = r"tile_(?P<tile>[AB])_(?P<date>\d{8})\.tif"
    date_format = "%Y%m%d"
    is_image = True


class DateMosaics:
    """A (T, C, H, W) series of per-date mosaics at a sampled location, as
    a TorchGeo user builds one: for each date's time interval the
    RasterDataset's own slice, which merges the files of that date
    (rasterio.merge, the first file with data giving each pixel), stacked.
    Takes the GeoSlices of a GeoSampler (their time part is replaced by
    each date's interval)."""

    def __init__(self, ds, intervals):
        self.ds = ds
        self.intervals = intervals  # [(start, stop) pandas Timestamps]

    def __getitem__(self, index):
        import torch
        x, y = index[0], index[1]
        steps = [self.ds[x, y, slice(t0, t1)]["image"] for t0, t1 in self.intervals]
        return {"image": torch.stack(steps)}


class RegionScenes(RasterDataset):
    """bench/geo_sampling_bench.py's scenes (scene_A.tif, ...: two UTM
    zones, overlapping), read onto one CRS and resolution given to the
    constructor (crs=, res=): TorchGeo warps the other zone's."""
    filename_glob = "scene_*.tif"
    is_image = True

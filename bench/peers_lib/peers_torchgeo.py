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

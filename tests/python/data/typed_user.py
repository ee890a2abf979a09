"""A user's training script, as the type checkers see it:
tests/python/test_package.py runs mypy --strict and pyright (strict) on it
(both must pass) and then runs it on two small COGs.  assert_type fails the
check where a type is not what a user may rely on (Any included)."""
import sys
from typing import Any, List, Optional, Tuple, assert_type

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import DataLoader

import cogfeed
from cogfeed.torch import CogDataset, TorchBatch


def read(path: str) -> npt.NDArray[Any]:
    with cogfeed.open(path) as cog:
        assert_type(cog.width, int)
        grid = cog.grid()
        assert_type(grid, cogfeed.Grid)
        half = grid.window(0, 0, grid.width // 2, grid.height // 2)
        assert_type(half.bounds, Tuple[float, float, float, float])
        return cog.read(window=(0, 0, 16, 16), bands=[1], resampling="near")


def train(image: str, mask: str) -> None:
    sampler: cogfeed.Sampler = "blocked"
    with cogfeed.Loader([image], [mask], patch_size=32, batch_size=4,
                        sampler=sampler, seed=1, dtype="float32",
                        resampling={"image": "cubic", "mask": "nearest"},
                        io_options={"max_retries": 2}, epoch_length=8,
                        concurrency="auto") as ld:
        batch = next(iter(ld))
        assert_type(batch, cogfeed.Batch)
        assert_type(batch["image"], npt.NDArray[Any])
        m = batch.get("mask")
        assert_type(m, Optional[npt.NDArray[Any]])
        assert_type(batch["windows"], List[Tuple[int, int, int, int, int]])
        assert_type(batch["grid"], List[Optional[cogfeed.Grid]])
        assert_type(batch["index"], int)
        state = ld.state_dict()
        assert_type(state, cogfeed.LoaderState)
        assert_type(state["batch"], int)
        ld.load_state_dict(state)
        assert_type(ld.layout["channels"], int)
        assert_type(ld.stats()["cache_hit_rate"], float)
        assert_type(len(ld), int)
        win, aug = ld.window(0)
        assert_type(win, Tuple[int, int, int, int, int])
        assert aug == 0
        f32 = np.float32
        cogfeed.Loader(image, dtype=f32, sampler="grid").close()
        cogfeed.Loader(image, dtype=torch.float32, grid={"like": image}).close()

    ds = CogDataset([image], [mask], patch_size=32, batch_size=4,
                    sampler="tile-shuffle", dtype="float32", epoch_length=8)
    assert_type(next(iter(ds)), TorchBatch)
    for item in DataLoader(ds, batch_size=None):
        tb: TorchBatch = item  # (torch types a DataLoader's items as Any)
        x: torch.Tensor = tb["image"]
        assert "mask" in tb
        y: torch.Tensor = tb["mask"]
        assert tuple(x.shape) == (4, 3, 32, 32) and tuple(y.shape) == (4, 1, 32, 32)
    st = ds.state_dict()
    assert_type(st, cogfeed.LoaderState)
    ds.load_state_dict(st)
    ds.close()


if __name__ == "__main__":
    assert read(sys.argv[1]).shape == (1, 16, 16)
    train(sys.argv[1], sys.argv[2])
    print("typed_user ok")

"""Typos a user makes: mypy --strict and pyright must each report an error
on every line marked "# typo: WORD" (naming WORD; "# typo" alone: the
checkers print the dict's type, not the misspelt value) and nowhere else
(tests/python/test_package.py).  Never run."""
import cogfeed
from cogfeed.torch import CogDataset


def typos(image: str) -> None:
    cogfeed.Loader(image, sampler="randm")  # typo: randm
    cogfeed.Loader(image, resampling="bilinaer")  # typo: bilinaer
    cogfeed.Loader(image, resampling={"mask": "nearset"})  # typo
    cogfeed.Loader(image, dtype="float23")  # typo: float23
    cogfeed.Loader(image, concurrency="automatic")  # typo: automatic
    cogfeed.Loader(image, smapler="grid")  # typo: smapler
    CogDataset(image, sampler="tile_shufle")  # typo: tile_shufle
    CogDataset(image, batch_size=8, dtype="flaot32")  # typo: flaot32
    with cogfeed.open(image) as cog:
        cog.read(grid=cog.grid(), resampling="cubix")  # typo: cubix
    with cogfeed.Loader(image) as ld:
        ld.state_dict()["epohc"]  # typo: epohc

"""cogfeed: stream training patches out of Cloud-Optimized GeoTIFFs.

    import cogfeed
    with cogfeed.open("s3://bucket/scene.tif") as cog:
        patch = cog.read(window=(0, 0, 256, 256), bands=[4, 3, 2])

Everything that moves or decodes bytes is C (the ``_cogfeed`` extension);
this package is a thin layer over it.
"""
from ._cogfeed import IO, Cog, CRS, open, open_many, read_many, default_io, __version__
# The errors: cogfeed.Error, and one subclass per status of cogfeed.h's
# CF_STATUS_TABLE, built from that table by the extension (the tests check
# that this list and the .pyi name every class of the table).
from ._cogfeed import (Error, Status, ArgumentError, OutOfMemoryError, InputOutputError,
                       FormatError, UnsupportedError, CodecError, LimitError, HTTPError,
                       AccessDeniedError, NotFoundError, ObjectChangedError,
                       RangeRequestError, TimedOutError, StateError)
from .grid import Grid
from .loader import Loader
from . import stac
from . import series
from .region import Region, load
from .writer import Writer, write
from .upload import Upload, plan_parts
from .predict import Stitcher, grid_windows, predict
from .vector import VectorLabels
# The types of the Loader's arguments and results (for type checkers).
from .loader import (Batch, DType, GridSpec, IOOptions, LoaderLayout,
                     LoaderOptions, LoaderState, LoaderStats, Resampling,
                     ResamplingSpec, Sampler, StrPath, Window)

__all__ = ["open", "open_many", "read_many", "IO", "Cog", "CRS", "Grid", "Error", "default_io",
           "Loader", "stac", "series", "load", "Region", "Writer", "write", "Upload", "plan_parts",
           "Stitcher", "grid_windows", "predict",
           "VectorLabels",
           "__version__",
           "Status", "ArgumentError", "OutOfMemoryError", "InputOutputError", "FormatError",
           "UnsupportedError", "CodecError", "LimitError", "HTTPError", "AccessDeniedError",
           "NotFoundError", "ObjectChangedError", "RangeRequestError", "TimedOutError",
           "StateError"]
__all__ += ["Batch", "DType", "GridSpec", "IOOptions", "LoaderLayout",
            "LoaderOptions", "LoaderState", "LoaderStats", "Resampling",
            "ResamplingSpec", "Sampler", "StrPath", "Window"]

"""Readers for skeleton archives. ``open_source(fmt, path)`` returns a
:class:`~streamcov.readers.base.SkeletonSource`."""
from __future__ import annotations

from .base import (SkeletonFormatError, SkeletonSequence, SkeletonSource,
                   SkeletonSourceInfo, SkippedSequence)

FORMATS = ("msr-action3d", "florence3d", "utkinect", "generic")


def open_source(fmt: str, path, **options) -> SkeletonSource:
    """Open a skeleton archive of format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "msr-action3d":
        from .msr_action3d import MSRAction3DSource as cls
    elif fmt == "florence3d":
        from .florence3d import Florence3DSource as cls
    elif fmt == "utkinect":
        from .utkinect import UTKinectSource as cls
    elif fmt == "generic":
        from .generic import GenericCSVSource as cls
    else:
        raise ValueError(f"unknown skeleton format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return cls(path, **options)


__all__ = ["FORMATS", "open_source", "SkeletonFormatError", "SkeletonSequence",
           "SkeletonSource", "SkeletonSourceInfo", "SkippedSequence"]

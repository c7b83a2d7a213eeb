"""Readers of skeleton archives, one module per format.

``open_reader(fmt, path, **options)`` returns a
:class:`~streamcov.data.readers.base.SkeletonReader`: ``info`` (joint count,
names, units, centre joints, roles) and ``sequences()``, in a deterministic
order so that an interrupted ingestion resumes by sequence id.
"""
from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError, FormatError
from .base import SkeletonInfo, SkeletonReader, SkeletonSequence, SkippedSequence

# format -> (module, class)
READERS = {
    "msr-action3d": (".msr_action3d", "MSRAction3DReader"),
    "florence3d": (".florence3d", "Florence3DReader"),
    "utkinect": (".utkinect", "UTKinectReader"),
    "generic": (".generic", "GenericCSVReader"),
}
FORMATS = tuple(READERS)


def open_reader(fmt: str, path, **options) -> SkeletonReader:
    """Open a skeleton archive of format ``fmt`` (one of :data:`FORMATS`) with reader ``options``."""
    import importlib

    if fmt not in READERS:
        raise ConfigError(f"unknown skeleton format {fmt!r}; choose one of {', '.join(FORMATS)}")
    module, name = READERS[fmt]
    cls = getattr(importlib.import_module(module, __name__), name)
    reader = cls(path, **options)
    # what an interrupted ingestion must match to be resumed (streamcov.data.ragged)
    reader.record = {"format": fmt, "path": str(Path(path).resolve()),
                     "options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in sorted(options.items())}}
    return reader


__all__ = ["FORMATS", "FormatError", "READERS", "SkeletonInfo", "SkeletonReader", "SkeletonSequence",
           "SkippedSequence", "open_reader"]

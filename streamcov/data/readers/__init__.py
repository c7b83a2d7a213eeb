"""Readers of skeleton archives, one module per format.

``open_reader(fmt, path, **options)`` returns a
:class:`~streamcov.data.readers.base.SkeletonReader`: ``info`` (joint count,
names, units, centre joints, roles) and ``sequences()``, in a deterministic
order so that an interrupted ingestion resumes by sequence id.
"""
from __future__ import annotations

import os
from pathlib import Path

from ...errors import ConfigError, FormatError, MissingExtraError, did_you_mean, path_arg, toml_value
from .base import SkeletonInfo, SkeletonReader, SkeletonSequence, SkippedSequence

# format -> (module, class)
READERS = {
    "msr-action3d": (".msr_action3d", "MSRAction3DReader"),
    "florence3d": (".florence3d", "Florence3DReader"),
    "utkinect": (".utkinect", "UTKinectReader"),
    "generic": (".generic", "GenericCSVReader"),
    "asf-amc": (".asf_amc", "AsfAmcReader"),
    "bvh": (".bvh", "BvhReader"),
    "c3d": (".c3d", "C3dReader"),
}
FORMATS = tuple(READERS)


def reader_options(fmt: str) -> list[str]:
    """The options a reader takes (its keyword-only parameters)."""
    import importlib
    import inspect

    module, name = READERS[fmt]
    cls = getattr(importlib.import_module(module, __name__), name)
    return [p.name for p in inspect.signature(cls.__init__).parameters.values() if p.kind == p.KEYWORD_ONLY]


def open_reader(fmt: str, path, where: str | None = None, **options) -> SkeletonReader:
    """Open a skeleton archive of format ``fmt`` (one of :data:`FORMATS`) with reader ``options``.

    An option the reader does not take, or a value it refuses, is a
    :class:`~streamcov.errors.ConfigError` naming it as the user gave it
    (``where``: ``--option`` for the command line's ``--option k=v``, a table
    such as ``data.options`` for a pipeline's ``data.options.k = v``; None,
    a Python call: the keyword, ``k=v``).

    The reader's ``record`` is what a store written from it records of its
    source (format, folder, options, :func:`~streamcov.data.ragged.files_digest`
    of the archive's files); ``content()`` reads the files for their
    :func:`~streamcov.data.ragged.content_digest`.
    """
    import importlib
    import re

    if fmt not in READERS:
        raise ConfigError(f"unknown skeleton format {fmt!r}; choose one of {', '.join(FORMATS)}")
    path = path_arg("path", path, "SRC", "the raw data's file or folder")
    def named(key):   # the option as the user gave it: a TOML value, as both the flag and a pipeline file read it
        if where is None:
            return f"{key}={options[key]!r}"
        value = toml_value(options[key])
        return f"--option {key}={value}" if where == "--option" else f"{where}.{key} = {value}"

    known = reader_options(fmt)
    for key in options:
        if key not in known:
            raise ConfigError(f"{named(key)}: {key!r} is not an option of the {fmt} reader"
                              f"{did_you_mean(key, known)}; its options: {', '.join(known) or 'none'}")
    module, name = READERS[fmt]
    cls = getattr(importlib.import_module(module, __name__), name)
    if not Path(path).exists():
        raise ConfigError(f"{path}: no such file or folder (the {fmt} archive to read)")
    try:
        reader = cls(path, **options)
    except (FormatError, MissingExtraError):   # a file's fault, or a package to install: no option's
        raise
    except (ValueError, TypeError) as exc:
        # the readers' messages start with the option they refuse (as a whole word: 'label'
        # must not claim a message about 'label_map')
        culprit = next((k for k in options if re.match(rf"{re.escape(k)}\b", str(exc))), None)
        if culprit is None:
            given = ", ".join(named(k) for k in options) or "the default options"
            raise ConfigError(f"{given}: {exc}") from None
        raise ConfigError(f"{named(culprit)}: {exc}") from None
    # what an interrupted ingestion must match to be resumed, and a store reused (streamcov.data.ragged); the
    # files' contents are read only when asked: by ingestion, which records them, and by a run that finds the
    # files' times changed since its store was written
    from functools import partial

    from ..ragged import content_digest, files_digest
    from ._layout import walk_paths

    root = Path(path).resolve()
    files = [root] if root.is_file() else [p for p in walk_paths(root) if p.is_file()]   # linked folders entered
    # files an index lists outside the folder: covered too, so that editing one is seen; an archive without such
    # files keeps the digest it always had
    files += _outside(files, reader.listed_files())
    reader.record = {"format": fmt, "path": str(root),
                     "options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in sorted(options.items())},
                     "files": files_digest(files, root)}
    reader.content = partial(content_digest, files, root)
    return reader


def _outside(files: list, listed: list) -> list:
    """The listed files that the walk of the folder (``files``, absolute) did not meet, by their real paths:
    a file outside the folder, or under a linked folder. Links are resolved only for listed paths the walk
    did not meet as written (none, in an archive of plain files), so that large archives are not slowed."""
    walked = set(files)
    rest = [p for p in listed if Path(os.path.abspath(p)) not in walked]
    if not rest:
        return []
    met = walked | {Path(os.path.realpath(f)) for f in files if f.is_symlink()}
    return sorted({Path(os.path.realpath(p)) for p in rest} - met)


__all__ = ["FORMATS", "FormatError", "READERS", "SkeletonInfo", "SkeletonReader", "SkeletonSequence",
           "SkippedSequence", "known_roles", "open_reader"]


def known_roles(source: str | None, n_joints: int) -> dict:
    """The joint roles the reader of ``source`` (a store's ``source`` attribute) records, for
    stores written before readers recorded roles; empty for other sources."""
    modules = {"msr-action3d": ".msr_action3d", "florence3d": ".florence3d", "utkinect": ".utkinect"}
    if source not in modules:
        return {}
    import importlib

    mod = importlib.import_module(modules[source], __name__)
    return dict(mod.ROLES) if mod.N_JOINTS == n_joints else {}

"""What the engine needs from a modality: the source protocol.

A source turns the rows of a store (skeleton sequences, images) into
descriptor vectors, block by block, as Dask tasks that open the store by its
*path*, so the same tasks run on threads and on dask.distributed workers.
The engine (:mod:`.featurize`, :mod:`.sgd`, :mod:`.predict`) knows nothing
else about the data: a new descriptor or modality is a new source.

Attributes and methods of a source::

    kind              "skeleton", "image", ...: the store kind it reads
    store             the opened store (labels, groups, split, ids, identity)
    n, dim, dtype     rows, descriptor width, descriptor dtype
    default_block     rows per block when the pipeline does not say
    needs_fit         whether the descriptor depends on training rows
    fit(train, runtime, bounds)
                      a fitted copy (e.g. the feature scale of training images)
    state             what the fit learned, JSON (empty when nothing)
    with_state(state) a copy with a fitted state (kept in a feature store, on resume)
    spec()            JSON enough to rebuild the (fitted) source on another store
    identity()        the input store's identity and the descriptor: for fingerprints
    block_tasks(bounds, numba_threads, rows=None)
                      [(b0, b1, local_rows, delayed ndarray)] for every block
                      holding rows of the mask ``rows`` (all rows when None)
    window_keys(bounds, width)
                      one key per block; blocks with equal keys are computed
                      together (a window), so memory stays bounded
    data_warnings(runtime)   (optional)
                      lines naming rows whose descriptor took a fallback (the
                      skeleton source: a body frame that the body's
                      measurements cannot give); a run adds them to its
                      warnings, predict to its notes
    prepare(runtime, bounds, folder, progress)   (optional)
                      stages this source reads from, run before it through the
                      same driver (e.g. the ConvNet's hypercolumn store of
                      :class:`~streamcov.stream.image.HypercolumnSource`):
                      returns (source reading them, info for the result)
"""
from __future__ import annotations

import numpy as np

SOURCE_KINDS = {"skeleton": ("streamcov.stream.skeleton", "SkeletonSource"),
                "image": ("streamcov.stream.image", "ImageSource")}


def block_bounds(n: int, block: int) -> np.ndarray:
    """Row indices where blocks start, plus the end: ``[0, b, 2b, ..., n]``."""
    if int(block) != block or block < 1:
        raise ValueError(f"block must be a whole number of rows >= 1, got {block!r}")
    edges = np.arange(0, n, int(block), dtype=np.int64)
    return np.append(edges, n)


def source_from_spec(spec: dict, store):
    """Rebuild a (fitted) source from :meth:`spec` on ``store``, e.g. for ``streamcov predict``."""
    import importlib

    module, name = SOURCE_KINDS[spec["kind"]]
    return getattr(importlib.import_module(module), name).from_spec(spec, store)


def open_store_of_kind(kind: str, path):
    """Open a complete store of ``kind`` (``skeleton`` or ``image``)."""
    if kind == "skeleton":
        from ..data.skeletons import SequenceStore
        return SequenceStore(path)
    from ..data.images import ImageStore
    return ImageStore(path)


def store_kind(path) -> str | None:
    """The kind of store at ``path`` from its format attribute (None when it is none of ours)."""
    from ..data import images, skeletons
    from ..data.ragged import open_group

    fmt = dict(open_group(path, "r").attrs).get("format")
    return {skeletons.FORMAT_NAME: "skeleton", images.FORMAT_NAME: "image"}.get(fmt)

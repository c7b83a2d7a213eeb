"""Dask graphs from a sequence store to log-covariance descriptors and features.

Frame chunks of the store are read once each; a chunk task returns the
mergeable partial moments (n, mean, M2) of every sequence piece inside it.
A block task (a run of whole sequences) merges the pieces of its sequences,
so a sequence cut by a chunk boundary gets exactly its own covariance, and
then applies regularization, the SPD logarithm and vectorization. The same
numba kernels run under the threaded scheduler and on dask.distributed
workers: tasks receive the store *path* and open it themselves.
"""
from __future__ import annotations

import numpy as np

from .. import covariance as cov
from .._config import kernel_threads


def block_bounds(n_sequences: int, block_sequences: int) -> np.ndarray:
    """Sequence indices where blocks start, plus the end: [0, b, 2b, ..., n]."""
    edges = np.arange(0, n_sequences, block_sequences, dtype=np.int64)
    return np.append(edges, n_sequences)


def chunk_moments(store_path: str, c0: int, c1: int, offsets: np.ndarray,
                  selection: cov.JointSelection, numba_threads: int = 1):
    """Partial moments of all sequence pieces within frames [c0, c1) of a store."""
    import zarr

    frames = np.asarray(zarr.open_group(store_path, mode="r")["frames"][c0:c1])
    s_lo = int(np.searchsorted(offsets, c0, side="right")) - 1
    s_hi = int(np.searchsorted(offsets, c1, side="left"))
    starts = np.clip(offsets[s_lo:s_hi], c0, c1) - c0
    stops = np.clip(offsets[s_lo + 1:s_hi + 1], c0, c1) - c0
    with kernel_threads(numba_threads):
        n, mean, m2 = cov.segment_moments(frames, starts, stops, selection)
    return s_lo, n, mean, m2


def merge_pieces(b0: int, b1: int, pieces) -> tuple[np.ndarray, np.ndarray]:
    """Moments (n, M2) of sequences [b0, b1) from chunk partials covering them."""
    d = pieces[0][2].shape[1]
    n_out = np.zeros(b1 - b0, dtype=np.int64)
    mean_out = np.zeros((b1 - b0, d))
    m2_out = np.zeros((b1 - b0, d, d))
    for s_lo, n, mean, m2 in pieces:
        for k in range(len(n)):
            s = s_lo + k
            if not b0 <= s < b1 or n[k] == 0:
                continue
            i = s - b0
            if n_out[i] == 0:
                n_out[i], mean_out[i], m2_out[i] = n[k], mean[k], m2[k]
            else:
                n_out[i], mean_out[i], m2_out[i] = cov.merge_moments(
                    (n_out[i], mean_out[i], m2_out[i]), (n[k], mean[k], m2[k]))
    return n_out, m2_out


def block_descriptors(b0: int, b1: int, pieces, gamma: float, normalize: bool, ddof: int,
                      dtype: str, numba_threads: int = 1) -> np.ndarray:
    n, m2 = merge_pieces(b0, b1, pieces)
    empty = np.flatnonzero(n == 0)
    if len(empty):
        raise ValueError(f"sequence {b0 + empty[0]} has no frames in the store")
    with kernel_threads(numba_threads):
        return cov.log_vectors_from_moments(n, m2, gamma, normalize, ddof,
                                            dtype=np.dtype(dtype), first_index=b0)


def descriptor_blocks(store, selection: cov.JointSelection, gamma: float, normalize: bool,
                      ddof: int, dtype: str, block_sequences: int, numba_threads: int = 1):
    """List of ``(b0, b1, delayed ndarray)`` for the log-covariance vectors of each block."""
    import dask

    offsets = store.offsets
    path = str(store.path)
    cf = store.chunk_frames
    n_frames = store.n_frames
    chunk_tasks = {}

    def chunk_task(c):
        if c not in chunk_tasks:
            c0, c1 = c * cf, min((c + 1) * cf, n_frames)
            chunk_tasks[c] = dask.delayed(chunk_moments, pure=True)(
                path, c0, c1, offsets, selection, numba_threads,
                dask_key_name=f"moments-{c}-{dask.base.tokenize(path, c0, c1, selection)}")
        return chunk_tasks[c]

    bounds = block_bounds(store.n_sequences, block_sequences)
    out = []
    for b0, b1 in zip(bounds[:-1], bounds[1:]):
        f0, f1 = offsets[b0], offsets[b1]
        chunks = range(int(f0 // cf), int((f1 - 1) // cf) + 1)
        pieces = [chunk_task(c) for c in chunks]
        task = dask.delayed(block_descriptors, pure=True)(
            int(b0), int(b1), pieces, gamma, normalize, ddof, dtype, numba_threads)
        out.append((int(b0), int(b1), task))
    return out


def descriptor_array(store, selection, gamma, normalize, ddof, dtype, block_sequences,
                     numba_threads=1):
    """The descriptors as one dask array of shape (n_sequences, d(d+1)/2), chunked by blocks."""
    import dask.array as da

    p = cov.vec_dim(selection.dim)
    blocks = descriptor_blocks(store, selection, gamma, normalize, ddof, dtype,
                               block_sequences, numba_threads)
    parts = [da.from_delayed(t, shape=(b1 - b0, p), dtype=np.dtype(dtype)) for b0, b1, t in blocks]
    return da.concatenate(parts, axis=0)

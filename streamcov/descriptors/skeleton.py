"""Covariance descriptors of skeleton sequences (paper 000).

Preprocessing of paper 000 (Cavazza et al.): joint coordinates are taken
relative to the hip (centre) joint in every frame; the covariance of the
resulting 3(J-1)-dimensional frame vectors over the frames of a sequence is
regularized by gamma I, mapped by the matrix logarithm (eq. (2)) and
vectorized so that Euclidean inner products equal Frobenius ones
(:mod:`streamcov.linalg`).

Two ways to the same numbers: :func:`log_covariance_vectors` (a fused
kernel, whole sequences in memory) and streamed moments
(:func:`segment_moments` per frame chunk, merged exactly with
:func:`streamcov.linalg.merge_moments`, then :func:`log_vectors_from_moments`),
which the Dask engine uses so that a sequence cut by a chunk boundary gets
the covariance of the whole. :func:`pack_sequences` turns ragged sequences
into the stores' (frames, offsets) layout. The scikit-learn transformer is
:class:`streamcov.descriptors.transformers.LogCovariance`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import linalg
from .._kernels import covariance as _kc
from .._kernels import spd as _ks
from ..linalg import vec_dim


@dataclass(frozen=True)
class JointSelection:
    """Which joints centre the skeleton and which joints enter the descriptor.

    ``center``: indices (0-based) of the joints whose mean is subtracted from
    every joint in each frame (one hip-centre joint, or both hips for layouts
    without one). Empty: no centring. ``keep``: joints whose relative
    coordinates form the frame vector (the centre joint itself is dropped when
    it is a single joint, since its relative coordinates are all zero).
    """

    center: tuple[int, ...]
    keep: tuple[int, ...]

    @classmethod
    def hip_relative(cls, n_joints: int, center: tuple[int, ...] | list[int]) -> "JointSelection":
        center = tuple(int(c) for c in center)
        for c in center:
            if not 0 <= c < n_joints:
                raise ValueError(f"centre joint {c} outside 0..{n_joints - 1}")
        drop = set(center) if len(center) == 1 else set()
        keep = tuple(j for j in range(n_joints) if j not in drop)
        return cls(center=center, keep=keep)

    @classmethod
    def raw(cls, n_joints: int) -> "JointSelection":
        return cls(center=(), keep=tuple(range(n_joints)))

    @property
    def dim(self) -> int:
        return 3 * len(self.keep)

    def arrays(self):
        return (np.asarray(self.center, dtype=np.int64),
                np.asarray(self.keep, dtype=np.int64))


def _check_frames(frames: np.ndarray, n_joints: int | None = None) -> np.ndarray:
    frames = np.asarray(frames)
    if frames.ndim != 2:
        raise ValueError(f"frames must be 2-D (frames x 3*joints), got shape {frames.shape}")
    if frames.dtype not in (np.float32, np.float64):
        frames = frames.astype(np.float64)
    if frames.shape[1] % 3:
        raise ValueError(
            f"frames has {frames.shape[1]} columns, not a multiple of 3 (x, y, z per joint)")
    if n_joints is not None and frames.shape[1] != 3 * n_joints:
        raise ValueError(f"frames has {frames.shape[1]} columns, expected 3*{n_joints}")
    if not np.isfinite(frames).all():
        bad = np.argwhere(~np.isfinite(frames))[0]
        raise ValueError(f"frames contains a non-finite value at row {bad[0]}, column {bad[1]}")
    return np.ascontiguousarray(frames)


def _segment_args(frames, starts, stops, selection: JointSelection):
    frames = _check_frames(frames)
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    stops = np.ascontiguousarray(stops, dtype=np.int64)
    if starts.shape != stops.shape or starts.ndim != 1:
        raise ValueError(f"starts {starts.shape} and stops {stops.shape} must be equal 1-D shapes")
    if len(starts) and (starts.min() < 0 or stops.max() > len(frames) or (stops < starts).any()):
        raise ValueError(f"segments must lie within 0..{len(frames)} with start <= stop")
    if max(selection.keep, default=-1) * 3 + 3 > frames.shape[1] or \
            max(selection.center, default=-1) * 3 + 3 > frames.shape[1]:
        raise ValueError(f"joint selection needs more than the {frames.shape[1] // 3} joints in frames")
    return frames, starts, stops


def segment_moments(frames, starts, stops, selection: JointSelection):
    """Partial moments (n, mean, M2) of the segments ``frames[starts[s]:stops[s]]``.

    Partials of consecutive pieces of one sequence merge exactly with
    :func:`streamcov.linalg.merge_moments`.
    """
    frames, starts, stops = _segment_args(frames, starts, stops, selection)
    d = selection.dim
    out_n = np.empty(len(starts), dtype=np.int64)
    out_mean = np.empty((len(starts), d))
    out_m2 = np.empty((len(starts), d, d))
    c, k = selection.arrays()
    _kc.segment_moments(frames, starts, stops, c, k, out_n, out_mean, out_m2)
    return out_n, out_mean, out_m2


def sequence_covariances(frames, offsets, selection: JointSelection, ddof: int = 1):
    """Covariance matrix of each sequence ``frames[offsets[i]:offsets[i+1]]``."""
    offsets = np.asarray(offsets, dtype=np.int64)
    n, _, m2 = segment_moments(frames, offsets[:-1], offsets[1:], selection)
    denom = np.maximum(n - ddof, 1).astype(np.float64)
    return m2 / denom[:, None, None]


def log_vectors_from_moments(n, m2, gamma: float, normalize: bool, ddof: int = 1,
                             dtype=np.float64, first_index: int = 0):
    """vec(log(M2 / (n - ddof) + gamma I)), optionally unit-norm, for a batch of sequences.

    Raises :class:`~streamcov.errors.NotSPDError` naming the first offending
    sequence (index counted from ``first_index``) when a regularized
    covariance is not positive definite, e.g. with ``gamma = 0`` on a
    sequence with fewer frames than dimensions.
    """
    n = np.ascontiguousarray(n, dtype=np.int64)
    m2 = np.ascontiguousarray(m2, dtype=np.float64)
    if m2.ndim != 3 or m2.shape[1] != m2.shape[2]:
        raise ValueError(f"M2 must be a stack of square matrices, got shape {m2.shape}")
    if gamma < 0:
        raise ValueError(f"regularization gamma must be >= 0, got {gamma}")
    d = m2.shape[1]
    return linalg.log_vectors(m2, float(gamma), scale=1.0 / np.maximum(n - int(ddof), 1),
                              normalize=bool(normalize), dtype=dtype, check=False,
                              describe=lambda i: _sequence(first_index + i, n[i], d))


def _sequence(i, n, d):
    return f"covariance of sequence {i} ({n} frames, {d} dims)"


def log_covariance_vectors(frames, offsets, selection: JointSelection, gamma: float = 1e-4,
                           normalize: bool = True, ddof: int = 1, dtype=np.float64):
    """Descriptor of paper 000 for each sequence ``frames[offsets[i]:offsets[i+1]]``: vec(log(Cov + gamma I)).

    Same result as :func:`segment_moments` followed by
    :func:`log_vectors_from_moments`, computed by one fused kernel that never
    holds the stack of d x d moment matrices.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    frames, starts, stops = _segment_args(frames, offsets[:-1], offsets[1:], selection)
    if gamma < 0:
        raise ValueError(f"regularization gamma must be >= 0, got {gamma}")
    d = selection.dim
    n = np.empty(len(starts), dtype=np.int64)
    out = np.empty((len(starts), vec_dim(d)), dtype=np.float64)
    min_eig = np.empty(len(starts))
    c, k = selection.arrays()
    _ks.frames_log_vec(frames, starts, stops, c, k, float(gamma), int(ddof), bool(normalize),
                       n, out, min_eig)
    linalg._raise_not_spd(min_eig, gamma, lambda i: _sequence(i, n[i], d))
    return out.astype(dtype, copy=False)


def _as_sequences(X, name="X"):
    """A list of 2-D float arrays (frames x 3J) from a list of arrays or a 3-D array."""
    if isinstance(X, np.ndarray) and X.ndim == 3:
        seqs = list(X)
    elif isinstance(X, np.ndarray) and X.ndim != 3:
        raise ValueError(f"{name}: expected a list of (frames, 3 x joints) arrays or a 3-D array "
                         f"(sequences, frames, 3 x joints), got an array of shape {X.shape}")
    else:
        try:
            seqs = list(X)
        except TypeError:
            raise ValueError(f"{name}: expected a list of (frames, 3 x joints) arrays, got "
                             f"{type(X).__name__}") from None
    if not seqs:
        raise ValueError(f"{name}: no sequences")
    return seqs


def pack_sequences(sequences, n_joints: int | None = None, name: str = "X"):
    """Concatenate ragged sequences into (frames, offsets) as the stores hold them."""
    seqs = _as_sequences(sequences, name)
    arrs = []
    for i, f in enumerate(seqs):
        a = np.asarray(f)
        if a.ndim != 2:
            raise ValueError(f"{name}[{i}]: expected a 2-D array (frames, 3 x joints), got shape {a.shape}")
        arrs.append(a)
    widths = {a.shape[1] for a in arrs}
    if len(widths) > 1:
        raise ValueError(f"{name}: sequences have different widths {sorted(widths)}; every frame "
                         f"must hold the same joints")
    width = widths.pop()
    if n_joints is not None and width != 3 * n_joints:
        raise ValueError(f"{name}: frames have {width} values, this descriptor was fitted on "
                         f"{n_joints} joints ({3 * n_joints} values)")
    lengths = np.array([len(a) for a in arrs], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    dtype = np.float32 if all(a.dtype == np.float32 for a in arrs) else np.float64
    frames = np.concatenate([a.astype(dtype, copy=False) for a in arrs]) if arrs else np.empty((0, width))
    return _check_frames(frames), offsets

"""Covariance descriptors of skeleton sequences and SPD matrix functions.

Public, validating wrappers around the numba kernels in
:mod:`streamcov._kernels`. Paper 000 (Cavazza et al.) preprocessing: joint
coordinates are taken relative to the hip (centre) joint in every frame, the
covariance of the resulting 3(J-1)-dimensional vectors over the frames of a
sequence is regularized by gamma*I, mapped by the matrix logarithm (eq. (2))
and vectorized so that Euclidean inner products equal Frobenius ones.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._kernels import covariance as _kc
from ._kernels import spd as _ks


class NotSPDError(ValueError):
    """A matrix that should be symmetric positive definite is not."""


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


def vec_dim(d: int) -> int:
    """Length of the vectorized upper triangle of a d x d matrix."""
    return d * (d + 1) // 2


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
    :func:`merge_moments`.
    """
    frames, starts, stops = _segment_args(frames, starts, stops, selection)
    d = selection.dim
    out_n = np.empty(len(starts), dtype=np.int64)
    out_mean = np.empty((len(starts), d))
    out_m2 = np.empty((len(starts), d, d))
    c, k = selection.arrays()
    _kc.segment_moments(frames, starts, stops, c, k, out_n, out_mean, out_m2)
    return out_n, out_mean, out_m2


def merge_moments(a, b):
    """Merge two partial results ``(n, mean, M2)`` (single segments)."""
    na, ma, m2a = a
    nb, mb, m2b = b
    out_mean = np.empty_like(np.asarray(ma, dtype=np.float64))
    out_m2 = np.empty_like(np.asarray(m2a, dtype=np.float64))
    n = _kc.merge_moments(int(na), np.asarray(ma, np.float64), np.asarray(m2a, np.float64),
                          int(nb), np.asarray(mb, np.float64), np.asarray(m2b, np.float64),
                          out_mean, out_m2)
    return n, out_mean, out_m2


def sequence_covariances(frames, offsets, selection: JointSelection, ddof: int = 1):
    """Covariance matrix of each sequence ``frames[offsets[i]:offsets[i+1]]``."""
    offsets = np.asarray(offsets, dtype=np.int64)
    n, _, m2 = segment_moments(frames, offsets[:-1], offsets[1:], selection)
    denom = np.maximum(n - ddof, 1).astype(np.float64)
    return m2 / denom[:, None, None]


def log_vectors_from_moments(n, m2, gamma: float, normalize: bool, ddof: int = 1,
                             dtype=np.float64, first_index: int = 0):
    """vec(log(M2 / (n - ddof) + gamma I)), optionally unit-norm, for a batch.

    Raises :class:`NotSPDError` naming the first offending matrix (index
    counted from ``first_index``) when a regularized covariance is not
    positive definite, e.g. with ``gamma = 0`` on a sequence with fewer frames
    than dimensions.
    """
    n = np.ascontiguousarray(n, dtype=np.int64)
    m2 = np.ascontiguousarray(m2, dtype=np.float64)
    if m2.ndim != 3 or m2.shape[1] != m2.shape[2]:
        raise ValueError(f"M2 must be a stack of square matrices, got shape {m2.shape}")
    if gamma < 0:
        raise ValueError(f"regularization gamma must be >= 0, got {gamma}")
    out = np.empty((m2.shape[0], vec_dim(m2.shape[1])), dtype=np.float64)
    min_eig = np.empty(m2.shape[0])
    _ks.cov_log_vec(n, m2, float(gamma), int(ddof), bool(normalize), out, min_eig)
    _raise_not_spd(min_eig, n, m2.shape[1], gamma, first_index)
    return out.astype(dtype, copy=False)


def _raise_not_spd(min_eig, n, d, gamma, first_index=0):
    bad = np.flatnonzero(min_eig <= 0)
    if len(bad):
        i = int(bad[0])
        raise NotSPDError(
            f"covariance of sequence {first_index + i} ({n[i]} frames, {d} dims) "
            f"is not positive definite (smallest eigenvalue {min_eig[i]:.3g}); "
            f"increase the regularization gamma (now {gamma})")


def log_covariance_vectors(frames, offsets, selection: JointSelection, gamma: float = 1e-4,
                           normalize: bool = True, ddof: int = 1, dtype=np.float64):
    """Descriptor of paper 000 for each sequence: vec(log(Cov + gamma I)).

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
    _raise_not_spd(min_eig, n, d, gamma)
    return out.astype(dtype, copy=False)


def _check_sym_stack(mats):
    mats = np.asarray(mats, dtype=np.float64)
    squeeze = mats.ndim == 2
    if squeeze:
        mats = mats[None]
    if mats.ndim != 3 or mats.shape[1] != mats.shape[2]:
        raise ValueError(f"expected a square matrix or a stack of them, got shape {mats.shape}")
    if not np.isfinite(mats).all():
        raise ValueError("matrix contains NaN or inf")
    if not np.allclose(mats, mats.transpose(0, 2, 1), rtol=1e-10, atol=1e-12 * max(1.0, np.abs(mats).max(initial=0))):
        raise ValueError("matrix is not symmetric")
    return np.ascontiguousarray(mats), squeeze


def _spd_apply(mats, kind: int, what: str):
    mats, squeeze = _check_sym_stack(mats)
    out = np.empty_like(mats)
    min_eig = np.empty(len(mats))
    _ks.spd_func(mats, kind, out, min_eig)
    if kind == 0 and (min_eig <= 0).any():
        i = int(np.flatnonzero(min_eig <= 0)[0])
        raise NotSPDError(f"matrix {i} is not positive definite (smallest eigenvalue "
                          f"{min_eig[i]:.3g}); {what} needs SPD input: add gamma*I")
    if kind == 2 and (min_eig < 0).any():
        i = int(np.flatnonzero(min_eig < 0)[0])
        raise NotSPDError(f"matrix {i} has a negative eigenvalue {min_eig[i]:.3g}; {what} needs PSD input")
    return out[0] if squeeze else out


def spd_logm(mats):
    """Matrix logarithm of SPD matrices by eigendecomposition (paper 000, eq. (2))."""
    return _spd_apply(mats, 0, "logm")


def sym_expm(mats):
    """Matrix exponential of symmetric matrices by eigendecomposition."""
    return _spd_apply(mats, 1, "expm")


def spd_sqrtm(mats):
    """Square root of symmetric positive semi-definite matrices."""
    return _spd_apply(mats, 2, "sqrtm")


def sym_vec(mats):
    """Upper triangle with off-diagonals times sqrt(2): <vec A, vec B> = <A, B>_F."""
    mats, squeeze = _check_sym_stack(mats)
    out = np.empty((len(mats), vec_dim(mats.shape[1])))
    _ks.sym_vec(mats, out)
    return out[0] if squeeze else out


def sym_unvec(vecs):
    """Inverse of :func:`sym_vec`."""
    vecs = np.asarray(vecs, dtype=np.float64)
    squeeze = vecs.ndim == 1
    if squeeze:
        vecs = vecs[None]
    p = vecs.shape[1]
    d = int(round((np.sqrt(8 * p + 1) - 1) / 2))
    if vec_dim(d) != p:
        raise ValueError(f"vector length {p} is not d(d+1)/2 for any d")
    out = np.empty((len(vecs), d, d))
    _ks.sym_unvec(np.ascontiguousarray(vecs), out)
    return out[0] if squeeze else out

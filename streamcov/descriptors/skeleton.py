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

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from numbers import Integral

import numpy as np

from .. import kernels, linalg
from .._config import run_parallel
from .._kernels import covariance as _kc
from .._kernels import kernelized as _kk
from .._kernels import spd as _ks
from ..errors import ConfigError, toml_value
from ..linalg import vec_dim


def _check_joint_count(n_joints) -> None:
    """A joint count is an integer >= 1 (0 or -1 made an empty selection, whose descriptors have no entries)."""
    if isinstance(n_joints, bool) or not isinstance(n_joints, Integral) or n_joints < 1:
        raise ValueError(f"n_joints: expected an integer >= 1, got {n_joints!r}")


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
        _check_joint_count(n_joints)
        if not all(isinstance(c, Integral) and not isinstance(c, bool) for c in center):   # int() read 0.9 as 0
            raise ValueError(f"center: expected 0-based joint indices (integers), got {tuple(center)!r}")
        center = tuple(int(c) for c in center)
        for c in center:
            if not 0 <= c < n_joints:
                raise ValueError(f"centre joint {c} outside 0..{n_joints - 1}")
        drop = set(center) if len(center) == 1 else set()
        keep = tuple(j for j in range(n_joints) if j not in drop)
        if not keep:   # a 0 x 0 covariance: the numba kernels wrote past buffers sized from it (heap corruption)
            raise ValueError(f"center {list(center)}: the only joint is the centre, and no joint is left once it is "
                             f"removed; a hip-relative covariance needs another joint (or no centre: raw "
                             f"coordinates)")
        return cls(center=center, keep=keep)

    @classmethod
    def raw(cls, n_joints: int) -> "JointSelection":
        _check_joint_count(n_joints)
        return cls(center=(), keep=tuple(range(n_joints)))

    @property
    def dim(self) -> int:
        return 3 * len(self.keep)

    def arrays(self):
        return (np.asarray(self.center, dtype=np.int64),
                np.asarray(self.keep, dtype=np.int64))


#: the largest coordinate taken: products of two stay far below float64's 1.8e308 in the covariances and in
#: their eigensolvers (a larger one made the solvers fail on infinities inside the numba kernels)
MAX_COORDINATE = 1e100


def _check_frames(frames: np.ndarray, n_joints: int | None = None, offsets=None, name: str = "X") -> np.ndarray:
    """``frames`` checked (2-D, 3 values per joint, finite, within :data:`MAX_COORDINATE`) and contiguous.
    ``offsets``: the sequences ``frames`` concatenates, so that a non-finite value is named as ``name[i]``
    and its frame rather than as a row of the concatenation."""
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
    # one pass over the block: the largest magnitude is NaN or infinite exactly when a value is
    big = float(np.abs(frames).max(initial=0.0))
    if not np.isfinite(big):
        row, col = (int(v) for v in np.argwhere(~np.isfinite(frames))[0])
        if offsets is not None:
            i = int(np.searchsorted(offsets, row, side="right")) - 1
            raise ValueError(f"{name}[{i}]: a non-finite value (NaN or infinity) at frame {row - offsets[i]}, "
                             f"column {col}; remove or fill that frame")
        raise ValueError(f"frames contains a non-finite value at row {row}, column {col}")
    if big > MAX_COORDINATE:   # compared as float64: 1e100 is infinite as float32
        raise ValueError(f"frames holds coordinates up to {float(big):.3g}: their covariances would overflow "
                         f"float64 (coordinates up to {MAX_COORDINATE:.0e} are taken); rescale the data (e.g. to "
                         f"metres)")
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


def _check_offsets(offsets, n_frames: int, min_frames: int, name: str = "sequence {}") -> np.ndarray:
    """``offsets`` of sequences that tile ``n_frames`` frames, each of at least ``min_frames``, as int64
    (2, or ``ddof + 1``: one frame has a covariance of 0 whatever ``ddof``); ``name`` names sequence ``i`` in
    the messages (``"X[{}]"`` for a transformer's input).

    Fractional offsets were truncated, offsets that left frames out (not starting at 0 or ending
    before the last frame) dropped them, and a sequence of too few frames got a covariance of 0: the
    descriptor log(gamma I) of the regularization alone, the same whatever the action; each without a word.
    """
    a = np.asarray(offsets)
    if a.ndim != 1 or len(a) < 1 or not (np.issubdtype(a.dtype, np.integer) or (
            np.issubdtype(a.dtype, np.floating) and np.isfinite(a).all() and (a == np.round(a)).all())):
        raise ValueError(f"offsets must be a 1-D array of whole frame indices, got {np.array2string(a, threshold=8)}")
    a = a.astype(np.int64)
    if a[0] != 0 or a[-1] != n_frames or (np.diff(a) < 0).any():
        raise ValueError(f"offsets must rise from 0 to the {n_frames} frames (every frame in one sequence), got "
                         f"{np.array2string(a, threshold=8)}")
    short = np.flatnonzero(np.diff(a) < min_frames)
    if len(short):
        i = int(short[0])
        raise ValueError(f"{name.format(i)} has {int(a[i + 1] - a[i])} frame(s); its covariance needs at least "
                         f"{min_frames}: leave it out")
    return a


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
    run_parallel(_kc.segment_moments, frames, starts, stops, c, k, out_n, out_mean, out_m2)
    return out_n, out_mean, out_m2


def sequence_covariances(frames, offsets, selection: JointSelection, ddof: int = 1):
    """Covariance matrix of each sequence ``frames[offsets[i]:offsets[i+1]]``."""
    _check_ddof(ddof)
    offsets = _check_offsets(offsets, len(frames), max(2, int(ddof) + 1))
    n, _, m2 = segment_moments(frames, offsets[:-1], offsets[1:], selection)
    denom = np.maximum(n - ddof, 1).astype(np.float64)
    return m2 / denom[:, None, None]


def log_vectors_from_moments(n, m2, gamma: float, normalize: bool, ddof: int = 1,
                             dtype=np.float64, first_index: int = 0, names=None):
    """vec(log(M2 / (n - ddof) + gamma I)), optionally unit-norm, for a batch of sequences.

    Raises :class:`~streamcov.errors.NotSPDError` naming the first offending
    sequence (index counted from ``first_index``, or ``names[i]`` when given:
    the streamed path names the store's row and id) when a regularized
    covariance is not positive definite, e.g. with ``gamma = 0`` on a
    sequence with fewer frames than dimensions.
    """
    n = np.ascontiguousarray(n, dtype=np.int64)
    m2 = np.ascontiguousarray(m2, dtype=np.float64)
    if m2.ndim != 3 or m2.shape[1] != m2.shape[2]:
        raise ValueError(f"M2 must be a stack of square matrices, got shape {m2.shape}")
    gamma = _check_gamma(gamma)
    _check_ddof(ddof)
    d = m2.shape[1]
    return linalg.log_vectors(m2, float(gamma), scale=1.0 / np.maximum(n - int(ddof), 1),
                              normalize=bool(normalize), dtype=dtype, check=False,
                              describe=lambda i: _sequence(_name(i, first_index, names), n[i], d))


def _check_gamma(gamma) -> float:
    if np.ndim(gamma):
        raise ValueError(f"gamma: expected one number (the regularization), got {gamma!r}")
    return linalg.check_gammas(gamma)[0]


def _check_ddof(ddof) -> None:
    if isinstance(ddof, bool) or not isinstance(ddof, Integral) or ddof < 0:
        raise ValueError(f"ddof: expected an integer >= 0 (delta degrees of freedom), got {ddof!r}")


def _name(i: int, first_index: int, names) -> str:
    """Sequence ``i`` of a batch in error messages: its index, or ``names[i]``."""
    return str(first_index + i) if names is None else str(names[i])


def _sequence(name, n, d):
    return f"covariance of sequence {name} ({n} frames, {d} dims)"


def log_covariance_vectors(frames, offsets, selection: JointSelection, gamma: float = 1e-4,
                           normalize: bool = True, ddof: int = 1, dtype=np.float64):
    """Descriptor of paper 000 for each sequence ``frames[offsets[i]:offsets[i+1]]``: vec(log(Cov + gamma I)).

    Same result as :func:`segment_moments` followed by
    :func:`log_vectors_from_moments`, computed by one fused kernel that never
    holds the stack of d x d moment matrices.

    Parameters
    ----------
    frames : array (n_frames, 3 x joints)
        The sequences' frames, concatenated (:func:`pack_sequences`).
    offsets : array of int (n_sequences + 1,)
        Sequence ``i`` is ``frames[offsets[i]:offsets[i+1]]``: from 0 to ``len(frames)``, each of at least
        ``max(2, ddof + 1)`` frames.
    selection : JointSelection
        The centre joints subtracted in every frame and the joints kept; ``d = selection.dim``.
    gamma : float
        Regularization added to the diagonal of every covariance (>= 0; a covariance not positive definite
        once regularized raises :class:`~streamcov.errors.NotSPDError`).
    normalize : bool
        Scale each vector to unit Euclidean norm (``||log X||_F = 1``).
    ddof : int
        Delta degrees of freedom: the covariance divides by ``n - ddof`` (at least 1) for ``n`` frames.
    dtype : numpy floating dtype
        Of the result (the computation is float64).

    Returns
    -------
    ndarray (n_sequences, d(d+1)/2)
    """
    gamma = _check_gamma(gamma)   # NaN or inf was a SystemError out of the numba kernel
    _check_ddof(ddof)
    dtype = linalg.float_dtype(dtype)   # an integer dtype truncated every descriptor
    offsets = _check_offsets(offsets, len(frames), max(2, int(ddof) + 1))
    frames, starts, stops = _segment_args(frames, offsets[:-1], offsets[1:], selection)
    d = selection.dim
    n = np.empty(len(starts), dtype=np.int64)
    out = np.empty((len(starts), vec_dim(d)), dtype=np.float64)
    min_eig = np.empty(len(starts))
    c, k = selection.arrays()
    run_parallel(_ks.frames_log_vec, frames, starts, stops, c, k, float(gamma), int(ddof), bool(normalize),
                 n, out, min_eig)
    linalg._raise_not_spd(min_eig, gamma, lambda i: _sequence(i, n[i], d))
    # a gamma near float64's largest (1e308) overflowed the eigensolver: NaN descriptors, without a word
    def largest(i):   # of the covariance's entries, about the square of the largest coordinate
        with np.errstate(over="ignore"):
            return float(np.square(np.abs(frames[starts[i]:stops[i]]).max(initial=0.0), dtype=np.float64))

    linalg._check_finite_result(out, largest, float(gamma), lambda i: _sequence(i, n[i], d))
    return out.astype(dtype, copy=False)


def check_item_list(X, name: str, expected: str) -> None:
    """Refuse a mapping or a string given for a list of items: ``list()`` took a dict's keys (or a string's
    characters) for the items, and the message spoke of an item ``X[0]`` of shape ()."""
    if isinstance(X, Mapping):
        raise ValueError(f"{name}: expected {expected}, got a {type(X).__name__} (its keys would be read as the "
                         f"items); give a list, e.g. list({name}.values())")
    if isinstance(X, (str, bytes)):
        raise ValueError(f"{name}: expected {expected}, got a {type(X).__name__} ({X[:40]!r}); read the data "
                         f"into arrays first")
    if hasattr(X, "toarray") and not isinstance(X, np.ndarray):
        raise ValueError(f"{name}: a sparse matrix ({type(X).__name__}); expected {expected}, dense")
    if hasattr(X, "columns") and hasattr(X, "to_numpy"):   # iterated, a DataFrame gives its column labels
        raise ValueError(f"{name}: a DataFrame, which reads as its column labels; expected {expected}, e.g. "
                         f"[frame.to_numpy()] for one")


def check_dense_item(item, where: str) -> None:
    """Refuse a sparse matrix given as one item (a sequence, an image): numpy read it as an object of shape ()."""
    if hasattr(item, "toarray") and not isinstance(item, np.ndarray):
        raise ValueError(f"{where}: a sparse matrix ({type(item).__name__}); give a dense array: item.toarray()")


def _as_sequences(X, name="X"):
    """A list of 2-D float arrays (frames x 3J) from a list of arrays or a 3-D array."""
    check_item_list(X, name, "a list of (frames, 3 x joints) arrays or a 3-D array (sequences, frames, 3 x joints)")
    if isinstance(X, np.ndarray) and X.ndim == 3:
        seqs = list(X)
    elif isinstance(X, np.ndarray) and X.ndim == 1 and X.dtype == object:   # ragged sequences, as train_test_split
        seqs = list(X)                                                      # returns a list given as an array
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
        check_dense_item(f, f"{name}[{i}]")
        try:
            a = np.asarray(f)
        except ValueError:   # numpy's "inhomogeneous shape" words, without the sequence
            raise ValueError(f"{name}[{i}]: frames of different lengths; expected a 2-D array (frames, "
                             f"3 x joints)") from None
        if a.ndim != 2:
            raise ValueError(f"{name}[{i}]: expected a 2-D array (frames, 3 x joints), got shape {a.shape}")
        if np.iscomplexobj(a):
            raise ValueError(f"{name}[{i}]: complex coordinates; complex data is not supported")
        if a.dtype.kind not in "biuf":
            try:   # numbers held as objects are taken; text was float()'s words, without the sequence
                a = a.astype(np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"{name}[{i}]: expected numbers (coordinates), got an array of dtype "
                                 f"{a.dtype}") from None
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
    return _check_frames(frames, offsets=offsets, name=name), offsets


# ----------------------------------------------------------------------------------------------
# The descriptor with options: frame features, temporal pyramid, body frame, Gaussian embedding
# ----------------------------------------------------------------------------------------------
FEATURES = ("positions", "velocities", "accelerations")
_ORDER = {"positions": 0, "velocities": 1, "accelerations": 2}
MATRICES = ("covariance", "rbf", "rbf-raw")
#: the kernelized covariances among :data:`MATRICES` (Gaussian Gram matrices between coordinate series)
RBF_MATRICES = ("rbf", "rbf-raw")
#: why a kernelized covariance has no mean embedding (``matrix``, and the key as the caller spells it)
RBF_NO_MEAN = ("matrix = {matrix} is a Gram matrix between coordinate series, which has no mean embedding "
               "(rbf standardizes the series to mean 0; rbf-raw has their means inside its distances); "
               "set {key} = 0")
#: ``body_frame``: none; a rotation per sequence about the camera's up axis (``yaw``) or into the
#: frame of the mean hips and spine (``torso``); the torso frame of every frame (``torso-frames``)
BODY_FRAMES = ("none", "yaw", "torso", "torso-frames")
#: per-sequence body sums (:func:`body_sums`): hip line (3), neck distance (1), spine vector (3)
BODY_SUMS = 7
#: a coordinate whose window variance is at most this fraction of the window's largest is constant
#: (its standardized series is 0) in the kernelized covariance
CONSTANT_RTOL = 1e-20


def rbf_gram_from_covariances(C, sigma: float) -> np.ndarray:
    """Kernelized covariance (Cavazza et al., ICPR 2016) of each window from its covariance matrix.

    For the coordinate series ``x_i`` of a window of ``n`` frames, standardized
    to mean 0 and variance 1 (``z_i = (x_i - mean_i) / sqrt(C_ii)``, the
    variance with the covariance's ``ddof``), the Gram matrix of the Gaussian
    kernel of :mod:`streamcov.kernels` between the series, with the squared
    distance averaged over the frames, is

        K_ij = exp(-delta_ij / (2 sigma^2)),
        delta_ij = ||z_i - z_j||^2 / (n - ddof) = v_i + v_j - 2 rho_ij,

    ``rho`` the correlation matrix of ``C`` and ``v_i = 1``; a constant
    coordinate (``C_ii <= CONSTANT_RTOL * max_j C_jj``) has ``z_i = 0``:
    ``v_i = 0`` and ``rho_ij = 0``. ``K`` is symmetric positive semidefinite
    (a Gaussian Gram matrix), ``K_ii = 1``, entries in ``(0, 1]``; it
    depends on the frames only through ``C``, so windows streamed as merged
    moments give the kernel of the whole window.

    Parameters
    ----------
    C : array (N, d, d) or (d, d)
        Covariance matrices (symmetric, non-negative diagonal).
    sigma : float
        Bandwidth in units of standardized coordinates (> 0).

    Returns
    -------
    K : array of the shape of ``C``, float64.

    References
    ----------
    J. Cavazza, A. Zunino, M. San Biagio, V. Murino, "Kernelized covariance for
    action recognition", ICPR 2016.
    """
    C, single = linalg._check_stack(C, "covariance")
    out = np.empty_like(C)
    _kk.rbf_from_covariances(C, _kernel_coef(sigma), CONSTANT_RTOL, out)
    return out[0] if single else out


def _kernel_coef(sigma) -> float:
    """``1 / (2 sigma^2)`` of the kernelized covariances, ``sigma`` named as the descriptor's key."""
    return kernels.gamma_from_sigma(kernels._bandwidth(sigma, "kernel_sigma"))


def rbf_gram_from_moments(C, mean, sigma: float) -> np.ndarray:
    """Kernelized covariance of the raw coordinate series (``matrix = "rbf-raw"``) from their moments.

    The Gaussian Gram matrix between the coordinate series ``x_i`` of a
    window as they are (hip-relative, in the body frame and scale of the
    descriptor), not standardized:

        K_ij = exp(-delta_ij / (2 sigma^2)),
        delta_ij = C_ii + C_jj - 2 C_ij + (mu_i - mu_j)^2,

    the variance of ``x_i - x_j`` plus the square of its mean: with
    ``ddof = 0`` in ``C``, the mean over the frames of ``(x_i - x_j)^2``.
    Unlike :func:`rbf_gram_from_covariances` it keeps how far each
    coordinate moves and where it lies (the standardized series see only
    correlations). Symmetric positive semidefinite, ``K_ii = 1``; a
    function of the moments, so exact across streamed chunks.

    Parameters
    ----------
    C : array (N, d, d) or (d, d)
        Covariance matrices of the series.
    mean : array (N, d) or (d,)
        Their means.
    sigma : float
        Bandwidth in the units of the coordinates (> 0).

    Returns
    -------
    K : array of the shape of ``C``, float64.
    """
    C, single = linalg._check_stack(C, "covariance")
    if np.iscomplexobj(mean):
        raise ValueError("mean: complex values are not supported; give real ones")
    mean = np.asarray(mean, dtype=np.float64)
    if mean.shape != C.shape[:2] and not (single and mean.shape == C.shape[1:2]):
        raise ValueError(f"mean must have shape {C.shape[1:2] if single else C.shape[:2]} to match the "
                         f"covariances, got {mean.shape}")
    mean = mean.reshape(C.shape[:2])
    if not np.all(np.isfinite(mean)):
        raise ValueError("mean holds NaN or infinite values")
    out = np.empty_like(C)
    _kk.rbf_from_second_moments(C + mean[:, :, None] * mean[:, None, :], _kernel_coef(sigma), out)
    return out[0] if single else out


@dataclass(frozen=True)
class PyramidPlan:
    """Every setting of the descriptor with options, resolved against a store's joints.

    The descriptor of a sequence with ``T`` frames (frame feature rows
    ``f_t``, see :func:`piece_features`) is the concatenation over the
    windows ``w`` of the temporal pyramid (:func:`window_bounds`) of
    ``vec(log(S_w + gamma I))`` (each scaled to unit norm when
    ``normalize``), where ``S_w`` is the window's matrix: ``S_w = C_w``, the
    covariance of the ``n_w`` rows of window ``w`` in the body frame,

        C_w = B (sum_{t in w} (f_t - mu_w)(f_t - mu_w)^T / max(n_w - ddof, 1)) B^T / s^2,

    ``B`` applying the sequence's rotation ``R`` (yaw or torso) to every
    (x, y, z) triplet and ``s`` its body size (:func:`body_transform`; with
    ``body_frame = "torso-frames"`` each frame is rotated into its own torso
    frame before its features are formed, :func:`torso_frames`), or, with the
    Gaussian embedding of the mean (``mean_weight = m > 0``), the embedding of
    ``C_w`` and the window's mean,

        S_w = [[C_w + m^2 mu'_w mu'_w^T, m mu'_w], [m mu'_w^T, 1]],  mu'_w = B mu_w / s.

    Each window is one block of the kernel of paper 000, eq. (1), summed with
    the weights of :meth:`window_weights` (Cov3DJ, Hussein et al. 2013).

    ``pairs``: joint index pairs ``(a, b)``; each adds the relative position
    ``p_a - p_b`` (3 rows) after the other frame features. ``matrix = "rbf"``
    (kernelized covariance, Cavazza et al., ICPR 2016) replaces ``C_w`` by
    the Gaussian Gram matrix of the window's standardized coordinate series
    with bandwidth ``kernel_sigma`` (:func:`rbf_gram_from_covariances`),
    computed from the same moments; ``matrix = "rbf-raw"`` by the Gram matrix
    of the series as they are, in the body frame and scale, means included
    (:func:`rbf_gram_from_moments`). Neither has a mean embedding.

    ``mirror``: the joint permutation that swaps left and right
    (:func:`mirror_permutation`; empty: no mirror). The descriptor is then two
    *views*, ``[v(x), v(m x)]``, ``m x`` the sequence's mirror image (joints
    swapped, coordinate ``mirror_axis`` negated: :func:`mirror_frames`), each
    of :attr:`view_dim` numbers; the kernel averages over the pairs of views
    (:func:`streamcov.kernels.block_gaussian_kernel` with ``views = 2``), so
    that a performance and its mirror image are the same to it.
    """

    selection: JointSelection
    features: tuple = ("positions",)
    window: int = 5
    time: str = "frame"
    levels: int = 1
    overlap: bool = False
    level_weights: tuple | None = None
    body_frame: str = "none"
    up_axis: int = 1
    scale: str = "none"
    left_hip: tuple = ()
    right_hip: tuple = ()
    neck: tuple = ()
    mean_weight: float = 0.0
    gamma: float = 1e-4
    ddof: int = 1
    normalize: bool = True
    min_window: int = 3
    pairs: tuple = ()
    matrix: str = "covariance"
    kernel_sigma: float = 1.0
    mirror: tuple = ()
    mirror_axis: int = 0

    def __post_init__(self):
        if self.mirror and sorted(self.mirror) != list(range(len(self.mirror))):
            raise ValueError(f"mirror must be a permutation of the joints, got {list(self.mirror)!r}")
        if self.matrix not in MATRICES:
            raise ValueError(f"matrix must be one of {', '.join(MATRICES)}, got {self.matrix!r}")
        if self.matrix in RBF_MATRICES and self.mean_weight > 0:
            raise ValueError(RBF_NO_MEAN.format(matrix=repr(self.matrix), key="mean_weight"))
        if self.matrix in RBF_MATRICES:
            _kernel_coef(self.kernel_sigma)   # the one bandwidth check, naming kernel_sigma

    @property
    def frame_dim(self) -> int:
        """Width of a frame feature row."""
        return self.selection.dim * len(self.features) + 3 * len(self.pairs)

    @property
    def matrix_dim(self) -> int:
        """Side of each window's SPD matrix (one more with the Gaussian embedding)."""
        return self.frame_dim + (1 if self.mean_weight > 0 else 0)

    @property
    def n_windows(self) -> int:
        return n_windows(self.levels, self.overlap)

    @property
    def views(self) -> int:
        """The sequence alone (1), or the sequence and its mirror image (2)."""
        return 2 if self.mirror else 1

    @property
    def view_dim(self) -> int:
        """Width of one view: the windows' ``vec(log S_w)``."""
        return self.n_windows * vec_dim(self.matrix_dim)

    @property
    def dim(self) -> int:
        return self.views * self.view_dim

    def single_view(self) -> "PyramidPlan":
        """This plan without the mirror view (what each view is computed with)."""
        return replace(self, mirror=()) if self.mirror else self

    def view_frames(self, frames) -> list:
        """``[frames]``, or ``[frames, mirror image]`` with the mirror view."""
        if not self.mirror:
            return [frames]
        return [frames, mirror_frames(frames, self.mirror, self.mirror_axis)]

    @property
    def halo(self) -> int:
        """Frames a piece needs on either side (the derivative window less one)."""
        return self.window - 1 if any(f != "positions" for f in self.features) else 0

    @property
    def needs_body(self) -> bool:
        return self.body_frame != "none" or self.scale != "none"

    def window_weights(self) -> np.ndarray:
        return window_weights(self.levels, self.overlap, self.level_weights)


def n_windows(levels: int, overlap: bool) -> int:
    """Windows of a pyramid of ``levels`` levels: ``2^l`` per level, ``2^(l+1) - 1`` with half overlap."""
    return sum((2 ** (l + 1) - 1) if overlap and l > 0 else 2 ** l for l in range(levels))


def window_weights(levels: int, overlap: bool, level_weights=None) -> np.ndarray:
    """Kernel weight of every window: the level's weight (normalized to sum 1) shared equally by its windows."""
    lw = np.ones(levels) if level_weights is None else np.asarray(level_weights, dtype=np.float64)
    if lw.shape != (levels,) or not (lw > 0).all():
        raise ValueError(f"level_weights must be {levels} positive numbers, got {level_weights!r}")
    lw = lw / lw.sum()
    out = []
    for l in range(levels):
        k = (2 ** (l + 1) - 1) if overlap and l > 0 else 2 ** l
        out += [lw[l] / k] * k
    return np.array(out)


def window_bounds(T: int, levels: int, overlap: bool, min_window: int = 3) -> np.ndarray:
    """Frame ranges ``[start, stop)`` of the pyramid windows of a sequence of ``T`` frames.

    Level ``l`` covers the sequence with ``2^l`` windows of ``T / 2^l``
    frames (start ``k T / 2^l``), or with half overlap ``2^(l+1) - 1``
    windows starting every ``T / 2^(l+1)``; starts are rounded down, stops
    up. A window shorter than ``min_window`` frames is widened about its
    centre (within the sequence).
    """
    out = []
    for l in range(levels):
        n = 2 ** l
        starts = [k * T / (2 * n) for k in range(2 * n - 1)] if overlap and l > 0 else \
            [k * T / n for k in range(n)]
        for a in starts:
            s, e = int(np.floor(a)), int(np.ceil(a + T / n))
            e = max(e, s + 1)
            if e - s < min_window:
                mid = 0.5 * (s + e)
                s = int(max(0, min(T - min_window, round(mid - min_window / 2))))
                e = min(T, s + min_window)
            out.append((s, e))
    return np.array(out, dtype=np.int64).reshape(-1, 2)


_TABLES: dict = {}


def savgol_table(n: int, order: int, polyorder: int = 2) -> np.ndarray:
    """(n, n) Savitzky-Golay table: row ``p`` weighs the ``n`` window frames into the
    derivative of order ``order`` (per frame) at window position ``p`` of the least-squares
    polynomial of degree ``min(polyorder, n - 1)``."""
    key = (n, order, polyorder)
    if key not in _TABLES:
        deg = min(polyorder, n - 1)
        x = np.arange(n, dtype=np.float64) - (n - 1) / 2.0
        A = x[:, None] ** np.arange(deg + 1)[None, :]
        P = np.linalg.pinv(A)                     # (deg + 1, n): polynomial coefficients
        table = np.zeros((n, n))
        for j in range(order, deg + 1):
            fac = float(np.prod(np.arange(j - order + 1, j + 1)))
            table += fac * (x[:, None] ** (j - order)) * P[j][None, :]
        _TABLES[key] = np.ascontiguousarray(table)
    return _TABLES[key]


def derivative_window(T: int, window: int) -> int:
    """The fitting window of a sequence of ``T`` frames: ``window``, or the largest odd
    length that fits (all ``T`` frames when fewer than 3)."""
    n = min(window, T if T % 2 else T - 1)
    return n if n >= 3 else T


def _tables(T: int, plan: PyramidPlan):
    n = derivative_window(T, plan.window)
    tv = savgol_table(n, 1)
    ta = savgol_table(n, 2)
    if plan.time == "normalized":
        tv, ta = tv * T, ta * (T * T)
    return tv, ta


def piece_features(ext, ie0: int, ip0: int, ip1: int, T: int, plan: PyramidPlan) -> np.ndarray:
    """Frame feature rows ``[P | V | A | R]`` (the features of the plan, in that order) of
    sequence positions ``ip0 .. ip1 - 1``.

    ``P``: kept joints relative to the hip centre; ``V``, ``A``: their
    Savitzky-Golay first and second derivatives (window ``plan.window``,
    polynomial degree 2), per frame, or with respect to the normalized time
    ``t / T`` (``plan.time = "normalized"``: times ``T`` and ``T^2``);
    ``R``: the relative positions ``p_a - p_b`` of the plan's joint ``pairs``.
    ``ext`` holds the frames of positions ``ie0 ..``, at least ``plan.halo``
    frames beyond the piece on either side where the sequence has them.
    """
    from .._kernels import dynamics as _kd

    tv, ta = _tables(T, plan)
    out = np.empty((ip1 - ip0, plan.frame_dim))
    c, k = plan.selection.arrays()
    f = plan.features
    pr = np.asarray(plan.pairs, dtype=np.int64).reshape(-1, 2)
    _kd.piece_features(np.ascontiguousarray(ext), int(ie0), int(ip0), int(ip1), int(T), c, k, tv, ta,
                       "positions" in f, "velocities" in f, "accelerations" in f,
                       np.ascontiguousarray(pr[:, 0]), np.ascontiguousarray(pr[:, 1]), out)
    return out


_SIDES = (("left", "right"), ("Left", "Right"), ("LEFT", "RIGHT"))
# a side letter standing alone between separators (``Bip01_L_Thigh``, ``Bip01 L Thigh``, ``hand.L``, ``foot_l``)
_SIDE_TOKEN = re.compile(r"(?<![A-Za-z0-9])[lLrR](?![A-Za-z0-9])")
# a side letter opening the name (``lfemur``, ``LASI``): only where the other side's name exists
_SIDE_PREFIX = re.compile(r"^[lLrR](?=[A-Za-z])")
# a capital side letter closing a camel-case name (``HipL``, ``ShoulderR``): only where the other side's name exists
_SIDE_SUFFIX = re.compile(r"(?<=[a-z0-9])[LR]$")
_SWAP = str.maketrans("lLrR", "rRlL")


def mirror_permutation(joint_names, camel_suffix: bool = True) -> tuple:
    """The joint permutation that swaps every left joint with its right counterpart, found by name.

    Two names pair when one becomes the other by exchanging ``left`` and
    ``right`` (any case: ``left_wrist``/``right_wrist``, ``LeftArm``/``RightArm``),
    a side letter standing alone between separators (``Bip01_L_Thigh``,
    ``Bip01 R Thigh``, ``hand.L``, ``foot_r``), one opening the name
    (``lfemur``/``rfemur``, ``LASI``/``RASI``) or a capital one closing a
    camel-case name (``HipL``/``HipR``; ``camel_suffix=False``: not, the rule of
    models saved before 2026-12-01). Joints without a side (spine,
    head, ``lowerback``) map to themselves. Raises ValueError when the names
    pair no joint, when a name that says its side (a ``left``/``right`` word
    or a lone side letter) has no counterpart (the mirror image would keep it
    on its side), or when a joint is named the counterpart of two.
    """
    names = [str(n) for n in joint_names]
    index = {n: j for j, n in enumerate(names)}

    def candidates(name):
        for a, b in _SIDES:
            if a in name or b in name:
                yield name.replace(a, "\0").replace(b, a).replace("\0", b)
        suffix = _SIDE_SUFFIX.finditer(name) if camel_suffix else ()
        for m in [*_SIDE_TOKEN.finditer(name), *_SIDE_PREFIX.finditer(name), *suffix]:
            yield name[:m.start()] + m.group(0).translate(_SWAP) + name[m.end():]

    def says_side(name):
        return bool(re.search("left|right", name, flags=re.IGNORECASE) or _SIDE_TOKEN.search(name))

    perm = []
    for j, n in enumerate(names):
        k = next((index[c] for c in candidates(n) if c in index and c != n), None)
        perm.append(j if k is None else k)
    if all(k == j for j, k in enumerate(perm)):
        raise ValueError("no joint names pair left with right")
    lone = [names[j] for j, k in enumerate(perm) if k == j and says_side(names[j])]
    if lone:
        raise ValueError(f"joints {lone[:4]} name a side but no joint is named as their other side")
    bad = [names[j] for j, k in enumerate(perm) if perm[k] != j]
    if bad:
        raise ValueError(f"joints {bad[:4]} pair ambiguously (a joint named as the counterpart of two)")
    return tuple(perm)


def mirror_frames(frames, perm, axis: int = 0) -> np.ndarray:
    """The mirror image of frames (T, 3J): joint ``j`` takes the coordinates of joint ``perm[j]``, and
    coordinate ``axis`` (one across the body's left-right direction) changes sign."""
    X = np.asarray(frames).reshape(len(frames), -1, 3)[:, np.asarray(perm, dtype=np.int64)].copy()
    X[:, :, int(axis)] *= -1
    return X.reshape(len(frames), -1)


def _joint_mean(frames, joints):
    idx = np.asarray(joints, dtype=np.int64)
    X = np.asarray(frames, dtype=np.float64).reshape(len(frames), -1, 3)   # float64 sums of float32 stores
    return X[:, idx].mean(axis=1)


def body_sums(frames, plan: PyramidPlan) -> np.ndarray:
    """Per-frame body measurements summed over ``frames``: ``sum(right hip - left hip)`` (3 numbers),
    ``sum |neck - hip centre|`` and ``sum(neck - hip centre)`` (3 numbers); they add across the
    pieces of a sequence (:data:`BODY_SUMS` numbers)."""
    out = np.zeros(BODY_SUMS)
    if not len(frames):
        return out
    if plan.body_frame in ("yaw", "torso"):
        out[:3] = (_joint_mean(frames, plan.right_hip) - _joint_mean(frames, plan.left_hip)).sum(axis=0)
    if plan.scale != "none" or plan.body_frame == "torso":
        spine = _joint_mean(frames, plan.neck) - _joint_mean(frames, plan.selection.center)
        if plan.scale != "none":
            out[3] = np.linalg.norm(spine, axis=1).sum()
        if plan.body_frame == "torso":
            out[4:7] = spine.sum(axis=0)
    return out


def torso_rotation(hips, spine) -> np.ndarray | None:
    """The torso frame of a hip line ``hips`` (right minus left) and a ``spine`` (neck minus hip
    centre): rows ``(r, s, r x s)``, ``r`` the unit hip line and ``s`` the unit spine with its
    ``r`` component removed (Gram-Schmidt); None when either is degenerate. The kernel of
    :func:`torso_frames`, which applies it to every frame."""
    from .._kernels import dynamics as _kd

    R = np.empty((3, 3))
    ok = _kd.torso_rotation(np.asarray(hips, dtype=np.float64), np.asarray(spine, dtype=np.float64), R)
    return R if ok else None


def body_transform(sums: np.ndarray, n_frames: int, plan: PyramidPlan):
    """The rotation ``R`` (3 x 3) and body size ``s`` of a sequence from its :func:`body_sums`.

    Yaw (``body_frame = "yaw"``): with ``u`` the camera's up axis and ``r``
    the mean right-hip-minus-left-hip vector with its ``u`` component removed
    and scaled to unit length, ``R`` has rows ``(r, u, r x u)``: a rotation
    about ``u`` after which the hips face a fixed direction. Torso
    (``body_frame = "torso"``): :func:`torso_rotation` of the mean hip line
    and the mean spine (neck minus hip centre), so that the camera's tilt
    goes too; the hip line is along x and the spine along y. Size
    (``scale = "body"``): ``s`` is the mean distance from the hip centre to
    the neck. Degenerate measurements (hips or neck on the centre) leave the
    identity and ``s = 1`` (:func:`body_fallback` says which, for the
    warning of a run); ``torso-frames`` rotates the frames themselves
    (:func:`torso_frames`), so its ``R`` is the identity.
    """
    R, s, _ = _body_transform(sums, n_frames, plan)
    return R, s


def body_fallback(sums: np.ndarray, n_frames: int, plan: PyramidPlan) -> list[str]:
    """Why :func:`body_transform` left a sequence the identity rotation or the size 1 (empty: it did not):
    the measurements of its :func:`body_sums` that give no direction or no size."""
    return _body_transform(sums, n_frames, plan)[2]


def _body_transform(sums, n_frames: int, plan: PyramidPlan):
    """``(R, s, why)``: :func:`body_transform` and the reasons of :func:`body_fallback`, from one test each."""
    R = np.eye(3)
    s = 1.0
    why = []
    m = max(n_frames, 1)
    if plan.body_frame == "yaw":
        u = np.zeros(3)
        u[plan.up_axis] = 1.0
        r = sums[:3] / m
        r = r - (r @ u) * u
        nr = np.linalg.norm(r)
        if nr > 1e-12 * max(1.0, np.abs(sums[:3]).max() / m):
            r = r / nr
            R = np.stack([r, u, np.cross(r, u)])
        else:
            why.append(f"its mean hip line (right hip minus left hip) has no length across the up axis "
                       f"{'xyz'[plan.up_axis]}: no yaw")
    elif plan.body_frame == "torso":
        T = torso_rotation(sums[:3] / m, sums[4:7] / m)
        if T is not None:
            R = T
        else:
            why.append("its mean hip line is of no length, or its mean spine (neck minus hip centre) lies along "
                       "it: no torso frame")
    if plan.scale != "none":
        size = sums[3] / m
        if size > 0:
            s = float(size)
        else:
            why.append("its neck is at the hip centre in every frame: body size 0")
    return R, s, why


def torso_frames(ext, plan: PyramidPlan) -> np.ndarray:
    """``ext`` (frames x 3J) with every frame rotated about its hip centre into its own torso frame
    (:func:`torso_rotation` of the frame's hip line and spine; a degenerate frame is left as it is,
    and :func:`torso_unrotated` counts them for the warning of a run): ``body_frame = "torso-frames"``.
    Frame by frame, so a piece cut by a chunk boundary gets the frames of the whole sequence."""
    from .._kernels import dynamics as _kd

    X = np.ascontiguousarray(ext, dtype=np.float64)
    out = np.empty_like(X)
    _kd.torso_frames(X, *_torso_roles(plan), out)
    return out


def torso_unrotated(frames, bounds, plan: PyramidPlan) -> np.ndarray:
    """How many frames of each range ``frames[a:b]`` (``bounds``: ``(a, b)`` pairs) :func:`torso_frames`
    leaves as they are, in the camera's frame: the same test of the same joint means, frame by frame."""
    from .._kernels import dynamics as _kd

    bounds = np.asarray(bounds, dtype=np.int64).reshape(-1, 2)
    out = np.zeros(len(bounds), dtype=np.int64)
    _kd.torso_unrotated(np.ascontiguousarray(frames, dtype=np.float64), *_torso_roles(plan),
                        np.ascontiguousarray(bounds[:, 0]), np.ascontiguousarray(bounds[:, 1]), out)
    return out


def _torso_roles(plan: PyramidPlan) -> tuple:
    """The joints of the hip centre, left hip, right hip and neck, as the torso kernels take them."""
    return tuple(np.asarray(j, dtype=np.int64) for j in (plan.selection.center, plan.left_hip, plan.right_hip,
                                                          plan.neck))


def window_partials(ext, ie0: int, ip0: int, ip1: int, T: int, plan: PyramidPlan, bounds=None):
    """Partial moments ``(n, mean, M2)`` (one per pyramid window) of the frame features of
    sequence positions ``ip0 .. ip1 - 1``; they merge exactly across the pieces of a sequence."""
    if plan.body_frame == "torso-frames":
        ext = torso_frames(ext, plan)
    F = piece_features(ext, ie0, ip0, ip1, T, plan)
    wb = window_bounds(T, plan.levels, plan.overlap, plan.min_window) if bounds is None else bounds
    starts = np.clip(wb[:, 0], ip0, ip1) - ip0
    stops = np.clip(wb[:, 1], ip0, ip1) - ip0
    W, d = len(wb), F.shape[1]
    n = np.empty(W, dtype=np.int64)
    mean = np.empty((W, d))
    m2 = np.empty((W, d, d))
    keep = np.arange(d // 3, dtype=np.int64)
    run_parallel(_kc.segment_moments, F, starts.astype(np.int64), stops.astype(np.int64), np.empty(0, np.int64),
                 keep, n, mean, m2)
    return n, mean, m2


#: a kernelized covariance whose every off-diagonal entry lies within this of 0 or 1 says nothing of the motion
KERNEL_SATURATED = 1e-6


def _kernelized(E, d: int, matrix: str, coef: float) -> np.ndarray:
    """The Gram matrices (N, d, d) of ``matrix`` ("rbf" or "rbf-raw") from the window matrices ``E``: the
    covariances, or for "rbf-raw" their embedding with weight 1, whose leading block holds the second moments
    ``C + mu mu^T`` (read in place)."""
    out = np.empty((len(E), d, d))
    if matrix == "rbf":
        _kk.rbf_from_covariances(E, coef, CONSTANT_RTOL, out)
    else:
        _kk.rbf_from_second_moments(E, coef, out)
    return out


def _series_distances(E, d: int, matrix: str) -> np.ndarray:
    """The squared distances ``delta`` (d, d) between the coordinate series of one window that the kernel of
    ``matrix`` takes (:mod:`streamcov._kernels.kernelized`), from its window matrix ``E``; for messages only
    (the kernel itself is the numba one)."""
    if matrix == "rbf-raw":
        M = E[:d, :d]
        return np.maximum(np.diag(M)[:, None] + np.diag(M)[None, :] - 2.0 * M, 0.0)
    c = np.diag(E).copy()
    live = (c > CONSTANT_RTOL * c.max()) & (c > 0)
    inv = np.where(live, 1.0 / np.sqrt(np.where(live, c, 1.0)), 0.0)
    v = live.astype(np.float64)
    return np.maximum(v[:, None] + v[None, :] - 2.0 * E * inv[:, None] * inv[None, :], 0.0)


def _check_not_saturated(K, E, plan: PyramidPlan, S: int, first: str) -> None:
    """Refuse kernelized covariances that are the identity, ones, or blocks of both in every window (within
    :data:`KERNEL_SATURATED`): a ``kernel_sigma`` far below or above the distances between the coordinate
    series made every descriptor nearly the same, and a run reported chance accuracy without a word (or blamed
    the map's bandwidth). One window with an entry between is enough to pass, so the check costs one window."""
    d = K.shape[-1]
    if d < 2:
        return
    iu = np.triu_indices(d, 1)
    lo, hi = KERNEL_SATURATED, 1.0 - KERNEL_SATURATED
    for k in K:
        v = k[iu]
        if ((v > lo) & (v < hi)).any():
            return
    ones = all((k[iu] >= hi).all() for k in K)
    dist = np.sqrt(_series_distances(E[0], d, plan.matrix)[iu])
    raise ConfigError(f"descriptor.kernel_sigma = {toml_value(plan.kernel_sigma)}: the kernelized covariance "
                      f"(matrix = {toml_value(plan.matrix)}) of every window of {S} sequences (from {first}) is "
                      f"{'a matrix of ones' if ones else 'the identity (or blocks of ones)'}, to within "
                      f"{KERNEL_SATURATED:g}, so the descriptors carry nothing of the motion: sigma is far "
                      f"{'above' if ones else 'below'} the distances between the coordinate series (their median "
                      f"in the first window: {float(np.median(dist)):.3g}); give a kernel_sigma near them")


def pyramid_from_moments(n, mean, m2, sums, n_frames, plan: PyramidPlan, dtype=np.float64,
                         first_index: int = 0, names=None) -> np.ndarray:
    """Descriptors (S, plan.dim) from the merged window moments of S sequences.

    ``n`` (S, W), ``mean`` (S, W, d), ``m2`` (S, W, d, d): the moments of
    every window; ``sums`` (S, :data:`BODY_SUMS`), ``n_frames`` (S,): the body measurements
    (:func:`body_sums`) and lengths. See :class:`PyramidPlan` for the formula.
    With the mirror view, the windows (W of each view) and the body sums of the views follow each
    other: ``n`` (S, 2 W), ``sums`` (S, 2 BODY_SUMS).
    """
    if plan.mirror:
        single, W = plan.single_view(), plan.n_windows
        return np.hstack([pyramid_from_moments(n[:, v * W:(v + 1) * W], mean[:, v * W:(v + 1) * W],
                                               m2[:, v * W:(v + 1) * W], sums[:, v * BODY_SUMS:(v + 1) * BODY_SUMS],
                                               n_frames, single, dtype, first_index, names)
                          for v in range(plan.views)])
    S, W, d = mean.shape
    rot = np.broadcast_to(np.eye(3), (S, 3, 3)).copy()
    size = np.ones(S)
    if plan.needs_body:
        for i in range(S):
            rot[i], size[i] = body_transform(sums[i], int(n_frames[i]), plan)
    # "rbf-raw" reads the second moments of the series from their embedding with weight 1
    m = 1.0 if plan.matrix == "rbf-raw" else float(plan.mean_weight)
    D = d + (1 if m > 0 else 0)
    C = np.empty((S, W, D, D))
    run_parallel(_kc.window_matrices, np.ascontiguousarray(n, dtype=np.int64),
                 np.ascontiguousarray(mean, dtype=np.float64), np.ascontiguousarray(m2, dtype=np.float64), rot, size,
                 int(plan.ddof), m, C.reshape(S * W, D, D))
    if plan.matrix in RBF_MATRICES:
        E = C.reshape(S * W, D, D)
        K = _kernelized(E, d, plan.matrix, _kernel_coef(plan.kernel_sigma))
        _check_not_saturated(K, E, plan, S, _name(0, first_index, names))
        C = K.reshape(S, W, d, d)
    D = C.shape[-1]
    # a covariance of k frames has rank <= k - 1, the embedding adds one: short windows take the
    # low-rank log (an r x r eigenproblem); a Gram matrix of "rbf" or "rbf-raw" is of full rank
    rank = None if plan.matrix in RBF_MATRICES else (np.maximum(n - 1, 0) + (plan.mean_weight > 0)).reshape(-1)
    V = linalg.log_vectors(C.reshape(S * W, D, D), float(plan.gamma), normalize=bool(plan.normalize),
                           dtype=dtype, check=False, rank=rank,
                           describe=lambda j: f"window {j % W} of sequence {_name(j // W, first_index, names)} "
                                              f"({n[j // W, j % W]} frames, {D} dims)")
    return V.reshape(S, W * vec_dim(D))


def pyramid_vectors(frames, offsets, plan: PyramidPlan, dtype=np.float64, block: int = 64) -> np.ndarray:
    """The descriptors of every sequence ``frames[offsets[i]:offsets[i+1]]`` in memory
    (the streamed path with one chunk), ``block`` sequences at a time so that the window
    moments (block x windows x d x d) stay small."""
    offsets = np.asarray(offsets, dtype=np.int64)
    frames = _check_frames(frames)
    if plan.mirror:
        single = plan.single_view()
        return np.hstack([pyramid_vectors(f, offsets, single, dtype, block) for f in plan.view_frames(frames)])
    S, W, d = len(offsets) - 1, plan.n_windows, plan.frame_dim
    out = np.empty((S, plan.dim), dtype=dtype)
    for b0 in range(0, S, block):
        b1 = min(S, b0 + block)
        n = np.zeros((b1 - b0, W), dtype=np.int64)
        mean = np.zeros((b1 - b0, W, d))
        m2 = np.zeros((b1 - b0, W, d, d))
        sums = np.zeros((b1 - b0, BODY_SUMS))
        for i in range(b0, b1):
            a, b = int(offsets[i]), int(offsets[i + 1])
            if b <= a:
                raise ValueError(f"sequence {i} has no frames")
            n[i - b0], mean[i - b0], m2[i - b0] = window_partials(frames[a:b], 0, 0, b - a, b - a, plan)
            if plan.needs_body:
                sums[i - b0] = body_sums(frames[a:b], plan)
        out[b0:b1] = pyramid_from_moments(n, mean, m2, sums, np.diff(offsets[b0:b1 + 1]), plan, dtype,
                                          first_index=b0)
    return out

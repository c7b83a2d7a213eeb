"""Functions of symmetric positive definite matrices: one route for every caller.

Every matrix logarithm, exponential and square root of a stack of matrices
in streamcov goes through this module: skeleton covariances (d ~ 60, paper
000 eq. (2)), region covariances and covariance operators of images (paper
004, eqs. (9) and (21)), and the public functions below. Small matrices
(d <= ``LANE_MAX_DIM``) are diagonalized eight at a time in the SIMD lanes
of :mod:`streamcov._kernels.symeig`, larger ones by LAPACK's
divide-and-conquer ``dsyevd``; both reconstruct ``U f(W) U^T``. A log whose
caller knows the matrices to be of low rank (the covariance of a window of
fewer frames than dimensions) goes through the r x r route of
:mod:`streamcov._kernels.lowrank` instead (``log_vectors(rank=...)``).

Vectorization: the upper triangle with off-diagonals times sqrt(2), so that
``<vec A, vec B> = <A, B>_F`` and Euclidean distances between vectors are
Frobenius distances between matrices (the Log-Euclidean distance of
eq. (1) of paper 000 once the matrices are logarithms).
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Sequence

import numpy as np

from ._config import run_parallel
from ._kernels import lowrank as _klr
from ._kernels import spd as _ks
from .errors import NotSPDError

LANE_MAX_DIM = _ks.LANE_MAX_DIM
# The low-rank route for ranks up to d / LOWRANK_FRACTION: at d = 115 it is 5-8x faster than the
# lane solver at rank 5-10, even at rank 40 and slower from about rank 50
# (benchmarks/spd_log_kernels.py).
LOWRANK_FRACTION = 3
_KINDS = {"log": 0, "exp": 1, "sqrt": 2}
# How messages name the regularization: a caller whose users set it under a key of their own (the skeleton
# source's ``descriptor.gamma``) names it for the messages raised inside (:func:`gamma_named`). A context
# variable, so each thread (a Dask task) has its own.
_GAMMA_NAME = contextvars.ContextVar("streamcov_gamma_name", default="gamma")


@contextlib.contextmanager
def gamma_named(name: str):
    """Within the block, errors of this module call the regularization ``name`` (e.g. a configuration
    key) instead of ``gamma``."""
    token = _GAMMA_NAME.set(name)
    try:
        yield
    finally:
        _GAMMA_NAME.reset(token)


def _gamma_words() -> str:
    return f"the regularization {_GAMMA_NAME.get()}"


def vec_dim(d: int) -> int:
    """Length of the vectorized upper triangle of a d x d matrix."""
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
        raise ValueError(f"vec_dim: expected a matrix size (an integer >= 0), got {d!r}")
    return int(d) * (int(d) + 1) // 2


def _check_stack(mats, name: str = "matrix"):
    """A float64 C-contiguous (N, d, d) stack of finite symmetric matrices, and whether one was given."""
    if np.iscomplexobj(mats):   # casting to float64 dropped the imaginary parts with a mere warning
        raise ValueError(f"{name}: complex matrices are not supported; give real symmetric ones")
    a = np.asarray(mats, dtype=np.float64)
    squeeze = a.ndim == 2
    if squeeze:
        a = a[None]
    if a.ndim != 3 or a.shape[1] != a.shape[2] or a.shape[1] == 0:
        raise ValueError(f"{name}: expected a square matrix or a stack (N, d, d) with d >= 1, got shape "
                         f"{np.shape(mats)}")
    if not np.isfinite(a).all():
        i = int(np.argwhere(~np.isfinite(a))[0][0])
        raise ValueError(f"{name} {i} contains NaN or inf")
    if len(a):
        sym_err = np.abs(a - a.transpose(0, 2, 1)).max(axis=(1, 2))
        tol = 1e-8 * np.maximum(1.0, np.abs(a).max(axis=(1, 2)))
        if (sym_err > tol).any():
            i = int(np.flatnonzero(sym_err > tol)[0])
            raise ValueError(f"{name} {i} is not symmetric (max |A - A^T| = {sym_err[i]:.3g})")
    return np.ascontiguousarray(a), squeeze


def sym_vec(mats) -> np.ndarray:
    """Upper triangle with off-diagonals times sqrt(2): ``<vec A, vec B> = <A, B>_F``."""
    mats, squeeze = _check_stack(mats)
    out = np.empty((len(mats), vec_dim(mats.shape[1])))
    run_parallel(_ks.sym_vec, mats, out)
    return out[0] if squeeze else out


def sym_unvec(vecs) -> np.ndarray:
    """Inverse of :func:`sym_vec`."""
    if np.iscomplexobj(vecs):
        raise ValueError("vecs: complex vectors are not supported; give real ones")
    vecs = np.asarray(vecs, dtype=np.float64)
    squeeze = vecs.ndim == 1
    if squeeze:
        vecs = vecs[None]
    if vecs.ndim != 2:
        raise ValueError(f"vecs: expected a vector (p,) or a stack of them (N, p), got shape {np.shape(vecs)}")
    p = vecs.shape[1]
    d = int(round((np.sqrt(8 * p + 1) - 1) / 2))
    if vec_dim(d) != p:
        raise ValueError(f"vector length {p} is not d(d+1)/2 for any d")
    if not np.isfinite(vecs).all():
        raise ValueError(f"vecs {int(np.argwhere(~np.isfinite(vecs))[0][0])} contains NaN or inf")
    out = np.empty((len(vecs), d, d))
    run_parallel(_ks.sym_unvec, np.ascontiguousarray(vecs), out)
    return out[0] if squeeze else out


def _matrix_function(mats, kind: str):
    mats, squeeze = _check_stack(mats)
    out = np.empty_like(mats)
    min_eig = np.empty(len(mats))
    run_parallel(_ks.stack_mat, mats, np.ones(len(mats)), 0.0, _KINDS[kind], out, min_eig)
    describe, largest = (lambda i: f"matrix {i}"), (lambda i: float(np.abs(mats[i]).max()))
    if kind != "exp":   # an eigenvalue that is not finite: the matrix was too large for the eigensolver
        _check_finite_result(min_eig[:, None], largest, 0.0, describe)
    if kind == "exp":
        bad = np.flatnonzero(~np.isfinite(out).all(axis=(1, 2)))
        if len(bad):   # exp(710) is infinite: the matrix was returned full of inf and NaN
            i = int(bad[0])
            raise ValueError(f"matrix {i}: its exponential overflows float64 (an eigenvalue above "
                             f"{np.log(np.finfo(np.float64).max):.2f}, largest entry {np.abs(mats[i]).max():.3g}); "
                             f"scale the matrix down")
    if kind == "log" and (min_eig <= 0).any():
        i = int(np.flatnonzero(min_eig <= 0)[0])
        raise NotSPDError(f"matrix {i} is not positive definite (smallest eigenvalue "
                          f"{min_eig[i]:.3g}); the logarithm needs SPD input: add gamma * I")
    if kind == "sqrt":   # an eigenvalue below 0 beyond rounding: the kernel left the matrix NaN
        bad = np.flatnonzero((min_eig < 0) & ~np.isfinite(out).all(axis=(1, 2)))
        if len(bad):
            i = int(bad[0])
            raise NotSPDError(f"matrix {i} has a negative eigenvalue {min_eig[i]:.3g}; the square root "
                              f"needs positive semidefinite input")
    _check_finite_result(out, largest, 0.0, describe)
    return out[0] if squeeze else out


def spd_logm(mats) -> np.ndarray:
    """Matrix logarithm of SPD matrices by eigendecomposition (paper 000, eq. (2))."""
    return _matrix_function(mats, "log")


def sym_expm(mats) -> np.ndarray:
    """Matrix exponential of symmetric matrices by eigendecomposition."""
    return _matrix_function(mats, "exp")


def spd_sqrtm(mats) -> np.ndarray:
    """The principal (positive semidefinite) square root of symmetric positive semidefinite matrices; an
    eigenvalue below 0 by no more than rounding (a singular covariance's) is taken as 0
    (:data:`streamcov._kernels.spd.PSD_ROUNDING`)."""
    return _matrix_function(mats, "sqrt")


def log_vectors(mats, gamma: float | Sequence[float] = 0.0, *, relative: bool = False, scale=None,
                normalize: bool = False, dtype=np.float64, what: str = "matrix",
                first_index: int = 0, check: bool = True, n_jobs: int | None = None, describe=None,
                rank=None):
    """``vec(log(S_i))`` for a stack of symmetric matrices ``C_i``.

    ``S_i = s_i C_i + gamma I`` (``s_i = scale[i]``, default 1), or with
    ``relative=True`` ``S_i = I + C_i / gamma``: the same logarithm less the
    constant ``log(gamma) I``, which cancels in every distance between two
    matrices regularized with the same gamma and keeps the vectors small
    (paper 004, eq. (21), and the Log-E distance of eq. (9)).

    Parameters
    ----------
    mats : array (N, d, d)
        Symmetric matrices (covariances, or scatter matrices with ``scale``).
    gamma : float or sequence of float
        Regularization; a sequence returns one array per value, computed from
        one eigendecomposition per matrix when ``d > LANE_MAX_DIM``.
    relative : bool
        ``I + C / gamma`` instead of ``C + gamma I``; needs ``gamma > 0``.
    scale : array (N,), optional
        Per-matrix factors, e.g. ``1 / (n - ddof)`` to turn the scatter
        matrices M2 of streamed moments into covariances.
    normalize : bool
        Scale each vector to unit Euclidean norm (paper 000: ``||log X||_F = 1``).
    dtype : numpy dtype
        Of the result (the computation is float64).
    what, first_index : str, int
        Name and index offset of the matrices in error messages: matrix ``i`` is ``f"{what} {first_index + i}"``
        unless ``describe`` is given; the input checks (``check``) name it ``f"{what} {i}"``.
    describe : callable, optional
        ``describe(i)`` naming matrix i in error messages.
    rank : array of int (N,), optional
        Upper bounds on the ranks of the matrices ``C_i``, which must then be
        positive semidefinite (e.g. ``n_i - 1`` for the covariance of
        ``n_i`` frames). Those of rank at most ``d / LOWRANK_FRACTION`` take
        the route of :mod:`streamcov._kernels.lowrank` (an r x r
        eigenproblem, the same result to rounding); a matrix that turns out
        not to be PSD or of higher rank falls back to the dense route.
    check : bool
        Validate finiteness and symmetry (callers that built the matrices
        themselves skip the O(N d^2) pass).
    n_jobs : int, optional
        Threads of the LAPACK route (default: numba's thread count, i.e. the
        thread plan's share inside a Dask task); 1 inside another thread pool.

    Returns
    -------
    ndarray (N, d(d+1)/2), or a list of them when ``gamma`` is a sequence.

    Raises
    ------
    NotSPDError
        When a regularized matrix is not positive definite, naming it.
    """
    many = np.ndim(gamma) > 0
    gammas = check_gammas(gamma, relative)
    out_dtype = float_dtype(dtype)
    if n_jobs is not None:   # read here, not only where the large matrices' route reads it
        from ._config import _thread_count

        _thread_count(n_jobs, 1)
    if check:
        mats, _ = _check_stack(mats, what)
    else:
        mats = np.ascontiguousarray(mats, dtype=np.float64)
    if mats.ndim != 3:
        raise ValueError(f"{what}: expected a stack (N, d, d), got shape {mats.shape}")
    n, d = mats.shape[0], mats.shape[1]
    s = np.ones(n) if scale is None else np.ascontiguousarray(scale, dtype=np.float64)
    if scale is not None and (s.shape != (n,) or not (np.isfinite(s) & (s >= 0)).all()):
        raise ValueError(f"scale: expected one finite factor >= 0 per matrix, shape ({n},), got "
                         f"{np.asarray(scale).ravel()[:5]!r}{' ...' if np.size(scale) > 5 else ''} of shape "
                         f"{np.shape(scale)}")
    describe = describe or (lambda i: f"{what} {first_index + i}")
    if n and d:
        # I + s C / gamma beyond float64 (a tiny gamma, huge entries) sent inf and NaN into the eigensolver: a
        # SystemError out of the numba kernel
        amax = np.maximum(mats.max(axis=(1, 2)), -mats.min(axis=(1, 2))) * s   # no copy of the stack
        for g in gammas:
            with np.errstate(over="ignore"):
                top = amax / g if relative else amax + g
            if not np.isfinite(top).all():
                i = int(np.flatnonzero(~np.isfinite(top))[0])
                if np.isnan(amax[i]):   # unchecked input (check=False) holding NaN: not an overflow
                    raise NotSPDError(f"{describe(i)} contains NaN")
                raise NotSPDError(f"{describe(i)} could not be computed in floating point: "
                                  f"{'C / gamma' if relative else 'C + gamma I'} overflows float64 (largest entry "
                                  f"{amax[i]:.3g}, gamma = {g:.3g}); "
                                  + (f"raise {_GAMMA_NAME.get()}" if relative else
                                     "rescale the data (e.g. coordinates to metres)"))
    outs = None
    if rank is not None:
        rank = np.asarray(rank)
        if rank.shape != (n,):
            raise ValueError(f"rank: expected one bound per matrix, shape ({n},), got shape {rank.shape}")
        if rank.dtype.kind not in "iu" or (rank < 0).any():
            raise ValueError(f"rank: expected integer bounds >= 0, one per matrix, got "
                             f"{rank.ravel()[:5]!r}{' ...' if rank.size > 5 else ''}")
    if rank is not None and (relative or min(gammas) > 0):
        cap = d // LOWRANK_FRACTION
        to_dense = rank > cap
        low = np.flatnonzero(~to_dense)
        if len(low):
            outs, done = _lowrank_log_vectors(mats, s, gammas, relative, normalize, low, cap)
            to_dense[low[~done]] = True
    if outs is None:
        outs = _dense_log_vectors(mats, s, gammas, relative, normalize, describe, n_jobs)
    elif to_dense.any():
        dense = np.flatnonzero(to_dense)
        rest = _dense_log_vectors(mats[dense], s[dense], gammas, relative, normalize,
                                  lambda i: describe(int(dense[i])), n_jobs)
        for out, part in zip(outs, rest):
            out[dense] = part
    for g, out in zip(gammas, outs):
        _check_finite_result(out, lambda i: float(np.abs(mats[i]).max()) * s[i], g, describe, relative)
    outs = [o.astype(out_dtype, copy=False) for o in outs]
    return outs if many else outs[0]


def _check_finite_result(out, largest, gamma, describe, relative=False):
    """Refuse a logarithm (or square root) whose vector or matrix holds NaN or inf: the eigensolver squares the
    entries, so matrices (``s_i C_i + gamma I``) with entries near 1e154 and above overflow it; they were
    returned as NaN without a word. ``largest(i)``: the largest entry of ``s_i C_i``."""
    if not len(out):    # an empty stack (reshape(0, -1) is ambiguous to numpy)
        return
    bad = np.flatnonzero(~np.isfinite(out.reshape(len(out), -1)).all(axis=1))
    if len(bad):
        i = int(bad[0])
        big = largest(i) / gamma if relative else largest(i)
        if not relative and gamma > big:
            raise NotSPDError(f"{describe(i)} could not be computed in floating point (NaN or infinity): "
                              f"{_gamma_words()} = {gamma:.3g} is too large for float64; lower "
                              f"{_GAMMA_NAME.get()}")
        raise NotSPDError(f"{describe(i)} could not be computed in floating point (NaN or infinity): its entries "
                          f"(largest {big:.3g}) are too large for float64; rescale the data (e.g. coordinates to "
                          f"metres)")


def check_gammas(gamma, relative: bool = False) -> list[float]:
    """The regularizations ``gamma`` (a number or a sequence of them) as a list of floats, each finite and
    >= 0 (> 0 when ``relative``), or ValueError naming gamma (NaN or inf reached the numba kernels: a
    SystemError)."""
    try:
        items = list(gamma) if np.ndim(gamma) > 0 else [gamma]
        if any(np.ndim(g) for g in items):   # numpy before 2 reads a one-element array as a number
            raise TypeError
        gammas = [float(g) for g in items]
    except (TypeError, ValueError):
        raise ValueError(f"gamma: expected a number or a sequence of numbers (the regularization), got "
                         f"{gamma!r}") from None
    for g in gammas:
        if not np.isfinite(g) or g < 0 or (relative and g <= 0):
            raise ValueError(f"regularization gamma must be a finite number {'> 0' if relative else '>= 0'}, "
                             f"got {g!r}")
    return gammas


def float_dtype(dtype) -> np.dtype:
    """``dtype`` as a numpy floating dtype, or ValueError naming it (an integer dtype truncated every
    logarithm)."""
    try:
        out = np.dtype(dtype)
    except TypeError:
        out = None
    if out is None or out.kind != "f":
        raise ValueError(f"dtype: expected a floating type (np.float64 or np.float32), got {dtype!r}")
    return out


def _dense_log_vectors(mats, s, gammas, relative, normalize, describe, n_jobs):
    """The eigensolver route of :func:`log_vectors`: lanes up to ``LANE_MAX_DIM``, LAPACK above."""
    n, d = mats.shape[0], mats.shape[1]
    if d > LANE_MAX_DIM:
        outs = _large_log_vectors(mats, s, gammas, relative, describe, n_jobs)
        if normalize:
            for out in outs:
                nrm = np.sqrt(np.einsum("ij,ij->i", out, out))
                np.divide(out, nrm[:, None], out=out, where=nrm[:, None] > 0)
        return outs
    outs = []
    for g in gammas:
        out = np.empty((n, vec_dim(d)))
        min_eig = np.empty(n)
        if relative:
            run_parallel(_ks.stack_vec, mats, s / g, 1.0, 0, normalize, out, min_eig)
        else:
            run_parallel(_ks.stack_vec, mats, s, g, 0, normalize, out, min_eig)
        _raise_not_spd(min_eig, g, describe)
        outs.append(out)
    return outs


def _lowrank_log_vectors(mats, s, gammas, relative, normalize, idx, cap):
    """The low-rank route of :func:`log_vectors` for matrices ``idx``; returns the outputs (rows
    ``idx[done]`` filled) and ``done``, the matrices it could take (PSD of rank <= ``cap``)."""
    n, d = mats.shape[0], mats.shape[1]
    idx = idx.astype(np.int64)
    done = np.ones(len(idx), dtype=bool)
    outs = []
    for g in gammas:
        out = np.empty((n, vec_dim(d)))
        ok = np.zeros(len(idx), dtype=np.bool_)
        scale, shift = (s / g, 1.0) if relative else (s, g)
        run_parallel(_klr.stack_log_vec, mats, idx, scale, shift, normalize, cap, out, ok)
        done &= ok
        outs.append(out)
    return outs, done


# a covariance is positive semidefinite: an eigenvalue below 0 is rounding, of the order of 1e-16 times its
# largest; one this many times gamma below 0 comes from values far too large, which no gamma fixes sensibly
HUGE_ROUNDING = 1e6
# the gamma that "far below" is measured from when the gamma given is smaller: the descriptors' default. A
# gamma of 1e-300 regularizes nothing, and the -4e-17 it left (the rounding of a covariance of coordinates
# near 1) was called the rounding of very large values, with the advice not to raise gamma
REFERENCE_GAMMA = 1e-4


def _not_spd_advice(min_eig: float, gamma: float) -> str:
    if gamma > 0 and -min_eig > HUGE_ROUNDING * max(gamma, REFERENCE_GAMMA):
        return (f"an eigenvalue this far below 0 is the rounding of a covariance of very large values: rescale the "
                f"data (e.g. coordinates to metres) rather than raising {_gamma_words()} (now {gamma})")
    return f"increase {_gamma_words()} (now {gamma})"


def _raise_not_spd(min_eig, gamma, describe):
    bad = np.flatnonzero(~(min_eig > 0))
    if len(bad):
        i = int(bad[0])
        if not np.isfinite(min_eig[i]):
            raise NotSPDError(f"{describe(i)} could not be computed in floating point (NaN or infinity): the "
                              f"coordinates are too large; rescale the data (e.g. to metres)")
        raise NotSPDError(f"{describe(i)} is not positive definite (smallest eigenvalue "
                          f"{min_eig[i]:.3g}); {_not_spd_advice(min_eig[i], gamma)}")


def _large_log_vectors(mats, scale, gammas, relative, describe, n_jobs=None):
    """LAPACK route for d > LANE_MAX_DIM: one ``dsyevd`` per matrix serves every gamma.

    ``log(I + C / gamma)`` (or ``log(C + gamma I)`` when it is positive
    semidefinite) equals ``B B^T`` with ``B = U diag(sqrt(f(w)))``: a
    symmetric rank-k update (``dsyrk``, half the flops of a general product)
    whose upper triangle is all that the vector needs. Matrices run in
    threads with one BLAS thread each (:func:`streamcov._config.map_threads`);
    inside a Dask task the thread plan's numba share applies.
    """
    from scipy.linalg import eigh
    from scipy.linalg.blas import dsyrk

    from ._config import map_threads

    n, d = mats.shape[0], mats.shape[1]
    iu = np.triu_indices(d)
    coef = np.where(iu[0] == iu[1], 1.0, np.sqrt(2.0))
    outs = [np.empty((n, len(coef))) for _ in gammas]

    def one(i):
        w, u = eigh(mats[i] * scale[i] if scale[i] != 1.0 else mats[i], driver="evd", check_finite=False)
        for g in gammas:
            # the smallest eigenvalue of the regularized matrix, as the lane route reports it
            low = 1.0 + w[0] / g if relative else w[0] + g
            if low <= 0:
                raise NotSPDError(f"{describe(i)} is not positive definite (smallest eigenvalue "
                                  f"{low:.3g}); {_not_spd_advice(low, g)}")
        if relative:
            # a covariance operator is PSD: its eigenvalues below 0 are rounding
            w = np.maximum(w, 0.0)
        rows = []
        for g in gammas:
            f = np.log1p(w / g) if relative else np.log(w + g)
            if f[0] >= 0:
                up = dsyrk(1.0, u * np.sqrt(f))   # upper triangle of B B^T
            else:
                up = (u * f) @ u.T
            rows.append(up[iu] * coef)
        return rows

    for i, rows in enumerate(map_threads(one, range(n), n_jobs)):
        for k, r in enumerate(rows):
            outs[k][i] = r
    return outs


def merge_moments(a, b):
    """Chan et al.'s pairwise merge of two partial moments ``(n, mean, M2)``.

    ``M2`` is the scatter matrix ``sum (x - mean)(x - mean)^T`` (d, d), or its
    diagonal (d,): the sums of squared deviations per feature. Exact: the
    moments of a sequence cut into pieces merge to those of the whole.
    """
    na, ma, sa = a
    nb, mb, sb = b
    if na < 0 or nb < 0:   # a negative count gave a negative sum of squares without a word
        raise ValueError(f"merge_moments: counts must be >= 0, got {na} and {nb}")
    if np.shape(ma) != np.shape(mb) or np.shape(sa) != np.shape(sb):   # numpy's broadcasting error
        raise ValueError(f"merge_moments: the two moments have different shapes: mean {np.shape(ma)} and "
                         f"{np.shape(mb)}, M2 {np.shape(sa)} and {np.shape(sb)}")
    n = na + nb
    if n == 0:
        return 0, np.zeros_like(np.asarray(ma, dtype=np.float64)), np.zeros_like(np.asarray(sa, dtype=np.float64))
    if na == 0:
        return nb, np.asarray(mb, dtype=np.float64), np.asarray(sb, dtype=np.float64)
    if nb == 0:
        return na, np.asarray(ma, dtype=np.float64), np.asarray(sa, dtype=np.float64)
    delta = np.asarray(mb, dtype=np.float64) - ma
    f = (na * nb) / n
    cross = np.outer(delta, delta) if np.ndim(sa) == 2 else delta * delta
    return n, ma + delta * (nb / n), sa + sb + f * cross


__all__ = ["LANE_MAX_DIM", "log_vectors", "merge_moments", "spd_logm", "spd_sqrtm", "sym_expm",
           "sym_unvec", "sym_vec", "vec_dim"]

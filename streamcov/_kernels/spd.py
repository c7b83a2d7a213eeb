"""Batched functions of symmetric matrices by eigendecomposition, and vectorization.

Every matrix function (log, exp, sqrt) of a stack goes through ``stack_vec``/``stack_mat``
(or the fused ``frames_log_vec`` of the skeleton descriptor): LANES matrices
at a time with :mod:`.symeig` (about 2.5x faster than LAPACK dsyevd at
d ~ 60), LAPACK for any matrix the lane solver hands back and for every
matrix above ``LANE_MAX_DIM``.
"""
import math

import numpy as np
from numba import njit, prange

from .._config import JIT_OPTS
from . import symeig as _se
from .covariance import _select_frame, gram_upper

SQRT2 = math.sqrt(2.0)


#: eigenvalues of a d x d positive semidefinite matrix come out of the eigensolvers with errors up to about
#: d * eps times the largest: a singular covariance (fewer samples than dimensions) gets eigenvalues of -1e-16
#: to -1e-13 times its largest. The square root takes eigenvalues down to this many times d * eps * largest as
#: 0 (it had refused every singular matrix)
PSD_ROUNDING = 8.0


@njit(**JIT_OPTS)
def _f(x, kind):
    """The scalar function of ``kind``: 0 log, 1 exp, 2 sqrt (of an eigenvalue clipped at 0: rounding)."""
    if kind == 0:
        return math.log(x)
    if kind == 1:
        return math.exp(x)
    return math.sqrt(max(x, 0.0))


@njit(**JIT_OPTS)
def _valid(wmin, wabs, d, kind):
    """log needs a positive definite matrix, sqrt a semidefinite one (``wmin`` below 0 by no more than the
    rounding of ``d`` eigenvalues of magnitude up to ``wabs``, :data:`PSD_ROUNDING`), exp anything symmetric."""
    if kind == 0:
        return wmin > 0.0
    if kind == 2:
        return wmin >= -PSD_ROUNDING * d * 2.220446049250313e-16 * wabs
    return True


@njit(**JIT_OPTS)
def _recon_one(c, kind, ul, lg):
    """lg = U f(W) U^T for one symmetric ``c`` by LAPACK (dsyevd); returns its smallest eigenvalue.

    The fallback of the lane solver and the reference it is tested against.
    ``ul`` and ``lg`` are d x d scratch buffers owned by the calling thread;
    the reconstruction is :func:`.covariance.gram_upper` (a fixed order, not
    BLAS, so that a matrix gives the same bits in any run).
    A matrix outside the domain of ``kind`` gets NaNs.
    """
    d = c.shape[0]
    w, u = np.linalg.eigh(c)
    wmin = w[0]
    if not _valid(wmin, max(-w[0], w[d - 1]), d, kind):
        lg[:, :] = np.nan
        return wmin
    for j in range(d):
        w[j] = _f(w[j], kind)
        for i in range(d):
            ul[j, i] = u[i, j]
    gram_upper(ul, d, lg, w)
    return wmin


@njit(**JIT_OPTS)
def _recon_lane(ws, q, kind, ul, lg):
    """lg = U^T f(w) U for lane q of a solved ``eig_lanes`` workspace (eigenvectors are
    the rows of U); returns the smallest eigenvalue. NaNs outside the domain of ``kind``."""
    _a, z, w, _e, _dl, _st, _mq, _it, _status, _v, _sc, _us, _sl, _fl = ws
    d = lg.shape[0]
    wmin = w[0, q]
    wabs = abs(w[0, q])
    for j in range(1, d):
        wmin = min(wmin, w[j, q])
        wabs = max(wabs, abs(w[j, q]))
    if not _valid(wmin, wabs, d, kind):
        lg[:, :] = np.nan
        return wmin
    fw = ul[0]
    for j in range(d):
        fw[j] = _f(w[j, q], kind)
    gram_upper(z[q], d, lg, fw)
    return wmin


@njit(**JIT_OPTS)
def _vec_into(lg, normalize, out):
    """out = upper triangle of the (numerically) symmetric ``lg``, off-diagonals
    symmetrized and times sqrt(2); optionally scaled to unit norm."""
    d = lg.shape[0]
    k = 0
    nrm = 0.0
    for i in range(d):
        out[k] = lg[i, i]
        nrm += lg[i, i] * lg[i, i]
        k += 1
        for j in range(i + 1, d):
            v = SQRT2 * 0.5 * (lg[i, j] + lg[j, i])
            out[k] = v
            nrm += v * v
            k += 1
    if normalize and nrm > 0.0:
        inv = 1.0 / math.sqrt(nrm)
        for k in range(out.shape[0]):
            out[k] *= inv


# Matrices per prange chunk: many chunks per thread, so that a thread slowed
# down by other load does not hold back the batch, while the scratch buffers
# allocated per chunk are amortized over several matrices. A multiple of
# LANES: the matrices of a chunk are diagonalized LANES at a time.
LANES = _se.LANES
CHUNK = 4 * LANES
# Above this size LAPACK's blocked dsyevd wins over the lane solver (whose
# per-thread workspace also grows as LANES d^2).
LANE_MAX_DIM = 128


@njit(**JIT_OPTS)
def _chunks(batch):
    return (batch + CHUNK - 1) // CHUNK


@njit(**JIT_OPTS)
def _group(c, cnt, ws, kind, ul, lg, out_vec, out_mat, as_vec, min_eig, g0, normalize, use_lanes):
    """f(c[q]) for q < cnt into ``out_vec[g0 + q]`` (a vector) or ``out_mat[g0 + q]`` (a matrix).

    The matrices are diagonalized together by :func:`symeig.eig_lanes`
    (Householder tridiagonalization, then implicit QL with the scalar
    recurrences of all of them in one SIMD register); a lane it hands back
    (non-finite entries, no QL convergence), or every matrix when
    ``use_lanes`` is False, goes through LAPACK. ``c`` is left unchanged.
    """
    status = ws[8]
    if use_lanes:
        _se.eig_lanes(c, cnt, ws)
    for q in range(cnt):
        if use_lanes and status[q] == 1:
            wmin = _recon_lane(ws, q, kind, ul, lg)
        else:
            wmin = _recon_one(c[q], kind, ul, lg)
        min_eig[g0 + q] = wmin
        if as_vec:
            _vec_into(lg, normalize, out_vec[g0 + q])
        else:
            dst = out_mat[g0 + q]
            for i in range(lg.shape[0]):   # loops, not dst[:, :] = lg: no shape check (and its message) to compile
                for j in range(lg.shape[1]):
                    dst[i, j] = lg[i, j]


@njit(parallel=True, **JIT_OPTS)
def _stack(mats, scale, shift, kind, normalize, out_vec, out_mat, as_vec, min_eig):
    batch = mats.shape[0]
    d = mats.shape[1]
    use_lanes = d <= LANE_MAX_DIM
    n_chunks = _chunks(batch)
    for ch in prange(n_chunks):
        lo = ch * CHUNK
        hi = min(batch, lo + CHUNK)
        c = np.empty((LANES, d, d), dtype=np.float64)
        ws = _se.lanes_workspace(d if use_lanes else 1)
        ul = np.empty((d, d), dtype=np.float64)
        lg = np.empty((d, d), dtype=np.float64)
        for g0 in range(lo, hi, LANES):
            cnt = min(LANES, hi - g0)
            for q in range(cnt):
                s = g0 + q
                f = scale[s]
                for i in range(d):
                    for j in range(d):
                        c[q, i, j] = mats[s, i, j] * f
                    c[q, i, i] += shift
            _group(c, cnt, ws, kind, ul, lg, out_vec, out_mat, as_vec, min_eig, g0, normalize,
                   use_lanes)


# stack_vec and stack_mat are Python functions calling the parallel kernel: a cached non-parallel kernel calling a
# parallel one crashed when loaded from numba's cache by another process (numba 0.61-0.62; a segmentation fault
# in every second run of `streamcov` on the declared minimum numba)
def stack_vec(mats, scale, shift, kind, normalize, out, min_eig):
    """vec(f(scale[s] mats[s] + shift I)) for a stack of symmetric matrices, one chunk per thread.

    ``kind``: 0 log, 1 exp, 2 sqrt (by eigendecomposition, U f(W) U^T).
    ``out`` (n, d(d+1)/2) receives the upper triangle with off-diagonals
    times sqrt(2), so that <vec A, vec B> = <A, B>_F; unit norm when
    ``normalize`` (paper 000 requires ||log X||_F = 1 for eq. (3)).
    ``min_eig[s]`` receives the smallest eigenvalue so the caller can report
    a matrix outside the function's domain (its output is NaN). A covariance
    from moments is ``scale = 1 / (n - ddof)`` times M2, a regularized one
    ``shift = gamma``.
    """
    _stack(mats, scale, shift, kind, normalize, out, np.empty((0, 0, 0)), True, min_eig)


def stack_mat(mats, scale, shift, kind, out, min_eig):
    """:func:`stack_vec` with the matrices f(...) as output, ``out`` of shape (n, d, d)."""
    if out.shape != mats.shape:   # the kernel copies into out[s] by index, with no shape check
        raise ValueError(f"out has shape {out.shape}, expected {mats.shape}")
    _stack(mats, scale, shift, kind, False, np.empty((0, 0)), out, False, min_eig)


@njit(parallel=True, **JIT_OPTS)
def frames_log_vec(frames, starts, stops, center_idx, keep_idx, gamma, ddof,
                   normalize, out_n, out, min_eig):
    """Fused descriptor: frames of each segment -> covariance -> log -> vec.

    Same result as ``segment_moments`` followed by ``stack_vec`` without
    the (segments, d, d) moment stack in memory: each chunk of segments is
    handled by one thread with its own buffers (frame block, LANES scatter
    matrices, eigensolver and reconstruction scratch). The scatter matrix of
    the mean-centred block is one BLAS GEMM, accumulated in float64 whatever
    the frame dtype; the LANES matrices of a group are then diagonalized
    together (``_group``).
    """
    d = 3 * keep_idx.shape[0]
    n_seg = starts.shape[0]
    n_chunks = _chunks(n_seg)
    use_lanes = d <= LANE_MAX_DIM
    empty3 = np.empty((0, 0, 0))
    for ch in prange(n_chunks):
        lo = ch * CHUNK
        hi = min(n_seg, lo + CHUNK)
        longest = 0
        for s in range(lo, hi):
            longest = max(longest, stops[s] - starts[s])
        block = np.empty((longest, d), dtype=np.float64)
        row = np.empty(d, dtype=np.float64)
        mean = np.empty(d, dtype=np.float64)
        c = np.empty((LANES, d, d), dtype=np.float64)
        ws = _se.lanes_workspace(d if use_lanes else 1)
        ul = np.empty((d, d), dtype=np.float64)
        lg = np.empty((d, d), dtype=np.float64)
        for g0 in range(lo, hi, LANES):
            cnt = min(LANES, hi - g0)
            for q in range(cnt):
                s = g0 + q
                a = starts[s]
                m = stops[s] - a
                out_n[s] = m
                for i in range(d):
                    mean[i] = 0.0
                for t in range(m):
                    _select_frame(frames[a + t], center_idx, keep_idx, row)
                    for i in range(d):
                        block[t, i] = row[i]
                        mean[i] += row[i]
                if m > 0:
                    for i in range(d):
                        mean[i] /= m
                for t in range(m):
                    for i in range(d):
                        block[t, i] -= mean[i]
                cq = c[q]
                gram_upper(block, m, cq)
                inv = 1.0 / max(m - ddof, 1)
                for i in range(d):
                    for j in range(d):
                        cq[i, j] *= inv
                    cq[i, i] += gamma
            _group(c, cnt, ws, 0, ul, lg, out, empty3, True, min_eig, g0, normalize, use_lanes)


@njit(parallel=True, **JIT_OPTS)
def sym_vec(mats, out):
    """Upper triangle, off-diagonals times sqrt(2), row-major."""
    batch = mats.shape[0]
    d = mats.shape[1]
    for s in prange(batch):
        k = 0
        for i in range(d):
            out[s, k] = mats[s, i, i]
            k += 1
            for j in range(i + 1, d):
                out[s, k] = SQRT2 * 0.5 * (mats[s, i, j] + mats[s, j, i])
                k += 1


@njit(parallel=True, **JIT_OPTS)
def sym_unvec(vecs, out):
    batch = vecs.shape[0]
    d = out.shape[1]
    for s in prange(batch):
        k = 0
        for i in range(d):
            out[s, i, i] = vecs[s, k]
            k += 1
            for j in range(i + 1, d):
                v = vecs[s, k] / SQRT2
                out[s, i, j] = v
                out[s, j, i] = v
                k += 1

"""The log of ``scale M + shift I`` for a positive semidefinite M of low rank, without a d x d eigensolver.

A covariance of n frames has rank at most n - 1. The pyramid windows of a
short sequence hold far fewer frames than the matrix has dimensions (an
MSR-Action3D level-2 window: about 10 frames of 115 coordinates), so most of
the matrix is the regularization ``shift I``. With ``M = L L^T`` (L is d x r)
and ``f(x) = log(1 + a x)``, ``f(0) = 0`` gives the push-through identity

    log(shift I + scale M) = log(shift) I + L h(L^T L) L^T,   h(x) = log(1 + a x) / x,
    a = scale / shift,

so the eigensolver runs on the r x r matrix ``L^T L`` instead of the d x d
one: O(d r^2 + d^2 r) in place of O(d^3). h is smooth and positive on
x >= 0 (h(0) = a), so no eigenvalue is divided by. L comes from a pivoted
Cholesky factorization, which finds the numerical rank of a PSD matrix by
itself: it stops when the largest remaining diagonal is at rounding level.
A matrix whose rank exceeds ``max_rank``, or which is not positive
semidefinite (a remaining diagonal below -tol, or a remaining entry above
tol where a PSD remainder would bound it by its diagonals), is left to the
caller's dense eigensolver (``done[s] = False``).

Compiled without reassociation (``ORDERED_JIT_OPTS``), like
:func:`.covariance.gram_upper`: the features must be the same bits in every
process, whichever of them compiled the kernels.
"""
import math

import numpy as np
from numba import njit, prange

from .._config import ORDERED_JIT_OPTS
from .covariance import gram_upper
from .spd import CHUNK, _chunks, _vec_into

EPS = np.finfo(np.float64).eps
# The remaining diagonal counted as zero, in units of eps * d * (largest diagonal): the
# Schur complement of a rank-r PSD matrix is rounding noise of about eps r max|M| once
# the r factors are out; a dense eigensolver resolves eigenvalues no better than
# eps ||M||.
TOL_UNITS = 16.0


@njit(**ORDERED_JIT_OPTS)
def _pivoted_cholesky(c, scale, max_rank, tol, lt, diag):
    """Rows ``lt[:r]`` with ``scale c = lt[:r]^T lt[:r] + E``, ``|E| <= tol``; returns r, or -1
    when the rank exceeds ``max_rank`` or a remaining diagonal is below -tol (not PSD)."""
    d = c.shape[0]
    for i in range(d):
        diag[i] = c[i, i] * scale
    for k in range(max_rank + 1):
        p = 0
        best = diag[0]
        worst = diag[0]
        for i in range(1, d):
            x = diag[i]
            if x > best:
                best = x
                p = i
            if x < worst:
                worst = x
        if worst < -tol:
            return -1
        if best <= tol:
            return k
        if k == max_rank:
            return -1
        row = lt[k]
        for i in range(d):
            row[i] = c[i, p] * scale
        for j in range(k):
            f = lt[j, p]
            prev = lt[j]
            for i in range(d):
                row[i] -= prev[i] * f
        inv = 1.0 / math.sqrt(best)
        for i in range(d):
            row[i] *= inv
            diag[i] -= row[i] * row[i]
        diag[p] = 0.0
    return -1


@njit(**ORDERED_JIT_OPTS)
def _log_one(c, scale, shift, normalize, max_rank, lt, diag, full, out):
    """vec(log(scale c + shift I)) into ``out`` when c is PSD of rank <= max_rank; returns whether it was."""
    d = c.shape[0]
    top = 0.0
    for i in range(d):
        top = max(top, abs(c[i, i]) * scale)
    tol = TOL_UNITS * EPS * d * top
    r = _pivoted_cholesky(c, scale, max_rank, tol, lt, diag)
    if r < 0:
        return False
    # The products below are loops, not BLAS: with a few rows, OpenBLAS's small-matrix paths
    # round differently with operand alignment (see covariance.gram_upper).
    gram_upper(lt, r, full)
    # The remainder scale c - L^T L must be at rounding level everywhere, not only on the
    # diagonal: an indefinite matrix can have a zero diagonal.
    for i in range(d):
        for j in range(d):
            if abs(c[i, j] * scale - full[i, j]) > tol:
                return False
    a = 1.0 / shift
    if r > 0:
        g = np.empty((r, r))
        for p in range(r):
            for q in range(p, r):
                acc = 0.0
                for i in range(d):
                    acc += lt[p, i] * lt[q, i]
                g[p, q] = acc
                g[q, p] = acc
        w, v = np.linalg.eigh(g)
        P = np.zeros((r, d))                # diag(sqrt h) V^T L^T
        for k in range(r):
            x = max(w[k], 0.0)
            h = a if a * x < 1e-300 else math.log1p(a * x) / x
            sq = math.sqrt(h)
            for m in range(r):
                f = v[m, k] * sq
                for i in range(d):
                    P[k, i] += f * lt[m, i]
        gram_upper(P, r, full)              # L h(L^T L) L^T
    else:
        full[:, :] = 0.0
    ls = math.log(shift)
    for i in range(d):
        full[i, i] += ls
    _vec_into(full, normalize, out)
    return True


@njit(parallel=True, **ORDERED_JIT_OPTS)
def stack_log_vec(mats, idx, scale, shift, normalize, max_rank, out, done):
    """:func:`.spd.stack_vec` for the log (``kind`` 0) of the matrices ``mats[idx]`` of rank <= ``max_rank``.

    ``out[i] = vec(log(scale[i] mats[i] + shift I))`` for ``i`` in ``idx``;
    needs ``shift > 0``. ``done[k]`` tells whether matrix ``idx[k]`` was
    computed; the rows of the others are left for the dense route. The
    smallest eigenvalue of a computed one is ``shift`` (its null space).
    """
    batch = idx.shape[0]
    d = mats.shape[1]
    for ch in prange(_chunks(batch)):
        lo = ch * CHUNK
        hi = min(batch, lo + CHUNK)
        lt = np.empty((max_rank + 1, d), dtype=np.float64)
        diag = np.empty(d, dtype=np.float64)
        full = np.empty((d, d), dtype=np.float64)
        for k in range(lo, hi):
            i = idx[k]
            done[k] = _log_one(mats[i], scale[i], shift, normalize, max_rank, lt, diag, full, out[i])

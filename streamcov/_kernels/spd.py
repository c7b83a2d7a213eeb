"""Batched SPD matrix functions by eigendecomposition, and vectorization."""
import math

import numpy as np
from numba import njit, prange

from .._config import JIT_OPTS

SQRT2 = math.sqrt(2.0)


@njit(parallel=True, **JIT_OPTS)
def cov_log_vec(n, m2, gamma, ddof, normalize, out, min_eig):
    """Regularized covariance -> matrix log -> vec, one matrix per thread.

    C = M2 / max(n - ddof, 1) + gamma I; log C = U diag(log w) U^T;
    out[s] = upper triangle with off-diagonals times sqrt(2) so that
    <vec A, vec B> = <A, B>_F; optionally scaled to unit norm (paper 000
    requires ||log X||_F = 1 for eq. (3)). min_eig[s] receives the smallest
    eigenvalue so the caller can report a matrix that is not SPD.
    """
    batch = m2.shape[0]
    d = m2.shape[1]
    for s in prange(batch):
        denom = max(n[s] - ddof, 1)
        c = np.empty((d, d), dtype=np.float64)
        for i in range(d):
            for j in range(d):
                c[i, j] = m2[s, i, j] / denom
            c[i, i] += gamma
        w, u = np.linalg.eigh(c)
        min_eig[s] = w[0]
        if w[0] <= 0.0:
            for k in range(out.shape[1]):
                out[s, k] = np.nan
            continue
        lw = np.log(w)
        ul = u * lw  # scales columns
        lg = ul @ u.T
        k = 0
        nrm = 0.0
        for i in range(d):
            out[s, k] = lg[i, i]
            nrm += lg[i, i] * lg[i, i]
            k += 1
            for j in range(i + 1, d):
                v = SQRT2 * 0.5 * (lg[i, j] + lg[j, i])
                out[s, k] = v
                nrm += v * v
                k += 1
        if normalize and nrm > 0.0:
            inv = 1.0 / math.sqrt(nrm)
            for k in range(out.shape[1]):
                out[s, k] *= inv


@njit(parallel=True, **JIT_OPTS)
def spd_func(mats, kind, out, min_eig):
    """log (kind=0), exp (kind=1) or sqrt (kind=2) of a batch of symmetric matrices."""
    batch = mats.shape[0]
    for s in prange(batch):
        w, u = np.linalg.eigh(mats[s])
        min_eig[s] = w[0]
        if kind == 0:
            if w[0] <= 0.0:
                out[s] = np.nan
                continue
            f = np.log(w)
        elif kind == 1:
            f = np.exp(w)
        else:
            if w[0] < 0.0:
                out[s] = np.nan
                continue
            f = np.sqrt(w)
        out[s] = (u * f) @ u.T


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

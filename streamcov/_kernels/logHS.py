"""Pairwise divergences between small SPD matrices (region covariances)."""
import numpy as np
from numba import njit, prange

from .._config import JIT_OPTS


@njit(**JIT_OPTS)
def _logdet_chol(a):
    """log det of an SPD matrix by Cholesky; -inf when not positive definite."""
    n = a.shape[0]
    l = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            l[i, j] = a[i, j]
    out = 0.0
    for j in range(n):
        s = l[j, j]
        for k in range(j):
            s -= l[j, k] * l[j, k]
        if s <= 0.0:
            return -np.inf
        d = np.sqrt(s)
        l[j, j] = d
        out += 2.0 * np.log(d)
        for i in range(j + 1, n):
            t = l[i, j]
            for k in range(j):
                t -= l[i, k] * l[j, k]
            l[i, j] = t / d
    return out


@njit(parallel=True, **JIT_OPTS)
def logdets(mats, out):
    for s in prange(mats.shape[0]):
        out[s] = _logdet_chol(mats[s])


@njit(parallel=True, **JIT_OPTS)
def pairwise_stein(a, b, ld_a, ld_b, out):
    """Symmetric Stein divergence log det((A+B)/2) - (log det A + log det B)/2.

    a (Na, n, n), b (Nb, n, n) SPD; ld_a, ld_b their log-determinants.
    Rows of ``out`` are independent, one per thread.
    """
    na = a.shape[0]
    nb = b.shape[0]
    n = a.shape[1]
    for i in prange(na):
        m = np.empty((n, n))
        for j in range(nb):
            for p in range(n):
                for q in range(n):
                    m[p, q] = 0.5 * (a[i, p, q] + b[j, p, q])
            v = _logdet_chol(m) - 0.5 * (ld_a[i] + ld_b[j])
            out[i, j] = max(v, 0.0)

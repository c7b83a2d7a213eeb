"""Kernelized covariance (Cavazza et al., ICPR 2016) from a window's moments.

The Gaussian (RBF) Gram matrix between the standardized coordinate series
``z_i`` of a window of ``n`` frames depends on the series only through
their correlations: with ``v_i = ||z_i||^2 / (n - ddof)`` (1, or 0 for a
constant coordinate, whose standardized series is 0)

    delta_ij = ||z_i - z_j||^2 / (n - ddof) = v_i + v_j - 2 rho_ij,
    K_ij = exp(-coef * delta_ij),  coef = 1 / (2 sigma^2),

``rho`` the correlation matrix of the window's covariance ``C``. The
covariance comes from streamed moments, so ``K`` is exact across chunks.

The raw variant (:func:`rbf_from_second_moments`) does not standardize:
``delta_ij`` is the mean over the frames of ``(x_i - x_j)^2``, a function of
the window's second moments ``C + mu mu^T``, so it sees the variances and
the means that standardization removes.
"""
import numpy as np
from numba import njit

from .._config import JIT_OPTS


@njit(**JIT_OPTS)
def rbf_from_covariances(C, coef, rel_tol, out):
    """out[k] = the RBF Gram matrix of the standardized series whose covariance is C[k].

    A coordinate with ``C_ii <= rel_tol * max_j C_jj`` (or ``C_ii <= 0``) is
    constant: its standardized series is 0 (``v_i = 0``, ``rho_i. = 0``).
    ``delta`` is clipped at 0 against round-off, and ``K_ii = 1`` exactly.
    """
    N, d, _ = C.shape
    inv = np.empty(d)
    for k in range(N):
        top = 0.0
        for i in range(d):
            if C[k, i, i] > top:
                top = C[k, i, i]
        lim = rel_tol * top
        for i in range(d):
            c = C[k, i, i]
            inv[i] = 1.0 / np.sqrt(c) if c > lim and c > 0.0 else 0.0
        for i in range(d):
            out[k, i, i] = 1.0
            vi = 1.0 if inv[i] > 0.0 else 0.0
            for j in range(i + 1, d):
                vj = 1.0 if inv[j] > 0.0 else 0.0
                delta = vi + vj - 2.0 * C[k, i, j] * inv[i] * inv[j]
                if delta < 0.0:
                    delta = 0.0
                e = np.exp(-coef * delta)
                out[k, i, j] = e
                out[k, j, i] = e


@njit(**JIT_OPTS)
def rbf_from_second_moments(M, coef, out):
    """out[k] = the RBF Gram matrix of the raw series whose second moments are M[k].

    ``delta_ij = M_ii + M_jj - 2 M_ij`` (the mean of ``(x_i - x_j)^2``
    when ``M = C + mu mu^T``), clipped at 0 against round-off; ``K_ii = 1``
    exactly. Reads the leading ``d x d`` block of ``M``, ``d = out.shape[1]``,
    so a mean-embedded window matrix ``[[C + mu mu^T, mu], [mu^T, 1]]`` is
    read in place.
    """
    N, d, _ = out.shape
    for k in range(N):
        for i in range(d):
            out[k, i, i] = 1.0
            for j in range(i + 1, d):
                delta = M[k, i, i] + M[k, j, j] - 2.0 * M[k, i, j]
                if delta < 0.0:
                    delta = 0.0
                e = np.exp(-coef * delta)
                out[k, i, j] = e
                out[k, j, i] = e

"""Long-vector updates of the L-BFGS driver, rounded exactly as numpy rounds them.

``q - a * y`` in numpy is two roundings (the product, then the sum) and a
temporary the size of ``q``; here it is one pass in place with the same two
roundings: no ``fastmath`` (which would contract the pair into one fused
multiply-add and change the last bit), so the result is bitwise numpy's.
"""
from numba import njit

from .._config import CACHE

# exact IEEE arithmetic, element by element as numpy does it: no contraction, no reassociation
EXACT_JIT_OPTS = dict(cache=CACHE, nogil=True, fastmath=False)


@njit(**EXACT_JIT_OPTS)
def sub_scaled(q, a, y):
    """``q -= a * y`` in place (``a`` a float, ``q`` and ``y`` float64 vectors of one length)."""
    for j in range(q.shape[0]):
        q[j] = q[j] - a * y[j]


@njit(**EXACT_JIT_OPTS)
def add_scaled(q, a, y):
    """``q += a * y`` in place."""
    for j in range(q.shape[0]):
        q[j] = q[j] + a * y[j]


@njit(**EXACT_JIT_OPTS)
def scale_columns(W, inv, Wp, W32):
    """``Wp = W * inv`` (``inv`` per column) and ``W32 = Wp`` rounded to ``W32``'s dtype, in one pass."""
    k, D = W.shape
    for i in range(k):
        for j in range(D):
            v = W[i, j] * inv[j]
            Wp[i, j] = v
            W32[i, j] = v


@njit(**EXACT_JIT_OPTS)
def penalized_gradient(G, r, dm, inv, n, lam, W, out):
    """``out = (G - outer(r, dm)) * inv / n + lam * W`` (``inv`` per column), each operation rounded
    as numpy rounds it, in one pass instead of one per operation."""
    k, D = G.shape
    for i in range(k):
        ri = r[i]
        for j in range(D):
            out[i, j] = ((G[i, j] - ri * dm[j]) * inv[j]) / n + lam * W[i, j]


@njit(**EXACT_JIT_OPTS)
def column_moments(A, mean, M2):
    """Column means and sums of squared deviations of ``A`` (n, D) into the float64 vectors ``mean`` and
    ``M2``, as numpy forms them from ``B = A.astype(float64)``: ``B.sum(axis=0) / n``, then
    ``np.square(B - mean).sum(axis=0)`` (each sum adds the rows in order to numpy's identity, +0.0, so a
    column of -0.0 has mean +0.0 in both). Two reads of ``A`` in its own dtype
    instead of a float64 copy and three passes over it. For ``D >= 2`` only: numpy reduces a single column
    as a 1-d array, by pairwise summation."""
    n, D = A.shape
    for j in range(D):
        mean[j] = 0.0
        M2[j] = 0.0
    for i in range(n):
        for j in range(D):
            mean[j] += A[i, j]
    for j in range(D):
        mean[j] = mean[j] / n
    for i in range(n):
        for j in range(D):
            d = A[i, j] - mean[j]
            M2[j] += d * d

"""Loss and gradient sums of a linear classifier over a chunk of rows, reading each row once.

For a chunk of rows ``X`` (n, D), class codes ``y`` and a model ``W`` (k, D),
``b`` (k,): the scores ``S = X W^T + b``, the row losses and residuals
``R = dLoss/dS`` (:func:`_row_loss`, float64) and the gradient block
``G = R^T X`` (k, D) in ``X``'s dtype, for the objective of
:mod:`streamcov.linear`.

Why not two BLAS calls: with one column per class (k of 2 to a few dozen)
OpenBLAS runs ``X W^T`` at about a third of its square-GEMM speed when ``X``
streams from memory. Here the rows go by blocks of :data:`BLOCK_ROWS` (256 KB
of float32 at D = 2000): the forward product reads a block from memory, four
rows and four classes per sweep (16 accumulators share each load), and the
backward product finds the block still in L2, four rows and two classes per
sweep. Measured on the generated store's shape (D = 2000, k = 10, one
thread): 85 GFLOP/s of the two products together against 52 for the two
BLAS calls (``benchmarks/learner_speed.py``).

The dot products of the forward pass are sums that LLVM vectorizes only
with reassociation (``LINEAR_JIT_OPTS``). Their order is then the compiled
code's, the same on every call of the one entry point :func:`chunk_pass`
(compiled once per dtype, in this process or loaded from its cache: the
same machine code on every worker of one CPU type, as OpenBLAS's kernels
are) for C-contiguous operands (:func:`streamcov.linear.chunk_sums` makes
them so: another layout compiles another specialization). Rows are grouped
by four from the start of the chunk and classes by four (forward) and two
(backward), so the sums do not depend on how many rows a block holds
beyond that.
"""
import numpy as np
from numba import njit

from .._config import CACHE, ORDERED_JIT_OPTS

# rows per forward/backward block: 32 float32 rows of 2000 features are 256 KB, well inside L2. A multiple
# of 4: rows are grouped by four from the start of each block, so that the sums are those of groups of four
# from the start of the chunk whatever the block size
BLOCK_ROWS = 32
assert BLOCK_ROWS % 4 == 0

# reassociation for the dot products (see the module docstring); no nnan/ninf, no afn
LINEAR_JIT_OPTS = dict(cache=CACHE, nogil=True, fastmath={"nsz", "arcp", "contract", "reassoc"})


@njit(**LINEAR_JIT_OPTS)
def _forward(X, a, m, W, S):
    """``S[t, c] = X[a + t] . W[c]`` for ``t < m``: dot products accumulated in ``X``'s dtype."""
    D = X.shape[1]
    k = W.shape[0]
    zero = X.dtype.type(0)
    t = 0
    while t + 4 <= m:
        r0, r1, r2, r3 = X[a + t], X[a + t + 1], X[a + t + 2], X[a + t + 3]
        c = 0
        while c + 4 <= k:
            w0, w1, w2, w3 = W[c], W[c + 1], W[c + 2], W[c + 3]
            s00 = s01 = s02 = s03 = zero
            s10 = s11 = s12 = s13 = zero
            s20 = s21 = s22 = s23 = zero
            s30 = s31 = s32 = s33 = zero
            for j in range(D):
                x0, x1, x2, x3 = r0[j], r1[j], r2[j], r3[j]
                v = w0[j]
                s00 += x0 * v
                s10 += x1 * v
                s20 += x2 * v
                s30 += x3 * v
                v = w1[j]
                s01 += x0 * v
                s11 += x1 * v
                s21 += x2 * v
                s31 += x3 * v
                v = w2[j]
                s02 += x0 * v
                s12 += x1 * v
                s22 += x2 * v
                s32 += x3 * v
                v = w3[j]
                s03 += x0 * v
                s13 += x1 * v
                s23 += x2 * v
                s33 += x3 * v
            S[t, c], S[t, c + 1], S[t, c + 2], S[t, c + 3] = s00, s01, s02, s03
            S[t + 1, c], S[t + 1, c + 1], S[t + 1, c + 2], S[t + 1, c + 3] = s10, s11, s12, s13
            S[t + 2, c], S[t + 2, c + 1], S[t + 2, c + 2], S[t + 2, c + 3] = s20, s21, s22, s23
            S[t + 3, c], S[t + 3, c + 1], S[t + 3, c + 2], S[t + 3, c + 3] = s30, s31, s32, s33
            c += 4
        while c < k:
            w0 = W[c]
            s0 = s1 = s2 = s3 = zero
            for j in range(D):
                v = w0[j]
                s0 += r0[j] * v
                s1 += r1[j] * v
                s2 += r2[j] * v
                s3 += r3[j] * v
            S[t, c], S[t + 1, c], S[t + 2, c], S[t + 3, c] = s0, s1, s2, s3
            c += 1
        t += 4
    while t < m:
        r0 = X[a + t]
        for c in range(k):
            w0 = W[c]
            s0 = zero
            for j in range(D):
                s0 += r0[j] * w0[j]
            S[t, c] = s0
        t += 1


@njit(**LINEAR_JIT_OPTS)
def _backward(X, a, m, R, G):
    """``G[c] += sum_t R[t, c] X[a + t]`` for ``t < m``, rows by four, classes by two."""
    D = X.shape[1]
    k = G.shape[0]
    t = 0
    while t + 4 <= m:
        r0, r1, r2, r3 = X[a + t], X[a + t + 1], X[a + t + 2], X[a + t + 3]
        c = 0
        while c + 2 <= k:
            g, h = G[c], G[c + 1]
            f0, f1, f2, f3 = R[t, c], R[t + 1, c], R[t + 2, c], R[t + 3, c]
            e0, e1, e2, e3 = R[t, c + 1], R[t + 1, c + 1], R[t + 2, c + 1], R[t + 3, c + 1]
            for j in range(D):
                x0, x1, x2, x3 = r0[j], r1[j], r2[j], r3[j]
                g[j] += f0 * x0 + f1 * x1 + f2 * x2 + f3 * x3
                h[j] += e0 * x0 + e1 * x1 + e2 * x2 + e3 * x3
            c += 2
        if c < k:
            g = G[c]
            f0, f1, f2, f3 = R[t, c], R[t + 1, c], R[t + 2, c], R[t + 3, c]
            for j in range(D):
                g[j] += f0 * r0[j] + f1 * r1[j] + f2 * r2[j] + f3 * r3[j]
        t += 4
    while t < m:
        r0 = X[a + t]
        for c in range(k):
            g = G[c]
            f0 = R[t, c]
            for j in range(D):
                g[j] += f0 * r0[j]
        t += 1


@njit(**ORDERED_JIT_OPTS)
def _hinge(m):
    """``max(0, m)`` that keeps a NaN (as ``np.maximum``; Python's ``max(0.0, nan)`` is 0.0)."""
    return 0.0 if m < 0.0 else m


@njit(**ORDERED_JIT_OPTS)
def _row_loss(s, yi, b, hinge, binary, res):
    """Loss of one row's scores ``s + b`` (float64) and, into ``res``, its residuals dLoss/dScore
    (``hinge``: the squared hinge, else the log loss).

    The formulas of :func:`streamcov.linear._rows_loss_residual`, one row at a time:
    softmax with the maximum subtracted (logistic: ``log(1 + e^-z)`` as
    ``max(-z, 0) + log1p(e^-|z|)``), or the one-vs-rest squared hinge.
    Returns ``(loss, correct)``.
    """
    k = s.shape[0]
    if binary:
        z0 = s[0] + b[0]
        t = 1.0 if yi == 1 else -1.0
        correct = 1 if (z0 > 0.0) == (yi == 1) else 0
        if not hinge:
            z = t * z0
            total = max(-z, 0.0) + np.log1p(np.exp(-abs(z)))
            res[0] = -t / (1.0 + np.exp(min(z, 700.0)))
        else:
            mg = _hinge(1.0 - t * z0)
            total = mg * mg
            res[0] = -2.0 * t * mg
        return total, correct
    # argmax as numpy takes it: the first maximum, or the first NaN (a NaN score must reach the loss)
    best = 0
    mx = s[0] + b[0]
    if mx == mx:
        for c in range(1, k):
            v = s[c] + b[c]
            if v != v:
                mx = v
                best = c
                break
            if v > mx:
                mx = v
                best = c
    correct = 1 if best == yi else 0
    if not hinge:
        se = 0.0
        for c in range(k):
            e = np.exp(s[c] + b[c] - mx)
            res[c] = e
            se += e
        total = mx + np.log(se) - (s[yi] + b[yi])
        for c in range(k):
            res[c] /= se
        res[yi] -= 1.0
    else:
        total = 0.0
        for c in range(k):
            t = 1.0 if c == yi else -1.0
            mg = _hinge(1.0 - t * (s[c] + b[c]))
            total += mg * mg
            res[c] = -2.0 * t * mg
    return total, correct


@njit(**ORDERED_JIT_OPTS)
def chunk_pass(X, y, W, b, hinge, binary, want_grad, G, r):
    """Sums of one chunk: returns ``(loss_sum, n_correct)``; with ``want_grad``, ``G = R^T X``
    (overwritten, ``X``'s dtype) and ``r`` (overwritten, float64) the column sums of ``R``.

    ``X`` (n, D) and ``W`` (k, D) C-contiguous of one dtype, ``y`` (n,) int64,
    ``b`` (k,) float64, ``G`` (k, D), ``r`` (k,); ``hinge``: the squared
    hinge, else the log loss. No validation.
    """
    n = X.shape[0]
    k = W.shape[0]
    S = np.empty((BLOCK_ROWS, k), dtype=X.dtype)
    R = np.empty((BLOCK_ROWS, k), dtype=X.dtype)
    s64 = np.empty(k)
    res = np.empty(k)
    if want_grad:
        G[:, :] = 0
        r[:] = 0.0
    total = 0.0
    correct = 0
    for a in range(0, n, BLOCK_ROWS):
        m = min(BLOCK_ROWS, n - a)
        _forward(X, a, m, W, S)
        for t in range(m):
            for c in range(k):
                s64[c] = S[t, c]
            part, ok = _row_loss(s64, y[a + t], b, hinge, binary, res)
            total += part
            correct += ok
            if want_grad:
                for c in range(k):
                    R[t, c] = res[c]
                    r[c] += res[c]
        if want_grad:
            _backward(X, a, m, R, G)
    return total, correct

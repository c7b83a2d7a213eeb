"""Fast Walsh-Hadamard transform and the fused Fastfood feature map.

The Hadamard matrix here is the unnormalized Sylvester one (entries +-1,
``H_{2n} = [[H_n, H_n], [H_n, -H_n]]``), i.e. ``scipy.linalg.hadamard``.
"""
import math

import numpy as np
from numba import njit, prange

from .._config import JIT_OPTS


@njit(inline="always", **JIT_OPTS)
def _fwht_1d(x):
    """In-place unnormalized FWHT of a 1-D array whose length is a power of two.

    The first two butterfly levels are fused into one radix-4 pass: their
    inner loops (h = 1, 2) are too short to vectorize on their own.
    """
    n = x.shape[0]
    if n < 4:
        if n == 2:
            a = x[0]
            b = x[1]
            x[0] = a + b
            x[1] = a - b
        return
    for i in range(0, n, 4):
        a0 = x[i]
        a1 = x[i + 1]
        a2 = x[i + 2]
        a3 = x[i + 3]
        s01 = a0 + a1
        d01 = a0 - a1
        s23 = a2 + a3
        d23 = a2 - a3
        x[i] = s01 + s23
        x[i + 1] = d01 + d23
        x[i + 2] = s01 - s23
        x[i + 3] = d01 - d23
    h = 4
    while h < n:
        for i in range(0, n, 2 * h):
            for j in range(i, i + h):
                a = x[j]
                b = x[j + h]
                x[j] = a + b
                x[j + h] = a - b
        h *= 2


@njit(parallel=True, **JIT_OPTS)
def fwht_rows(x):
    """In-place unnormalized FWHT of every row of a C-contiguous 2-D array.

    O(n_cols log n_cols) per row; rows are spread over threads. n_cols must
    be a power of two.
    """
    for r in prange(x.shape[0]):
        _fwht_1d(x[r])


@njit(parallel=True, **JIT_OPTS)
def fastfood_cos(x, b_sign, perm, g, s, offset, scale, n_chunks, out):
    """Fastfood features ``scale * cos(V x + offset)``, one fused pass per row.

    For block k, ``V_k x = s_k * H (g_k * (H (b_k * x_pad))[perm_k])`` with H
    the unnormalized Hadamard matrix (Le, Sarlos, Smola 2013, eq. (8)); ``s``
    already holds the 1/(sigma sqrt(d')) and 1/||G||_F factors. ``x`` is
    (n, d) with d <= d' = b_sign.shape[1]; the pad is zeros. Output column
    k*d' + i is row i of block k; columns past out.shape[1] are not computed.
    Rows are split into ``n_chunks`` contiguous chunks (one per thread) so
    that each thread owns its two work buffers.
    """
    n, d = x.shape
    n_blocks, dp = b_sign.shape
    n_out = out.shape[1]
    n_chunks = min(n, n_chunks)
    if n_chunks < 1:
        return
    chunk = (n + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        buf = np.empty(dp, dtype=np.float64)
        tmp = np.empty(dp, dtype=np.float64)
        r0 = c * chunk
        r1 = min(n, r0 + chunk)
        for r in range(r0, r1):
            for k in range(n_blocks):
                base = k * dp
                m = min(dp, n_out - base)
                if m <= 0:
                    break
                for i in range(d):
                    buf[i] = x[r, i] * b_sign[k, i]
                for i in range(d, dp):
                    buf[i] = 0.0
                _fwht_1d(buf)
                for i in range(dp):
                    tmp[i] = buf[perm[k, i]] * g[k, i]
                _fwht_1d(tmp)
                for i in range(m):
                    out[r, base + i] = scale * math.cos(s[k, i] * tmp[i] + offset[base + i])

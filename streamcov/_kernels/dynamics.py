"""Frame features of a skeleton sequence piece: hip-relative positions, their smoothed derivatives
and relative positions of joint pairs.

A Savitzky-Golay derivative of order ``o`` at sequence position ``i`` is a
fixed linear combination of the ``n`` frames of the fitting window
``[a, a + n)`` with ``a = clip(i - n // 2, 0, T - n)``: the row ``i - a``
of a coefficient table (``streamcov.descriptors.skeleton.savgol_table``).
Interior frames use the centred window; the first and last ``n // 2`` frames
use the polynomial fitted to the first or last window (scipy's
``savgol_filter(mode="interp")``). A piece of a sequence therefore needs at
most ``n - 1`` frames on either side of it, which the chunk task reads from
the neighbouring chunks.
"""
import numpy as np
from numba import njit

from .._config import JIT_OPTS
from .covariance import _select_frame


@njit(**JIT_OPTS)
def _window_combination(weights, rel, r0, row, col, k3):
    """row[col:col + k3] = sum_k weights[k] rel[r0 + k]: one smoothed derivative of every coordinate."""
    for c in range(k3):
        row[col + c] = 0.0
    for k in range(weights.shape[0]):
        w = weights[k]
        src = rel[r0 + k]
        for c in range(k3):
            row[col + c] += w * src[c]


@njit(**JIT_OPTS)
def piece_features(ext, ie0, ip0, ip1, T, center_idx, keep_idx, coef_v, coef_a,
                   use_p, use_v, use_a, pair_a, pair_b, out):
    """Frame features of sequence positions ``ip0 .. ip1 - 1``.

    ext: (E, 3J) frames of sequence positions ``ie0 .. ie0 + E - 1`` (the piece
    and up to ``n - 1`` frames either side); T: the sequence length; coef_v,
    coef_a: (n, n) derivative tables of the sequence's window ``n``; pair_a,
    pair_b: joints of the relative positions ``p_a - p_b`` (empty: none). out:
    rows ``[P | V | A | R]`` of the features used, P, V, A each 3 x len(keep_idx)
    wide, R 3 x len(pair_a).
    """
    E = ext.shape[0]
    k3 = 3 * keep_idx.shape[0]
    rel = np.empty((E, k3))
    for r in range(E):
        _select_frame(ext[r], center_idx, keep_idx, rel[r])
    n = coef_v.shape[0]
    h = n // 2
    for i in range(ip0, ip1):
        row = out[i - ip0]
        col = 0
        if use_p:
            src = rel[i - ie0]
            for c in range(k3):
                row[c] = src[c]
            col += k3
        if use_v or use_a:
            a = i - h
            if a > T - n:
                a = T - n
            if a < 0:
                a = 0
            pos = i - a
            if use_v:
                _window_combination(coef_v[pos], rel, a - ie0, row, col, k3)
                col += k3
            if use_a:
                _window_combination(coef_a[pos], rel, a - ie0, row, col, k3)
                col += k3
        src = ext[i - ie0]
        for p in range(pair_a.shape[0]):
            ja = 3 * pair_a[p]
            jb = 3 * pair_b[p]
            for c in range(3):
                row[col + 3 * p + c] = np.float64(src[ja + c]) - np.float64(src[jb + c])   # float32 stores

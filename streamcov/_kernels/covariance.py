"""Streaming covariance kernels with exactly mergeable partial results.

A partial result for one sequence segment is the triple (n, mean, M2) with
M2 = sum_t (x_t - mean)(x_t - mean)^T. Two partials merge by Chan's formula
(:func:`streamcov.linalg.merge_moments`), so a sequence cut across frame
chunks gives the covariance of the whole.
"""
import numpy as np
from numba import njit, prange

from .._config import JIT_OPTS, ORDERED_JIT_OPTS


@njit(**JIT_OPTS)
def _relative_frame(frame, center_idx, keep_idx, out):
    # centre = mean of the centre joints (one hip joint, or the two hips when
    # a layout has no hip-centre joint); out = kept joints minus the centre.
    cx = 0.0
    cy = 0.0
    cz = 0.0
    m = center_idx.shape[0]
    for c in range(m):
        j = center_idx[c]
        cx += frame[3 * j]
        cy += frame[3 * j + 1]
        cz += frame[3 * j + 2]
    cx /= m
    cy /= m
    cz /= m
    for k in range(keep_idx.shape[0]):
        j = keep_idx[k]
        out[3 * k] = frame[3 * j] - cx
        out[3 * k + 1] = frame[3 * j + 1] - cy
        out[3 * k + 2] = frame[3 * j + 2] - cz

@njit(**JIT_OPTS)
def _select_frame(frame, center_idx, keep_idx, out):
    # hip-relative kept joints, or the kept joints as they are when no centre is given
    if center_idx.shape[0] > 0:
        _relative_frame(frame, center_idx, keep_idx, out)
    else:
        for k in range(keep_idx.shape[0]):
            j = keep_idx[k]
            out[3 * k] = frame[3 * j]
            out[3 * k + 1] = frame[3 * j + 1]
            out[3 * k + 2] = frame[3 * j + 2]


@njit(**ORDERED_JIT_OPTS)
def gram_upper(a, m, out, w=None):
    """out = a[:m, :d]^T diag(w) a[:m, :d] (out: d x d; w: weights of the rows, default 1) by a
    fixed loop order over the upper triangle, both triangles written.

    Not a BLAS call: OpenBLAS's GEMM paths round differently with the
    alignment of their operands and buffers, and the features must be
    bitwise the same on threads, on a cluster and from one run to the next.
    Compiled without reassociation (``ORDERED_JIT_OPTS``): reassociated
    sums may be regrouped differently where the function is inlined into a
    caller compiled in this process and where it is called from a cache
    loaded by another, so the same input could round differently.

    Every entry ``out[i, j]`` (j >= i) is the same sum in the same order
    whatever the blocking: rows of ``a`` four at a time, each adding
    ``x0 r0[j] + x1 r1[j] + x2 r2[j] + x3 r3[j]``. Four output rows share
    each load of ``r0..r3[j]`` (rows i+1..i+3 also fill a few entries left
    of their diagonal, overwritten by the mirror at the end), and the
    column index is unsigned: numba wraps a signed index that could be
    negative, which keeps LLVM from vectorizing the loop (2.4-3.0x slower).
    """
    d = out.shape[0]
    for i in range(d):
        for j in range(d):
            out[i, j] = 0.0
    end = np.uint64(d)
    t = 0
    while t + 4 <= m:               # four rows per sweep: a quarter of the loads and stores of out
        r0, r1, r2, r3 = a[t], a[t + 1], a[t + 2], a[t + 3]
        f0 = 1.0 if w is None else w[t]
        f1 = 1.0 if w is None else w[t + 1]
        f2 = 1.0 if w is None else w[t + 2]
        f3 = 1.0 if w is None else w[t + 3]
        i = 0
        while i + 4 <= d:
            a00, a01, a02, a03 = f0 * r0[i], f1 * r1[i], f2 * r2[i], f3 * r3[i]
            a10, a11, a12, a13 = f0 * r0[i + 1], f1 * r1[i + 1], f2 * r2[i + 1], f3 * r3[i + 1]
            a20, a21, a22, a23 = f0 * r0[i + 2], f1 * r1[i + 2], f2 * r2[i + 2], f3 * r3[i + 2]
            a30, a31, a32, a33 = f0 * r0[i + 3], f1 * r1[i + 3], f2 * r2[i + 3], f3 * r3[i + 3]
            o0, o1, o2, o3 = out[i], out[i + 1], out[i + 2], out[i + 3]
            for j in range(np.uint64(i), end):
                y0, y1, y2, y3 = r0[j], r1[j], r2[j], r3[j]
                o0[j] += a00 * y0 + a01 * y1 + a02 * y2 + a03 * y3
                o1[j] += a10 * y0 + a11 * y1 + a12 * y2 + a13 * y3
                o2[j] += a20 * y0 + a21 * y1 + a22 * y2 + a23 * y3
                o3[j] += a30 * y0 + a31 * y1 + a32 * y2 + a33 * y3
            i += 4
        while i < d:
            x0, x1, x2, x3 = f0 * r0[i], f1 * r1[i], f2 * r2[i], f3 * r3[i]
            o = out[i]
            for j in range(np.uint64(i), end):
                o[j] += x0 * r0[j] + x1 * r1[j] + x2 * r2[j] + x3 * r3[j]
            i += 1
        t += 4
    while t < m:
        row = a[t]
        f = 1.0 if w is None else w[t]
        for i in range(d):
            x = f * row[i]
            o = out[i]
            for j in range(np.uint64(i), end):
                o[j] += x * row[j]
        t += 1
    for i in range(d):
        for j in range(i + 1, d):
            out[j, i] = out[i, j]


@njit(parallel=True, **JIT_OPTS)
def segment_moments(frames, starts, stops, center_idx, keep_idx,
                    out_n, out_mean, out_m2):
    """(n, mean, M2) of the hip-relative coordinates of each segment.

    frames: (F, 3J) float32/float64 rows of one chunk; segment s covers rows
    starts[s]:stops[s]. An empty centre_idx means "no centring": keep_idx
    columns are used as they are (generic feature vectors, 3 per joint).
    Each segment is handled by one thread with its own buffers; the scatter
    matrix of the centred block is :func:`gram_upper`.
    """
    d = out_mean.shape[1]
    n_seg = starts.shape[0]
    for s in prange(n_seg):
        a = starts[s]
        b = stops[s]
        n = b - a
        out_n[s] = n
        if n == 0:
            for i in range(d):
                out_mean[s, i] = 0.0
                for j in range(d):
                    out_m2[s, i, j] = 0.0
            continue
        block = np.empty((n, d), dtype=np.float64)
        row = np.empty(d, dtype=np.float64)
        for t in range(n):
            _select_frame(frames[a + t], center_idx, keep_idx, row)
            for i in range(d):
                block[t, i] = row[i]
        mean = np.zeros(d, dtype=np.float64)
        for t in range(n):
            for i in range(d):
                mean[i] += block[t, i]
        for i in range(d):
            mean[i] /= n
        for t in range(n):
            for i in range(d):
                block[t, i] -= mean[i]
        for i in range(d):
            out_mean[s, i] = mean[i]
        gram_upper(block, n, out_m2[s])


@njit(parallel=True, **ORDERED_JIT_OPTS)
def window_matrices(n, mean, m2, rot, size, ddof, mean_weight, out):
    """The SPD matrix of every pyramid window from its merged moments, in one pass.

    ``n`` (S, W), ``mean`` (S, W, d), ``m2`` (S, W, d, d): window moments of
    S sequences whose frame features come in 3-vectors; ``rot`` (S, 3, 3) and
    ``size`` (S,): each sequence's body rotation and size. With
    ``C = R_3 (M2 / max(n - ddof, 1)) R_3^T / size^2`` (``R_3``: R on every
    3-vector) and ``m = mean_weight R_3 mean / size``, ``out[s * W + w]`` is
    C, or ``[[C + m m^T, m], [m^T, 1]]`` when ``mean_weight > 0`` (out then
    has side d + 1). Replaces a chain of numpy passes (scale, per-sequence
    einsum, embedding) over the (S, W, d, d) stack.
    """
    S, W, d = mean.shape
    K = d // 3
    emb = mean_weight > 0.0
    for sw in prange(S * W):
        s = sw // W
        w = sw - s * W
        R = rot[s]
        inv = 1.0 / (max(n[s, w] - ddof, 1) * size[s] * size[s])
        o = out[sw]
        src = m2[s, w]
        t = np.empty((3, 3))
        for a in range(K):
            for b in range(K):
                # R B R^T for the 3 x 3 block (a, b)
                for i in range(3):
                    for j in range(3):
                        acc = 0.0
                        for k in range(3):
                            acc += R[i, k] * src[3 * a + k, 3 * b + j]
                        t[i, j] = acc
                for i in range(3):
                    for j in range(3):
                        acc = 0.0
                        for k in range(3):
                            acc += t[i, k] * R[j, k]
                        o[3 * a + i, 3 * b + j] = acc * inv
        if emb:
            m = np.empty(d)
            mu = mean[s, w]
            for a in range(K):
                for i in range(3):
                    acc = 0.0
                    for k in range(3):
                        acc += R[i, k] * mu[3 * a + k]
                    m[3 * a + i] = mean_weight * acc / size[s]
            for i in range(d):
                for j in range(d):
                    o[i, j] += m[i] * m[j]
                o[i, d] = m[i]
                o[d, i] = m[i]
            o[d, d] = 1.0

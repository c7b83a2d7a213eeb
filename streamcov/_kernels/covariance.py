"""Streaming covariance kernels with exactly mergeable partial results.

A partial result for one sequence segment is the triple (n, mean, M2) with
M2 = sum_t (x_t - mean)(x_t - mean)^T. Two partials merge by Chan's formula
(:func:`streamcov.linalg.merge_moments`), so a sequence cut across frame
chunks gives the covariance of the whole.
"""
import numpy as np
from numba import njit, prange

from .._config import JIT_OPTS


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


@njit(parallel=True, **JIT_OPTS)
def segment_moments(frames, starts, stops, center_idx, keep_idx,
                    out_n, out_mean, out_m2):
    """(n, mean, M2) of the hip-relative coordinates of each segment.

    frames: (F, 3J) float32/float64 rows of one chunk; segment s covers rows
    starts[s]:stops[s]. An empty centre_idx means "no centring": keep_idx
    columns are used as they are (generic feature vectors, 3 per joint).
    Each segment is handled by one thread with its own buffers; the scatter
    matrix is one GEMM on the centred block.
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
        m2 = block.T.copy() @ block
        for i in range(d):
            out_mean[s, i] = mean[i]
            for j in range(d):
                out_m2[s, i, j] = m2[i, j]

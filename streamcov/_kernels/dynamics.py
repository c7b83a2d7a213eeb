"""Frame features of a skeleton sequence piece: hip-relative positions, their smoothed derivatives
and relative positions of joint pairs; the torso frame of a frame or a sequence (hips and spine).

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
import math

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


@njit(**JIT_OPTS)
def torso_rotation(hips, spine, R):
    """R (3 x 3) = rows ``(r, s, r x s)``: ``r`` the unit hip line ``hips``, ``s`` the unit ``spine``
    with its ``r`` component removed (Gram-Schmidt). False (R untouched) when the hip line, or the
    spine's part across it, is at most 1e-6 of the longer of the two vectors (or both are 0): a
    degenerate measurement, whose direction float32 coordinates (7 digits) cannot give."""
    nr = math.sqrt(hips[0] * hips[0] + hips[1] * hips[1] + hips[2] * hips[2])
    nsp = math.sqrt(spine[0] * spine[0] + spine[1] * spine[1] + spine[2] * spine[2])
    tol = 1e-6 * max(nr, nsp)
    if not (nr > tol and tol > 0.0):
        return False
    r0, r1, r2 = hips[0] / nr, hips[1] / nr, hips[2] / nr
    d = spine[0] * r0 + spine[1] * r1 + spine[2] * r2
    s0, s1, s2 = spine[0] - d * r0, spine[1] - d * r1, spine[2] - d * r2
    ns = math.sqrt(s0 * s0 + s1 * s1 + s2 * s2)
    if not ns > tol:
        return False
    s0, s1, s2 = s0 / ns, s1 / ns, s2 / ns
    R[0, 0], R[0, 1], R[0, 2] = r0, r1, r2
    R[1, 0], R[1, 1], R[1, 2] = s0, s1, s2
    R[2, 0], R[2, 1], R[2, 2] = r1 * s2 - r2 * s1, r2 * s0 - r0 * s2, r0 * s1 - r1 * s0
    return True


@njit(**JIT_OPTS)
def _joint_mean(frame, joints, out):
    for c in range(3):
        out[c] = 0.0
    for j in joints:
        for c in range(3):
            out[c] += frame[3 * j + c]
    for c in range(3):
        out[c] /= joints.shape[0]


@njit(**JIT_OPTS)
def _frame_torso(f, center, left, right, neck, S, R):
    """R = :func:`torso_rotation` of frame ``f``'s hip line (mean of ``right`` minus mean of ``left``) and
    spine (mean of ``neck`` minus the hip centre, the mean of ``center``, written into ``S[0]``); False (R
    untouched) when it is degenerate. ``S``: scratch (5, 3)."""
    hc, a, b, hips, spine = S[0], S[1], S[2], S[3], S[4]
    _joint_mean(f, center, hc)
    _joint_mean(f, left, a)
    _joint_mean(f, right, b)
    for c in range(3):
        hips[c] = b[c] - a[c]
    _joint_mean(f, neck, a)
    for c in range(3):
        spine[c] = a[c] - hc[c]
    return torso_rotation(hips, spine, R)


@njit(**JIT_OPTS)
def torso_frames(X, center, left, right, neck, out):
    """out[t] = frame ``X[t]`` rotated about its hip centre (mean of ``center``) into its torso frame
    (:func:`torso_rotation` of right minus left hip and neck minus hip centre, joint means over each
    role's joints); a degenerate frame is copied unchanged (:func:`torso_unrotated` counts them)."""
    J = X.shape[1] // 3
    S = np.empty((5, 3))
    hc = S[0]
    R = np.empty((3, 3))
    for t in range(X.shape[0]):
        f = X[t]
        if not _frame_torso(f, center, left, right, neck, S, R):
            out[t] = f
            continue
        for j in range(J):
            x0, x1, x2 = f[3 * j] - hc[0], f[3 * j + 1] - hc[1], f[3 * j + 2] - hc[2]
            for c in range(3):
                out[t, 3 * j + c] = hc[c] + R[c, 0] * x0 + R[c, 1] * x1 + R[c, 2] * x2


@njit(**JIT_OPTS)
def torso_unrotated(X, center, left, right, neck, starts, stops, out):
    """out[p] = how many frames ``X[starts[p]:stops[p]]`` :func:`torso_frames` copies unchanged: those
    whose hip line and spine give no torso frame (the same test, on the same joint means)."""
    S = np.empty((5, 3))
    R = np.empty((3, 3))
    for p in range(starts.shape[0]):
        n = 0
        for t in range(starts[p], stops[p]):
            if not _frame_torso(X[t], center, left, right, neck, S, R):
                n += 1
        out[p] = n

"""Per-pixel image features (paper 004, eq. (38)) and region covariances.

Private numba kernels: arrays and scalars in, no validation. Boundaries are
handled as scipy.ndimage's ``mode="reflect"`` (half-sample symmetric,
``d c b a | a b c d | d c b a``), extended periodically with period 2n so
that filters wider than the image stay defined.

Feature table ``table`` (n_features, 3) int64, one row per output column:

    (0, 0, 0)  x (column index)          (1, 0, 0)  y (row index)
    (2, c, 0)  value of channel c        (3, c, d)  |derivative d| of channel c
    (4, 0, k)  |Gabor filter k| of the intensity

Channels: 0 = intensity, 1 = R, 2 = G, 3 = B. Derivatives d: 0 = d/dx,
1 = d/dy, 2 = d2/dx2, 3 = d2/dy2, with the filters [-1, 0, 1] and [1, -2, 1].
"""
import math

import numpy as np
from numba import njit, prange

from .._config import ORDERED_JIT_OPTS

# ITU-R BT.601 luma, as MATLAB's rgb2gray.
LUMA_R = 0.298936021293775
LUMA_G = 0.587043074451121
LUMA_B = 0.114020904255103


@njit(**ORDERED_JIT_OPTS)
def reflect_index(i, n):
    """scipy.ndimage 'reflect' index for any integer offset."""
    if n == 1:
        return 0
    period = 2 * n
    i = i % period
    if i < 0:
        i += period
    if i >= n:
        i = period - 1 - i
    return i


@njit(**ORDERED_JIT_OPTS)
def channels(img, out):
    """img (h, w, c) with c = 1 (grey) or 3 (RGB) -> out (4, h, w): I, R, G, B.

    Grey images get R = G = B = I.
    """
    h, w, c = img.shape
    for y in range(h):
        for x in range(w):
            if c == 1:
                v = img[y, x, 0]
                out[0, y, x] = v
                out[1, y, x] = v
                out[2, y, x] = v
                out[3, y, x] = v
            else:
                r = img[y, x, 0]
                g = img[y, x, 1]
                b = img[y, x, 2]
                out[0, y, x] = LUMA_R * r + LUMA_G * g + LUMA_B * b
                out[1, y, x] = r
                out[2, y, x] = g
                out[3, y, x] = b


@njit(**ORDERED_JIT_OPTS)
def abs_derivative(ch, which, out):
    """|first or second derivative| of ch (h, w) along x or y, reflect boundary."""
    h, w = ch.shape
    for y in range(h):
        for x in range(w):
            if which == 0 or which == 2:
                a = ch[y, reflect_index(x - 1, w)]
                b = ch[y, reflect_index(x + 1, w)]
            else:
                a = ch[reflect_index(y - 1, h), x]
                b = ch[reflect_index(y + 1, h), x]
            if which < 2:
                out[y, x] = abs(b - a)
            else:
                out[y, x] = abs(a - 2.0 * ch[y, x] + b)


@njit(**ORDERED_JIT_OPTS)
def reflect_pad(ch, r, out):
    """out (h + 2r, w + 2r) = ch padded by r on every side, scipy 'reflect' mode."""
    h, w = ch.shape
    for yp in range(h + 2 * r):
        y = reflect_index(yp - r, h)
        for xp in range(w + 2 * r):
            out[yp, xp] = ch[y, reflect_index(xp - r, w)]


@njit(**ORDERED_JIT_OPTS)
def gabor_magnitude(pad, r, gx_re, gx_im, gy_re, gy_im, tmp_re, tmp_im, out):
    """|ch * (gx(u) gy(v))| for a separable complex filter of half-width r.

    pad: the channel reflect-padded by r (:func:`reflect_pad`); gx, gy have
    length 2r+1, centre at index r. Convolution, not correlation; for a real
    image the magnitudes agree either way. Pass 1 filters the rows of every
    padded row into the complex buffer tmp (h + 2r, w), pass 2 the columns.
    Reflection is separable, so the two passes equal the 2-D reflect-padded
    convolution exactly. Inner loops run over contiguous x (vectorizable).
    """
    h, w = out.shape
    k2 = 2 * r
    for yp in range(h + k2):
        for x in range(w):
            tmp_re[yp, x] = 0.0
            tmp_im[yp, x] = 0.0
        for k in range(k2 + 1):
            cr = gx_re[k]
            ci = gx_im[k]
            off = k2 - k
            for x in range(w):
                v = pad[yp, x + off]
                tmp_re[yp, x] += v * cr
                tmp_im[yp, x] += v * ci
    sr = np.empty(w)
    si = np.empty(w)
    for y in range(h):
        for x in range(w):
            sr[x] = 0.0
            si[x] = 0.0
        for k in range(k2 + 1):
            c = gy_re[k]
            d = gy_im[k]
            yy = y + k2 - k
            for x in range(w):
                a = tmp_re[yy, x]
                b = tmp_im[yy, x]
                sr[x] += a * c - b * d
                si[x] += a * d + b * c
        for x in range(w):
            out[y, x] = math.sqrt(sr[x] * sr[x] + si[x] * si[x])


@njit(**ORDERED_JIT_OPTS)
def image_features(img, table, gx_re, gx_im, gy_re, gy_im, stride, out):
    """Feature matrix of one image: out (n_pixels, n_features).

    Pixels are taken on the grid rows 0, stride, 2*stride, ... and the same
    for columns, row-major. Filters always see the full-resolution image.
    gx_*, gy_* are (n_filters, 2r+1) separable Gabor factors.
    """
    h, w = img.shape[0], img.shape[1]
    ch = np.empty((4, h, w))
    channels(img, ch)
    plane = np.empty((h, w))
    nf = table.shape[0]
    r = (gx_re.shape[1] - 1) // 2
    n_gabor = 0
    for f in range(nf):
        if table[f, 0] == 4:
            n_gabor += 1
    if n_gabor > 0:
        pad = np.empty((h + 2 * r, w + 2 * r))
        reflect_pad(ch[0], r, pad)
        tmp_re = np.empty((h + 2 * r, w))
        tmp_im = np.empty((h + 2 * r, w))
    else:
        pad = np.empty((1, 1))
        tmp_re = np.empty((1, 1))
        tmp_im = np.empty((1, 1))
    for f in range(nf):
        kind = table[f, 0]
        c = table[f, 1]
        k = table[f, 2]
        if kind == 3:
            abs_derivative(ch[c], k, plane)
        elif kind == 4:
            gabor_magnitude(pad, r, gx_re[k], gx_im[k], gy_re[k], gy_im[k],
                            tmp_re, tmp_im, plane)
        p = 0
        for y in range(0, h, stride):
            for x in range(0, w, stride):
                if kind == 0:
                    out[p, f] = x
                elif kind == 1:
                    out[p, f] = y
                elif kind == 2:
                    out[p, f] = ch[c, y, x]
                else:
                    out[p, f] = plane[y, x]
                p += 1


@njit(**ORDERED_JIT_OPTS)
def covariance(feat, out):
    """(1/m) sum_i (f_i - mean)(f_i - mean)^T (paper 004, eq. (8)); returns nothing."""
    m, n = feat.shape
    mean = np.zeros(n)
    for i in range(m):
        for a in range(n):
            mean[a] += feat[i, a]
    for a in range(n):
        mean[a] /= m
    acc = np.zeros((n, n))
    row = np.empty(n)
    for i in range(m):
        for a in range(n):
            row[a] = feat[i, a] - mean[a]
        for a in range(n):
            ra = row[a]
            for b in range(np.uint64(a), np.uint64(n)):     # unsigned: no wraparound, so LLVM vectorizes
                acc[a, b] += ra * row[b]
    for a in range(n):
        for b in range(a, n):
            v = acc[a, b] / m
            out[a, b] = v
            out[b, a] = v


@njit(parallel=True, **ORDERED_JIT_OPTS)
def ragged_covariances(pixels, offsets, shapes, table, gx_re, gx_im, gy_re, gy_im,
                       stride, out_cov, out_n):
    """Region covariance of every image of a ragged batch, one image per thread.

    pixels: flat float64 buffer; image i is pixels[offsets[i]:offsets[i+1]]
    reshaped to shapes[i] = (h, w, c). out_cov (N, n, n); out_n[i] receives the
    number of sampled pixels.
    """
    n_img = offsets.shape[0] - 1
    nf = table.shape[0]
    for i in prange(n_img):
        h = shapes[i, 0]
        w = shapes[i, 1]
        c = shapes[i, 2]
        img = pixels[offsets[i]:offsets[i + 1]].reshape((h, w, c))
        m = ((h + stride - 1) // stride) * ((w + stride - 1) // stride)
        feat = np.empty((m, nf))
        image_features(img, table, gx_re, gx_im, gy_re, gy_im, stride, feat)
        covariance(feat, out_cov[i])
        out_n[i] = m

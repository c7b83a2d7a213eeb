"""cos and sin of random Fourier phases, vectorized.

numpy's float64 ``cos``/``sin`` are scalar libm calls on this kind of build
(about 20 ns per value), and for the approximate covariance operators of
paper 004 (eq. (20)) they cost more than the Gram products themselves. This
is the fdlibm algorithm written so that LLVM vectorizes it: Cody-Waite
reduction by pi/2 with a 33-bit leading constant (exact products for
|k| < 2**19), then fdlibm's degree-13/14 minimax kernels on [-pi/4, pi/4] and
a quadrant select made of selects, not branches. Absolute error at most
2.5e-16 against numpy for |z| <= MAX_PHASE (tests/test_sincos_kernel.py);
callers fall back to numpy above it.
"""
import numpy as np
from numba import njit

from .._config import ORDERED_JIT_OPTS

MAX_PHASE = 2.0 ** 19            # keeps |k| < 2**19: k * PIO2_1 exact

INV_PIO2 = 6.36619772367581382433e-01
PIO2_1 = 1.57079632673412561417e+00   # first 33 bits of pi/2
PIO2_1T = 6.07710050650619224932e-11  # pi/2 - PIO2_1
S1 = -1.66666666666666324348e-01
S2 = 8.33333333332248946124e-03
S3 = -1.98412698298579493134e-04
S4 = 2.75573137070700676789e-06
S5 = -2.50507602534068634195e-08
S6 = 1.58969099521155010221e-10
C1 = 4.16666666666666019037e-02
C2 = -1.38888888888741095749e-03
C3 = 2.48015872894767294178e-05
C4 = -2.75573143513906633035e-07
C5 = 2.08757232129817482790e-09
C6 = -1.13596475577881948265e-11


@njit(**ORDERED_JIT_OPTS)
def sincos_rows(z, co, si):
    """co[i, j] = cos(z[i, j]), si[i, j] = sin(z[i, j]); 2-D C-contiguous float64.

    Returns False if some |z| > MAX_PHASE or is NaN (outputs then unusable).
    """
    n, m = z.shape
    ok = True
    for i in range(n):
        zr = z[i]
        cr = co[i]
        sr = si[i]
        big = 0
        for j in range(m):
            x = zr[j]
            big += not (abs(x) <= MAX_PHASE)
            k = np.floor(x * INV_PIO2 + 0.5)
            r = (x - k * PIO2_1) - k * PIO2_1T
            r2 = r * r
            s = r + r * r2 * (S1 + r2 * (S2 + r2 * (S3 + r2 * (S4 + r2 * (S5 + r2 * S6)))))
            hz = 0.5 * r2
            w = 1.0 - hz
            c = w + (((1.0 - w) - hz) + r2 * r2 * (C1 + r2 * (C2 + r2 * (C3 + r2 * (
                C4 + r2 * (C5 + r2 * C6))))))
            q = k - 4.0 * np.floor(0.25 * k)          # quadrant 0..3
            swap = (q == 1.0) | (q == 3.0)
            cs = s if swap else c
            sn = c if swap else s
            cr[j] = -cs if (q == 1.0) | (q == 2.0) else cs
            sr[j] = -sn if q >= 2.0 else sn
        ok = ok and big == 0
    return ok

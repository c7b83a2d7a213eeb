"""Products of stacked random projections for the random Maclaurin map."""
from numba import njit, prange

from .._config import JIT_OPTS


@njit(parallel=True, **JIT_OPTS)
def maclaurin_products(proj, offsets, coef, out):
    """``out[r, i] = coef[i] * prod(proj[r, offsets[i]:offsets[i + 1]])``.

    ``proj`` holds the projections <w_k, x_r> of every row on all Rademacher
    vectors, stacked feature after feature; feature i owns the contiguous
    slice offsets[i]:offsets[i + 1] (empty for degree 0). One pass over
    ``proj``, rows spread over threads.
    """
    n = proj.shape[0]
    n_out = out.shape[1]
    for r in prange(n):
        for i in range(n_out):
            acc = coef[i]
            for k in range(offsets[i], offsets[i + 1]):
                acc *= proj[r, k]
            out[r, i] = acc

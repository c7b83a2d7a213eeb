"""Products of groups of projections: the random maps of paper 000, eq. (3), and random Maclaurin."""
from numba import njit, prange

from .._config import JIT_OPTS


@njit(parallel=True, **JIT_OPTS)
def grouped_products(z, group_start, scale, out):
    """``out[r, j] = scale[j] * prod(z[r, group_start[j]:group_start[j + 1]])``.

    ``z`` holds the projections of every row on all random vectors, stacked
    feature after feature; feature j owns the contiguous slice
    ``group_start[j]:group_start[j + 1]`` (empty for degree 0, which gives the
    constant ``scale[j]``). Rows are spread over threads; one pass over ``z``.
    """
    rows = z.shape[0]
    n_out = scale.shape[0]
    for r in prange(rows):
        for j in range(n_out):
            p = scale[j]
            for k in range(group_start[j], group_start[j + 1]):
                p *= z[r, k]
            out[r, j] = p

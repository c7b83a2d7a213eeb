"""Products of groups of Gaussian projections for the map of paper 000, eq. (3)."""
import numpy as np
from numba import njit, prange

from .._config import JIT_OPTS


@njit(parallel=True, **JIT_OPTS)
def grouped_products(z, group_start, scale, out):
    """out[r, j] = scale[j] * prod(z[r, group_start[j]:group_start[j+1]]).

    An empty group (degree n = 0) gives the constant scale[j].
    """
    rows = z.shape[0]
    n_out = scale.shape[0]
    for r in prange(rows):
        for j in range(n_out):
            p = scale[j]
            for k in range(group_start[j], group_start[j + 1]):
                p *= z[r, k]
            out[r, j] = p

"""The series of eq. (3) of paper 000 cut after ``max_degree``: what it misses of the Gaussian kernel at the
training rows, said by the RGW map's own fit (:mod:`streamcov.features._rgw`) and, in the words of a pipeline's
``[features]`` table, by :func:`streamcov.features.registry.check_map_on_rows` (a module of its own, which
both import)."""
from __future__ import annotations

import numpy as np


#: the largest relative bias of the training rows' kernel diagonal that the cut series may leave without a warning
CUT_SERIES_BIAS = 1e-3


class CutSeriesWarning(UserWarning):
    """The series of eq. (3), cut after ``max_degree``, misses a share of the kernel at the training rows
    (:func:`cut_series`). A pipeline says it in the words of its ``[features]`` table
    (:func:`streamcov.features.registry.check_map_on_rows`), also for a map fitted on no rows."""


def cut_series(X, mean, s2: float, max_degree: int, prefix: str = "") -> str | None:
    """What the Taylor series of eq. (3), cut after ``max_degree``, misses of the kernel's diagonal at the rows
    ``X``, in one line naming the options with ``prefix`` (``"features."``: as the ``[features]`` table, in a
    pipeline), or None when that is at most :data:`CUT_SERIES_BIAS`. The relative bias of ``k(x, x)`` is
    ``P(N > max_degree)``,
    ``N ~ Poisson(|x|^2 / sigma^2)`` (of the centred rows, ``mean`` given), the largest where the norm is. The
    map's features would otherwise underestimate the kernel without a word (uncentred unit vectors at sigma
    0.125 keep 4% of it)."""
    from scipy.stats import poisson

    Xc = X if mean is None else X - mean.astype(X.dtype, copy=False)
    t = float(np.einsum("ij,ij->i", Xc, Xc, dtype=np.float64).max(initial=0.0)) / s2
    bias = float(poisson.sf(max_degree, t))
    if not bias > CUT_SERIES_BIAS:
        return None
    need = poisson.isf(CUT_SERIES_BIAS, t)   # NaN where t is beyond the law's numerics
    fix = (f"raise {prefix}max_degree to {int(need) + 1} or raise {prefix}sigma" if np.isfinite(need) and need < 10_000
           else f"scale the rows (e.g. to unit norm) or raise {prefix}sigma")
    center = "features.center = true" if prefix else "center=True"
    return (f"the series of eq. (3) is cut after degree {max_degree if prefix else f'max_degree={max_degree}'}, "
            f"which misses {bias:.1%} of the kernel's diagonal at the training row of largest norm (|x|^2 / sigma^2 "
            f"= {t:.3g}); {fix}{'' if mean is not None else f', or center the rows ({center})'}")

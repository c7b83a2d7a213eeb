"""Private numba kernels: arrays and scalars in, arrays out.

No validation, no I/O, no Dask here: the public functions in
:mod:`streamcov.linalg`, :mod:`streamcov.descriptors` and :mod:`streamcov.features` check their inputs
and call these. The same kernels serve the local and the distributed paths.
"""
from .._config import stamp_kernels_by_their_sources

stamp_kernels_by_their_sources()   # before any kernel module's first njit
